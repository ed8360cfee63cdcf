"""Recording the CUDA caching allocator's history and dumping it as a snapshot pickle.

``torch.cuda.memory._record_memory_history`` starts a ring buffer of the last ``max_entries``
allocator events, each with its Python stack; ``_dump_snapshot`` writes them with the
allocator's state (read back with ``traceinsight memory``). Both are private PyTorch APIs, so
failures are reported, never raised into the user's program, and nothing happens without CUDA.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger("traceinsight.capture")

# About 100 B of allocator state per entry on the GPU host and a few hundred bytes each in the
# pickle: 100,000 entries keep the last several steps of a training loop in tens of MB.
DEFAULT_MAX_ENTRIES = 100_000


def snapshot_path(trace_path: Path) -> Path:
    """The snapshot beside a trace: ``run.json.gz`` -> ``run.memory.pickle`` (rank kept)."""
    name = trace_path.name
    for ext in (".json.gz", ".json"):
        if name.endswith(ext) and len(name) > len(ext):
            return trace_path.with_name(name[: -len(ext)] + ".memory.pickle")
    return trace_path.with_name(name + ".memory.pickle")


class MemoryHistory:
    """Start recording on ``start()``; ``dump(path)`` writes the snapshot and stops recording."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self.recording = False
        self.reason: str | None = None  # why nothing was recorded

    def start(self) -> bool:
        torch = _torch_with_cuda()
        if torch is None:
            self.reason = "CUDA is not available"
            return False
        record = torch.cuda.memory._record_memory_history
        try:
            # Python stacks only: C++ frames ("all") cost far more to symbolize at dump time.
            record(enabled="all", context="all", stacks="python", max_entries=self.max_entries)
        except TypeError:  # releases before the keyword arguments existed
            record(True, max_entries=self.max_entries)
        self.recording = True
        return True

    def dump(self, path: Path) -> Path | None:
        """Write the snapshot to ``path`` atomically (a temporary file beside it, then renamed),
        then stop recording. Returns the path, or None when nothing was recorded."""
        if not self.recording:
            return None
        torch = _torch_with_cuda()
        assert torch is not None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            os.close(fd)
            try:
                torch.cuda.memory._dump_snapshot(tmp)
                os.chmod(tmp, _new_file_mode())  # mkstemp makes the file private
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        finally:
            self.stop()
        log.info("traceinsight: wrote %s", path)
        return path

    def stop(self) -> None:
        if not self.recording:
            return
        self.recording = False
        torch = _torch_with_cuda()
        if torch is not None:
            with contextlib.suppress(Exception):
                torch.cuda.memory._record_memory_history(enabled=None)


def _torch_with_cuda() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _new_file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask
