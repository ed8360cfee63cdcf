"""Answers from a CUDA caching-allocator snapshot: peak, leaks, fragmentation, OOM, comparison."""
