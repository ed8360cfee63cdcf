"""The registered single-trace analyses, one module each, in the order the report shows them."""
