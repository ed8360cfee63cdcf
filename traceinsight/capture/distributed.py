"""The process's place in a torch.distributed job, for naming what capture writes per rank."""

from __future__ import annotations


def dist_rank() -> int | None:
    """This process's rank under an initialized torch.distributed, else None."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:
        pass
    return None
