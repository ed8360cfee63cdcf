"""What a directory, a glob or a list of files holds, and which of its traces to analyse.

The layouts met in practice:

- ``torch.profiler.tensorboard_trace_handler(dir)`` writes one file per profiler cycle (each
  ``schedule`` repeat, each ``prof.step()`` past ``active``) as
  ``<host>_<pid>.<time>.pt.trace.json[.gz]``; ``<time>`` is ms on older torch, ns on newer.
  Lightning's ``PyTorchProfiler`` uses the same handler with its own writer name
  (``fit-[Strategy]DDPStrategy.training_step``).
- Under DDP every rank writes its own files; ``distributedInfo.rank`` in each says which.
- Serving engines (vLLM, SGLang, xDiT) write, beside the run's trace, a trace of the CUDA/HIP
  graph capture done at start-up (``graph_capture_rank_0…``, ``capture_bs_32_rank0…``,
  ``capture_trace_rank_0…``, or a ``capture_traces/`` folder). Those are set aside as the
  run's captures (merged into it by ``analyze``), not taken for cycles or ranks.

So a set of files is one of: one trace; successive cycles of one process (the latest is
analysed unless another is asked for); the ranks of one job, over one or more cycles; or
something else, which is refused with one line that lists what was found. Files that are not
traces (other JSON in the directory) are left out with a note when traces remain.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from traceinsight.errors import UsageError
from traceinsight.trace.discover import (
    JobDiscoveryError,
    JobSpec,
    RankFile,
    distributed_info,
    expand,
    is_url,
    job_spec,
    rank_from_name,
    read_head,
)
from traceinsight.trace.inputs import names_many

# tensorboard_trace_handler's name: the writer (host_pid by default) and the time written.
_HANDLER_NAME = re.compile(r"^(?P<writer>.+)\.(?P<time>\d{10,19})\.pt\.trace\.json(?:\.gz)?$")
# The handler's default writer name: host and pid, no rank in it even if the host name has
# "worker3" or "rank1" in it.
_HOST_PID = re.compile(r"^.+_\d+$")
_BASE_TIME = re.compile(rb'"baseTimeNanoseconds"\s*:\s*(\d+)')
_TRACE_KEY = re.compile(rb'"(?:traceEvents|schemaVersion|deviceProperties)"\s*:')
_SHOWN = 4  # file names listed in one line before "(+N more)"
# A graph capture trace's file or folder name: "capture" as a word of it.
_CAPTURE_NAME = re.compile(r"(?i)(?:^|[^a-z])capture(?:[^a-z]|$)")
_CAPTURE_FOLDER = re.compile(r"(?i)^capture_traces?$")

Kind = Literal["trace", "job"]


@dataclass(frozen=True)
class Found:
    """One file of the input: what its name and head say, or why it is not a trace."""

    path: str
    rank_file: RankFile | None = None  # None: no rank in the head or the name
    writer: str | None = None  # tensorboard_trace_handler's writer name, when the name has one
    written_ns: int | None = None  # when the cycle was written (name, else head, else mtime)
    problem: str | None = None  # why this is not a trace; None for a trace

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Layout:
    """What the input holds: its cycles in the order written, each the ranks of one cycle."""

    source: str
    kind: Kind  # "trace": one file per cycle; "job": the ranks of a job per cycle
    cycles: tuple[JobSpec, ...]
    what: str  # "process host_1234" or "2 ranks", for the notes
    skipped: tuple[str, ...] = ()  # "path: reason" of files that are not traces
    captures: tuple[str, ...] = ()  # graph capture traces beside the run (serving engines)


def _time_ns(digits: str) -> int:
    # 13 digits: ms since the epoch (torch <= 2.5); 19: ns (time.time_ns(), newer torch).
    return int(digits.ljust(19, "0"))


def probe(path: str) -> Found:
    """What one file is, from its name and the head of its text; never raises for bad data."""
    try:
        head = read_head(path)
    except OSError as exc:
        return Found(path, problem=f"cannot read ({exc.strerror or exc})")
    except (zlib.error, EOFError) as exc:
        return Found(path, problem=f"not a readable gzip file ({exc})")
    text = head.lstrip()
    if not text:
        # A gzip stream cut short or corrupt early decompresses to nothing, without an error.
        return Found(path, problem="not a readable gzip file (no data in it)" if _gzipped(path) else "empty")
    if text[:1] != b"{" or _TRACE_KEY.search(head) is None:
        return Found(path, problem="not a trace (no traceEvents)")
    name = path.rstrip("/").rsplit("/", 1)[-1]
    handler = _HANDLER_NAME.match(name)
    writer = handler.group("writer") if handler else None
    written = _time_ns(handler.group("time")) if handler else None
    if written is None and (base := _BASE_TIME.search(head)) is not None:
        written = int(base.group(1))
    if written is None and not is_url(path):
        written = os.stat(path).st_mtime_ns
    info = distributed_info(head) or {}
    named = None if writer is not None and _HOST_PID.match(writer) else rank_from_name(path)
    rank, world, backend = info.get("rank"), info.get("world_size"), info.get("backend")
    stem = named[1] if named else None
    world_size = world if isinstance(world, int) and not isinstance(world, bool) else None
    rank_file = None
    if isinstance(rank, int) and not isinstance(rank, bool):
        rank_file = RankFile(path, rank, world_size, backend if isinstance(backend, str) else None,
                             "distributedInfo", stem)
    elif named is not None:
        rank_file = RankFile(path, named[0], world_size, None, "file name", stem)
    return Found(path, rank_file, writer, written)


def _gzipped(path: str) -> bool:
    if is_url(path):
        return path.endswith(".gz")
    with open(path, "rb") as handle:
        return handle.read(2) == b"\x1f\x8b"


def _rank_files(found: Sequence[Found]) -> list[RankFile]:
    return [f.rank_file for f in found if f.rank_file is not None]


def _label(source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    names = [os.fspath(s) for s in source]
    if len(names) == 1:
        return names[0]
    folders = {os.path.dirname(n) for n in names}
    return f"{len(names)} files in {folders.pop() or '.'}" if len(folders) == 1 else f"{len(names)} files"


def _list(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" (+{len(names) - _SHOWN} more)" if len(names) > _SHOWN else "")


def _cycles_text(count: int) -> str:
    return f"{count} cycle" + ("" if count == 1 else "s")


def resolve(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    allow_missing: bool = False,
) -> Layout:
    """The layout of ``source`` (a directory, a glob, files or URLs); raises
    :class:`JobDiscoveryError` with one line listing what was found when it is not one trace,
    cycles of one process, or the ranks of one job."""
    label = _label(source)
    found = [probe(p) for p in expand(source)]
    traces = [f for f in found if f.problem is None]
    skipped = tuple(f"{f.path}: {f.problem}" for f in found if f.problem is not None)
    if not traces:
        raise JobDiscoveryError(f"{label}: no trace among {len(found)} file(s): {_list(skipped)}")
    traces.sort(key=lambda f: (f.written_ns is None, f.written_ns or 0, f.path))
    captures = tuple(f.path for f in traces if is_capture_name(f.path))
    if captures and len(captures) < len(traces):
        traces = [f for f in traces if f.path not in captures]
        return replace(_resolve_traces(label, traces, skipped, allow_missing), captures=captures)
    return _resolve_traces(label, traces, skipped, allow_missing)


def is_capture_name(path: str) -> bool:
    """Whether ``path`` is named as a graph capture trace: "capture" a word of its file name,
    or its folder named ``capture_traces`` (vLLM's)."""
    parts = path.replace("\\", "/").rstrip("/").rsplit("/", 2)
    folder = parts[-2] if len(parts) > 1 else ""
    return bool(_CAPTURE_NAME.search(parts[-1])) or _CAPTURE_FOLDER.match(folder) is not None


def _resolve_traces(label: str, traces: list[Found], skipped: tuple[str, ...], allow_missing: bool) -> Layout:
    ranked = [f for f in traces if f.rank_file is not None]
    unranked = [f for f in traces if f.rank_file is None]
    if len(traces) == 1:
        only = traces[0]
        rank_file = only.rank_file or RankFile(only.path, 0, rank_from="only trace")
        spec = job_spec([rank_file], allow_missing=True)
        return Layout(label, "trace", (spec,), f"trace {only.name}", skipped)
    try:
        if ranked and unranked:
            raise JobDiscoveryError(
                f"{label}: not one run: {len(ranked)} trace(s) with a rank ({_list([f.name for f in ranked])}) "
                f"and {len(unranked)} without ({_list([f.name for f in unranked])}); name the files to analyse"
            )
        if unranked:
            return _process_cycles(label, unranked, skipped)
        return _job_cycles(label, ranked, skipped, allow_missing)
    except JobDiscoveryError as exc:
        if not skipped:
            raise
        # The whole picture in the one line: the files that are not traces as well.
        raise JobDiscoveryError(f"{exc} (and {len(skipped)} file(s) that are not traces: {_list(skipped)})") from None


def _process_cycles(label: str, traces: list[Found], skipped: tuple[str, ...]) -> Layout:
    """Traces with no rank: the cycles of one writer, or a mix that is refused."""
    writers: dict[str | None, list[Found]] = {}
    for f in traces:
        writers.setdefault(f.writer, []).append(f)
    if None in writers or len(writers) > 1:
        parts = [
            f"{w} ({_cycles_text(len(fs))})" if w is not None else _list([f.name for f in fs])
            for w, fs in writers.items()
        ]
        raise JobDiscoveryError(
            f"{label}: {len(traces)} traces of different runs, none with a rank: {'; '.join(parts)}; "
            "name the file to analyse, or compare them with `traceinsight compare FILE...`"
        )
    writer = traces[0].writer
    cycles = tuple(JobSpec(ranks=(RankFile(f.path, 0, rank_from="only trace"),), world_size=1,
                           name=writer or "") for f in traces)
    return Layout(label, "trace", cycles, f"process {writer}", skipped)


def _job_cycles(label: str, traces: list[Found], skipped: tuple[str, ...], allow_missing: bool) -> Layout:
    """Traces with ranks: each rank's files in the order written are its cycles."""
    by_rank: dict[int, list[Found]] = {}
    for f in traces:
        assert f.rank_file is not None
        by_rank.setdefault(f.rank_file.rank, []).append(f)
    counts = {rank: len(fs) for rank, fs in sorted(by_rank.items())}
    if max(counts.values()) == 1:
        spec = job_spec(_rank_files(traces), allow_missing=allow_missing)
        return Layout(label, "job" if len(counts) > 1 else "trace", (spec,), f"{len(counts)} ranks", skipped)
    for rank, fs in by_rank.items():
        # Cycles are told apart by the time in tensorboard_trace_handler's names; two files of
        # one rank without it are two jobs' files, not two cycles.
        # job_spec over all of them says how they fail to be one job (world sizes, names, or
        # "rank N appears twice").
        if len(fs) > 1 and any(f.writer is None for f in fs):
            job_spec(_rank_files(traces))
            raise JobDiscoveryError(f"rank {rank} appears twice: {_list([f.path for f in fs])}")
    if len(set(counts.values())) > 1:
        parts = ", ".join(f"rank {r}: {n}" for r, n in counts.items())
        raise JobDiscoveryError(
            f"{label}: the ranks have different numbers of profiler cycles ({parts}); name the files of one cycle"
        )
    count = next(iter(counts.values()))
    cycles = tuple(
        job_spec(_rank_files([fs[k] for fs in by_rank.values()]), allow_missing=allow_missing)
        for k in range(count)
    )
    kind: Kind = "job" if len(counts) > 1 else "trace"
    what = f"{len(counts)} ranks" if len(counts) > 1 else f"rank {next(iter(counts))}"
    return Layout(label, kind, cycles, what, skipped)


Cycle = int | Literal["latest", "all"]


def parse_cycle(text: str | int) -> Cycle:
    """``latest``, ``all`` or a cycle number (1 the oldest, -1 the latest)."""
    if isinstance(text, int):
        value = text
    elif text.strip().lower() in ("latest", "all"):
        return "all" if text.strip().lower() == "all" else "latest"
    else:
        try:
            value = int(text)
        except ValueError:
            raise UsageError(f"cycle {text!r}: give a cycle number (1 the oldest, -1 the latest), latest or all") from None
    if value == 0:
        raise UsageError("cycle 0: cycles count from 1 (the oldest); -1 is the latest")
    return value


def chosen_index(layout: Layout, cycle: int | str) -> int | None:
    """The index into ``layout.cycles`` that ``cycle`` names; None for ``all``."""
    choice = parse_cycle(cycle)
    count = len(layout.cycles)
    if choice == "all":
        return None
    if choice == "latest":
        return count - 1
    if not -count <= choice <= count:
        raise UsageError(f"cycle {choice}: there are {_cycles_text(count)} of {layout.what} in {layout.source}")
    return choice - 1 if choice > 0 else count + choice


CLI_CHOICE = "--cycle N (1 the oldest) picks another, --cycle all compares them"
API_CHOICE = "cycle=N (1 the oldest) picks another, ti.compare compares them"


def notes(layout: Layout, index: int | None, choice: str = CLI_CHOICE) -> tuple[str, ...]:
    """One line each: the cycles found and which was taken (``choice``: how to take another);
    the files left out."""
    lines: list[str] = []
    count = len(layout.cycles)
    if count > 1 and index is not None:
        which = "the latest" if index == count - 1 else f"cycle {index + 1}"
        files = layout.cycles[index].paths
        shown = Path(files[0]).name if len(files) == 1 else f"{len(files)} files"
        lines.append(
            f"{count} profiler cycles of {layout.what} in {layout.source}; analysing {which} "
            f"({shown}); {choice}"
        )
    if layout.skipped:
        lines.append(f"left out {len(layout.skipped)} file(s) that are not traces: {_list(list(layout.skipped))}")
    if layout.captures:
        names = [Path(p).name for p in layout.captures]
        lines.append(f"graph capture trace(s) merged into the run, for the ops inside its graphs: {_list(names)}")
    return tuple(lines)


def pick(layout: Layout, cycle: int | str = "latest") -> JobSpec:
    """The job of one cycle of ``layout`` (``latest``, or a number: 1 the oldest, -1 the
    latest), with the notes in its ``warnings``."""
    index = chosen_index(layout, cycle)
    if index is None:
        raise UsageError("cycle 'all' gives several runs: compare them (traceinsight compare, ti.compare)")
    spec = layout.cycles[index]
    return replace(spec, warnings=(*notes(layout, index, API_CHOICE), *spec.warnings))


def discover(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    allow_missing: bool = False,
    cycle: int | str = "latest",
) -> JobSpec:
    """The ranks of one job from ``source``; raises :class:`JobDiscoveryError` when the files
    are not one job (mixed jobs, a rank twice, ranks missing unless ``allow_missing``).

    Several profiler cycles in ``source`` (``tensorboard_trace_handler`` names) give the
    latest, or the ``cycle``-th (1 is the oldest; -1 the latest); the note says so in
    ``warnings``. One trace alone is a job of one rank."""
    return pick(resolve(source, allow_missing=allow_missing), cycle)


@dataclass(frozen=True)
class Inputs:
    """What ``analyze`` was given, resolved: one trace, the ranks of a job, or (``cycle="all"``)
    the runs of a series, each one path or a job's paths; ``notes`` say which cycle was taken
    and what was left out."""

    kind: Literal["trace", "job", "series"]
    paths: tuple[str, ...] = ()
    runs: tuple[str | tuple[str, ...], ...] = ()
    captures: tuple[str, ...] = ()  # graph capture traces beside the run
    notes: tuple[str, ...] = ()


def resolve_inputs(traces: Sequence[str], cycle: str | int = "latest") -> Inputs:
    """The files ``analyze`` works on, from its arguments (``--cycle``: which profiler cycle)."""
    if not names_many(list(traces)):
        if parse_cycle(cycle) != "latest":
            raise UsageError(f"--cycle picks among the traces of a directory or glob; {traces[0]} is one file")
        return Inputs("trace", (traces[0],))
    layout = resolve(traces[0] if len(traces) == 1 else list(traces))
    index = chosen_index(layout, cycle)
    if index is None and len(layout.cycles) == 1:
        index = 0
    said = notes(layout, index)
    if index is None:
        runs = tuple(c.paths[0] if layout.kind == "trace" else tuple(c.paths) for c in layout.cycles)
        return Inputs("series", runs=runs, notes=said)
    return Inputs(layout.kind, tuple(layout.cycles[index].paths), captures=layout.captures, notes=said)
