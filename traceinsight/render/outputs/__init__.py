"""Output formats: one module per format, each a renderer object; ``registry.py`` lists them."""
