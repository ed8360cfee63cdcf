"""profile(memory_snapshot=True) and ``capture --memory``, with the CUDA allocator faked at the
module boundary (this machine has no GPU): when recording starts and stops, where the snapshot
goes, that it is written when the profiled code raises, and atomically."""

from __future__ import annotations

import pickle
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from traceinsight.capture import memsnap, profile
from traceinsight.trace.snapshot.load import load_memory_snapshot

torch = pytest.importorskip("torch")

from tests.snapshot_builder import MiB, SnapshotBuilder, stack  # noqa: E402


class FakeAllocator:
    """Stands for torch.cuda.memory: records the calls, dumps a hand-made snapshot."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        builder = SnapshotBuilder()
        builder.segment(8 * MiB)
        builder.alloc(2 * MiB, stack("/home/user/train.py", 3, "main"))
        self.snapshot = builder.snapshot_dict()

    def _record_memory_history(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("record", kwargs.get("enabled", args[0] if args else None)))
        if "max_entries" in kwargs:
            self.calls.append(("max_entries", kwargs["max_entries"]))

    def _dump_snapshot(self, filename: str) -> None:
        self.calls.append(("dump", Path(filename).parent))
        with open(filename, "wb") as handle:
            pickle.dump(self.snapshot, handle)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeAllocator:
    allocator = FakeAllocator()
    fake_torch = SimpleNamespace(cuda=SimpleNamespace(memory=allocator, is_available=lambda: True))
    monkeypatch.setattr(memsnap, "_torch_with_cuda", lambda: fake_torch)
    return allocator


def _activities() -> list[Any]:
    return [torch.profiler.ProfilerActivity.CPU]


def test_snapshot_beside_the_trace(tmp_path: Path, fake: FakeAllocator) -> None:
    with profile(
        tmp_path / "run.json.gz",
        nvml=False,
        activities=_activities(),
        memory_snapshot=True,
        memory_max_entries=500,
    ) as p:
        assert fake.calls == [("record", "all"), ("max_entries", 500)]  # recording before the work
        torch.ones(4).sum()
    target = tmp_path / "run.memory.pickle"
    assert p.memory_snapshot_path == target
    assert [c[0] for c in fake.calls] == ["record", "max_entries", "dump", "record"]
    assert fake.calls[-1] == ("record", None)  # recording stopped after the dump
    assert load_memory_snapshot(target).blocks.height == 2
    assert sorted(x.name for x in tmp_path.iterdir()) == [
        "run.json.gz",
        "run.memory.pickle",
    ]  # no temporary left


def test_snapshot_written_when_the_code_raises(tmp_path: Path, fake: FakeAllocator) -> None:
    class OutOfMemory(RuntimeError):
        pass

    with (
        pytest.raises(OutOfMemory),
        profile(tmp_path / "run.json", nvml=False, activities=_activities(), memory_snapshot=True),
    ):
        raise OutOfMemory("CUDA out of memory")
    assert (tmp_path / "run.memory.pickle").exists()
    assert fake.calls[-1] == ("record", None)


def test_failed_dump_leaves_no_file_and_says_so(
    tmp_path: Path, fake: FakeAllocator, monkeypatch: pytest.MonkeyPatch
) -> None:
    from traceinsight.errors import CaptureError

    def broken(filename: str) -> None:
        Path(filename).write_bytes(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(fake, "_dump_snapshot", broken)
    with (
        pytest.raises(
            CaptureError,
            match=r"could not write the memory snapshot to .*run\.memory\.pickle: disk full",
        ),
        profile(
            tmp_path / "run.json.gz", nvml=False, activities=_activities(), memory_snapshot=True
        ),
    ):
        pass
    assert sorted(x.name for x in tmp_path.iterdir()) == ["run.json.gz"]
    assert fake.calls[-1] == ("record", None)


def test_no_cuda_no_snapshot_and_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memsnap, "_torch_with_cuda", lambda: None)
    with profile(
        tmp_path / "run.json.gz", nvml=False, activities=_activities(), memory_snapshot=True
    ) as p:
        pass
    assert p.memory_snapshot_path is None
    assert sorted(x.name for x in tmp_path.iterdir()) == ["run.json.gz"]


def test_without_the_option_nothing_is_recorded(tmp_path: Path, fake: FakeAllocator) -> None:
    with profile(tmp_path / "run.json.gz", nvml=False, activities=_activities()):
        pass
    assert fake.calls == []


def test_snapshot_path_names() -> None:
    assert memsnap.snapshot_path(Path("a/run.rank1.json.gz")) == Path("a/run.rank1.memory.pickle")
    assert memsnap.snapshot_path(Path("run.json")) == Path("run.memory.pickle")
    assert memsnap.snapshot_path(Path("trace")) == Path("trace.memory.pickle")


def test_capture_command_memory_flag(tmp_path: Path, fake: FakeAllocator, capsys: Any) -> None:
    from traceinsight.cli.app import main

    script = tmp_path / "train.py"
    script.write_text("import torch\nfor _ in range(3):\n    torch.ones(8).sum()\n")
    out = tmp_path / "run.json.gz"
    code = main(
        [
            "capture",
            "-o",
            str(out),
            "--memory",
            "--no-nvml",
            "--steps-from",
            "manual",
            "--",
            "python",
            str(script),
        ]
    )
    err = capsys.readouterr().err
    assert code == 0
    assert f"traceinsight: memory snapshot written to {tmp_path / 'run.memory.pickle'}" in err
    assert (tmp_path / "run.memory.pickle").exists()
