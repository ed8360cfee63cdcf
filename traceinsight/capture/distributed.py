"""The process's place in a torch.distributed job, for naming what capture writes per rank."""

from __future__ import annotations


def dist_rank() -> int | None:
    """This process's rank under an initialized torch.distributed, else None."""
    try:
        import torch.distributed as dist
    except ImportError:  # a torch built without distributed support: no rank to name
        return None
    # No catch around the calls: on an initialized process group they cannot fail for a
    # reason capture should hide (a wrong rank would misname every rank's file).
    if dist.is_available() and dist.is_initialized():
        return int(dist.get_rank())
    return None
