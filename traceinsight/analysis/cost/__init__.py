"""The cost model: FLOPs and bytes of ops from their shapes and dtypes, and the roofline of a device."""
