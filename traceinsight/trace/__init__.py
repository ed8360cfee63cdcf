"""Reading Kineto traces into polars frames: schema, reader, linking, model and cache."""
