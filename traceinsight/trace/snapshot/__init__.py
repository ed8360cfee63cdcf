"""CUDA caching-allocator snapshots (``torch.cuda.memory._dump_snapshot``) as polars frames."""
