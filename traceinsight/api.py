"""The public Python API: ``load`` a trace, ``analyze`` it, ``diff`` two runs; ``load_job``
the ranks of a distributed run (``analyze(job)`` runs the cross-rank analyses) and
``compare`` a series of runs; ``load_memory_snapshot`` / ``analyze_memory_snapshot`` for the
CUDA allocator's snapshots.

Each function takes a path or an already loaded :class:`~traceinsight.trace.model.Trace`.
Imports are lazy so that ``import traceinsight`` stays light (and ``traceinsight.capture``
works where polars is absent).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from importlib import import_module
from typing import TYPE_CHECKING, Any, Union, overload

if TYPE_CHECKING:
    from traceinsight.analysis.core.base import AnalysisConfig
    from traceinsight.analysis.device.peaks import load_toml as load_toml
    from traceinsight.analysis.diff.compare import DiffResult
    from traceinsight.analysis.job.report import JobReport
    from traceinsight.analysis.job.report import select_job_sections as select_job_sections
    from traceinsight.analysis.job.series import SeriesResult
    from traceinsight.analysis.job.series import select_series_sections as select_series_sections

    # The commands' names (see _COMMAND_NAMES), typed for the checker.
    from traceinsight.analysis.job.specs import JOB_SECTIONS as JOB_SECTIONS
    from traceinsight.analysis.registry import ANALYSES as ANALYSES
    from traceinsight.analysis.report import Report
    from traceinsight.analysis.report import analyze as analyze_trace
    from traceinsight.analysis.report import select_sections as select_sections
    from traceinsight.analysis.runner import run_one as run_one
    from traceinsight.analysis.sections.bound import BoundResult as BoundResult
    from traceinsight.analysis.sections.compile import run as run_compile
    from traceinsight.analysis.sections.gaps import run as run_gaps
    from traceinsight.analysis.snapshot.report import SnapshotReport
    from traceinsight.analysis.snapshot.report import analyze_snapshot as analyze_snapshot
    from traceinsight.analysis.whatif.model import WhatIfResult
    from traceinsight.analysis.whatif.model import whatif as replay
    from traceinsight.analysis.whatif.syntax import parse as parse_changes
    from traceinsight.analysis.whatif.transforms import Transformation
    from traceinsight.analysis.whatif.transforms import TransformError as TransformError
    from traceinsight.capture.merge import write_bytes_atomic as write_bytes_atomic
    from traceinsight.capture.runner import run_script as run_script
    from traceinsight.engine import ENGINES as ENGINES
    from traceinsight.engine.job import Job
    from traceinsight.render.documents import BoundGrouping as BoundGrouping
    from traceinsight.render.documents import BoundListing as BoundListing
    from traceinsight.render.documents import CompileReport as CompileReport
    from traceinsight.render.documents import GapsListing as GapsListing
    from traceinsight.render.documents import QueryRows as QueryRows
    from traceinsight.render.documents import WhatIfReport as WhatIfReport
    from traceinsight.render.progress import loading as loading
    from traceinsight.render.progress import phases as phases
    from traceinsight.render.progress import wants_progress as wants_progress
    from traceinsight.render.units import size as size
    from traceinsight.trace.layout import Inputs
    from traceinsight.trace.loader import load as load_file
    from traceinsight.trace.model import Trace
    from traceinsight.trace.schema import FRAME_SCHEMAS as FRAME_SCHEMAS
    from traceinsight.trace.snapshot.load import load_memory_snapshot as load_snapshot_file
    from traceinsight.trace.snapshot.model import MemorySnapshot

__all__ = [
    "ANALYSES",
    "ENGINES",
    "FRAME_SCHEMAS",
    "JOB_SECTIONS",
    "AnalysisConfig",
    "BoundGrouping",
    "BoundListing",
    "BoundResult",
    "CompileReport",
    "GapsListing",
    "PathOrTrace",
    "QueryRows",
    "Trace",
    "TransformError",
    "WhatIfReport",
    "analyze",
    "analyze_memory_snapshot",
    "analyze_snapshot",
    "analyze_trace",
    "compare",
    "diff",
    "load",
    "load_file",
    "load_job",
    "load_memory_snapshot",
    "load_snapshot_file",
    "load_toml",
    "loading",
    "parse_changes",
    "phases",
    "replay",
    "resolve_inputs",
    "run_compile",
    "run_gaps",
    "run_one",
    "run_script",
    "select_job_sections",
    "select_sections",
    "select_series_sections",
    "size",
    "wants_progress",
    "whatif",
    "write_bytes_atomic",
]

PathOrTrace = Union["Trace", str, "os.PathLike[str]"]

# What the commands use beside the functions below: the CLI imports nothing of the package but
# this module, the output formats (``render.formats``, ``render.outputs.registry``), errors,
# atomic writes and the version (the ``cli-front-door`` import contract). Each name is
# imported on first use, so that importing the API (and the CLI's help) stays light.
_COMMAND_NAMES: dict[str, tuple[str, str]] = {
    "AnalysisConfig": ("traceinsight.analysis.core.base", "AnalysisConfig"),
    "ANALYSES": ("traceinsight.analysis.registry", "ANALYSES"),
    "JOB_SECTIONS": ("traceinsight.analysis.job.specs", "JOB_SECTIONS"),
    "analyze_trace": ("traceinsight.analysis.report", "analyze"),
    "select_sections": ("traceinsight.analysis.report", "select_sections"),
    "select_job_sections": ("traceinsight.analysis.job.report", "select_job_sections"),
    "select_series_sections": ("traceinsight.analysis.job.series", "select_series_sections"),
    "run_one": ("traceinsight.analysis.runner", "run_one"),
    "run_gaps": ("traceinsight.analysis.sections.gaps", "run"),
    "run_compile": ("traceinsight.analysis.sections.compile", "run"),
    "BoundResult": ("traceinsight.analysis.sections.bound", "BoundResult"),
    "load_toml": ("traceinsight.analysis.device.peaks", "load_toml"),
    "parse_changes": ("traceinsight.analysis.whatif.syntax", "parse"),
    "TransformError": ("traceinsight.analysis.whatif.transforms", "TransformError"),
    "replay": ("traceinsight.analysis.whatif.model", "whatif"),
    "analyze_snapshot": ("traceinsight.analysis.snapshot.report", "analyze_snapshot"),
    "load_snapshot_file": ("traceinsight.trace.snapshot.load", "load_memory_snapshot"),
    "load_file": ("traceinsight.trace.loader", "load"),
    "Trace": ("traceinsight.trace.model", "Trace"),
    "FRAME_SCHEMAS": ("traceinsight.trace.schema", "FRAME_SCHEMAS"),
    "ENGINES": ("traceinsight.engine", "ENGINES"),
    "GapsListing": ("traceinsight.render.documents", "GapsListing"),
    "BoundListing": ("traceinsight.render.documents", "BoundListing"),
    "BoundGrouping": ("traceinsight.render.documents", "BoundGrouping"),
    "CompileReport": ("traceinsight.render.documents", "CompileReport"),
    "WhatIfReport": ("traceinsight.render.documents", "WhatIfReport"),
    "QueryRows": ("traceinsight.render.documents", "QueryRows"),
    "loading": ("traceinsight.render.progress", "loading"),
    "phases": ("traceinsight.render.progress", "phases"),
    "wants_progress": ("traceinsight.render.progress", "wants_progress"),
    "size": ("traceinsight.render.units", "size"),
    "run_script": ("traceinsight.capture.runner", "run_script"),
    "write_bytes_atomic": ("traceinsight.capture.merge", "write_bytes_atomic"),
}


def __getattr__(name: str) -> Any:
    found = _COMMAND_NAMES.get(name)
    if found is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = found
    return getattr(import_module(module), attr)


def load(
    path: str | os.PathLike[str], *, cache: bool = True, workers: int | None = None, cycle: int | str = "latest"
) -> Trace:
    """Load a Kineto trace (``.json`` / ``.json.gz``) into a :class:`Trace`.

    ``cache`` reuses (and writes) the Parquet copy next to the cache directory's other traces.
    ``workers``: processes that decode a big plain ``.json`` file, this one included (default:
    one per core; 1 decodes in this process alone).

    A directory or glob of one trace, or of the profiler cycles of one process
    (``tensorboard_trace_handler``), gives the latest cycle or the ``cycle``-th (1 the oldest,
    -1 the latest), with a warning that says which; the ranks of a job need :func:`load_job`.
    A graph capture trace beside the run (vLLM, SGLang, xDiT write one) is merged into it
    (:func:`merge_captures`).
    """
    from traceinsight.trace.loader import load as load_trace

    chosen, captures = _one_trace(path, cycle)
    trace = load_trace(chosen, cache=cache, workers=workers)
    return merge_captures(trace, list(captures), cache=cache) if captures else trace


def merge_captures(
    trace: PathOrTrace, captures: Sequence[PathOrTrace], *, cache: bool = True
) -> Trace:
    """``trace`` with the kernels of its CUDA/HIP graph replays given the ops (names, shapes,
    types) recorded when the graphs were captured, from the capture traces ``captures``.

    What was matched is in ``trace.meta.graph_capture`` (and the report's overview): graphs,
    the share of kernel time in graph replays and the share of it that got ops. The cost
    model, op tables, bound labels and findings then see inside the graphs.
    """
    from traceinsight.analysis.lib.graph_capture import merge_captures as merge
    from traceinsight.trace.model import Trace as TraceType

    run = _as_trace(trace, cache=cache)
    loaded = [(c.meta.path if isinstance(c, TraceType) else os.fspath(c), _as_trace(c, cache=cache)) for c in captures]
    merged, _ = merge(run, loaded)
    return merged


def resolve_inputs(traces: Sequence[str], cycle: str | int = "latest") -> Inputs:
    """What a command's trace arguments are: one trace, the ranks of a job, or (``cycle="all"``)
    the cycles of a directory or glob as a series of runs; see :mod:`traceinsight.trace.inputs`,
    the one resolver ``load``, ``load_job`` and ``compare`` use too."""
    from traceinsight.trace.layout import resolve_inputs as resolve

    return resolve(traces, cycle)


def _one_trace(path: str | os.PathLike[str], cycle: int | str) -> tuple[str | os.PathLike[str], tuple[str, ...]]:
    """The file that ``path`` names: itself, or the chosen cycle of a directory or glob; and
    the graph capture traces found beside it."""
    import warnings
    from pathlib import Path

    from traceinsight.trace.inputs import names_many

    text = os.fspath(path)
    folder = Path(text).is_dir()
    if not names_many(text):  # one file or URL (trace/inputs.py: the one rule)
        return path, ()
    from traceinsight.errors import TraceFormatError, UsageError
    from traceinsight.trace.discover import JobDiscoveryError
    from traceinsight.trace.layout import API_CHOICE, chosen_index, notes, resolve

    try:
        layout = resolve(text)
    except JobDiscoveryError as exc:
        if folder and "no trace files" in str(exc):
            raise TraceFormatError(text, "is a directory with no trace files in it") from None
        raise
    if layout.kind == "job":
        raise UsageError(f"{text} holds the ranks of a job: load them with ti.load_job({text!r})")
    index = chosen_index(layout, cycle)
    if index is None:
        raise UsageError(f"cycle='all': compare the cycles of {text} with ti.compare")
    for line in notes(layout, index, API_CHOICE):
        warnings.warn(line, stacklevel=3)
    return layout.cycles[index].paths[0], layout.captures


def _as_trace(value: PathOrTrace, *, cache: bool) -> Trace:
    from traceinsight.trace.model import Trace

    return value if isinstance(value, Trace) else load(value, cache=cache)


def load_job(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    jobs: int | None = None,
    engine: str = "local",
    address: str | None = None,
    config: AnalysisConfig | None = None,
    allow_missing: bool = False,
    cache: bool = True,
    cycle: int | str = "latest",
) -> Job:
    """The ranks of one distributed run (a directory, a glob, files or URLs), each analysed
    where it is (``engine``: "local" process pool of ``jobs`` workers, "ray", "serial").

    The :class:`~traceinsight.engine.job.Job` holds one small summary per rank; ``job.scan``
    and ``job.sql`` read every rank's frames lazily (with a ``rank`` column) from the cache.

    A directory of several profiler cycles (``tensorboard_trace_handler``) gives the latest
    cycle, or the ``cycle``-th (1 the oldest, -1 the latest); ``job.spec.warnings`` says which.
    Raises :class:`~traceinsight.engine.job.JobLoadError` when no rank could be loaded.
    """
    from traceinsight.engine.job import load_job as load_ranks

    return load_ranks(
        source, jobs=jobs, engine=engine, address=address, config=config, allow_missing=allow_missing, cache=cache,
        cycle=cycle,
    )


def compare(
    runs: Sequence[str | os.PathLike[str] | Sequence[str | os.PathLike[str]]],
    *,
    jobs: int | None = None,
    engine: str = "local",
    address: str | None = None,
    config: AnalysisConfig | None = None,
    cache: bool = True,
    only: Iterable[str] | None = None,
    skip: Iterable[str] | None = None,
) -> SeriesResult:
    """Two or more runs (trace files or jobs) side by side, each against the first with the
    statistics ``diff`` uses: a :class:`~traceinsight.analysis.job.series.SeriesResult`.

    ``only`` / ``skip`` choose its sections (``runs``, ``breakdown``, ``findings``; each may be
    comma-separated); leaving out ``findings`` skips the runs' findings, the costly part."""
    import traceinsight.render  # noqa: F401
    from traceinsight.engine.job import load_series

    return load_series(
        runs, jobs=jobs, engine=engine, address=address, config=config, cache=cache,
        only=list(only) if only is not None else None, skip=list(skip) if skip is not None else None,
    )  # fmt: skip


@overload
def analyze(
    trace: Job,
    config: AnalysisConfig | None = None,
    *,
    only: Iterable[str] | None = None,
    skip: Iterable[str] | None = None,
    on_section: Callable[[str], None] | None = None,
    cache: bool = True,
) -> JobReport: ...


@overload
def analyze(
    trace: PathOrTrace,
    config: AnalysisConfig | None = None,
    *,
    only: Iterable[str] | None = None,
    skip: Iterable[str] | None = None,
    on_section: Callable[[str], None] | None = None,
    cache: bool = True,
) -> Report: ...


def analyze(
    trace: PathOrTrace | Job,
    config: AnalysisConfig | None = None,
    *,
    only: Iterable[str] | None = None,
    skip: Iterable[str] | None = None,
    on_section: Callable[[str], None] | None = None,
    cache: bool = True,
) -> Report | JobReport:
    """Run every registered analysis (or the ``only`` / not ``skip`` ones) over a trace, or
    the job analyses over a :class:`Job` from :func:`load_job`.

    The :class:`Report` displays itself in notebooks and renders to Markdown and HTML.
    """
    # Registers the notebook display functions (Report._repr_html_ and friends).
    import traceinsight.render  # noqa: F401
    from traceinsight.analysis.report import analyze as analyze_trace
    from traceinsight.engine.job import Job

    if isinstance(trace, Job):
        return trace.analyze(
            config, only=list(only) if only is not None else None, skip=list(skip) if skip is not None else None
        )

    return analyze_trace(_as_trace(trace, cache=cache), config, only=only, skip=skip, on_section=on_section)


def diff(
    before: PathOrTrace,
    after: PathOrTrace,
    *,
    cache: bool = True,
    label_before: str | None = None,
    label_after: str | None = None,
    alpha: float | None = None,
    n_boot: int | None = None,
    seed: int | None = None,
    min_steps: int | None = None,
    top_n: int | None = None,
    config: AnalysisConfig | None = None,
    drop_outliers: bool = False,
) -> DiffResult:
    """Compare ``after`` with ``before``: step-time verdict, breakdown deltas, what changed.

    Options left as None take :class:`traceinsight.analysis.diff.compare.DiffOptions`' defaults
    (``alpha`` 0.05, ``n_boot`` 4000 bootstrap resamples, ``seed`` 0, ``min_steps`` 3,
    ``top_n`` 10 rows per table).
    """
    import traceinsight.render  # noqa: F401
    from traceinsight.analysis.diff.compare import DiffOptions, diff_traces

    d = DiffOptions()
    options = DiffOptions(
        label_before=label_before,
        label_after=label_after,
        alpha=d.alpha if alpha is None else alpha,
        n_boot=d.n_boot if n_boot is None else n_boot,
        seed=d.seed if seed is None else seed,
        min_steps=d.min_steps if min_steps is None else min_steps,
        top_n=d.top_n if top_n is None else top_n,
        config=d.config if config is None else config,
        drop_outliers=drop_outliers,
    )
    return diff_traces(_as_trace(before, cache=cache), _as_trace(after, cache=cache), options)


def whatif(
    trace: PathOrTrace,
    *transformations: Transformation,
    scale: Sequence[str] = (),
    remove: Sequence[str] = (),
    host: Sequence[str] = (),
    graphs: bool = False,
    overlap_comm: bool = False,
    async_copies: bool = False,
    findings: Sequence[str] = (),
    config: AnalysisConfig | None = None,
    cache: bool = True,
) -> WhatIfResult:
    """Predicted step time before and after a change, with the critical path after it.

    Changes are transformation objects (``traceinsight.analysis.whatif.transforms``) or the
    command's written forms: ``scale=["gemm=0.5", "name~nccl=2x faster"]``,
    ``remove=["cudaStreamSynchronize"]``, ``host=["0.5"]`` or ``host=["optimizer=0.5"]``,
    ``graphs=True``, ``overlap_comm=True``, ``async_copies=True``. All apply together.

    ``findings=["eager_attention", "host_sync"]``: the changes those findings are priced by,
    replayed together (with any others given) on the step the findings are priced on, the
    profiler's cost taken out where the trace has a step without it: the saving of a fix that
    covers several findings, which their listed savings (each what it adds to the fixes priced
    before it) do not give.
    """
    from traceinsight.analysis.whatif.model import whatif as run_whatif
    from traceinsight.analysis.whatif.syntax import parse
    from traceinsight.analysis.whatif.transforms import TransformError
    from traceinsight.errors import UsageError

    loaded = _as_trace(trace, cache=cache)
    try:
        written = parse(
            list(scale), list(remove), list(host), graphs=graphs, overlap_comm=overlap_comm, async_copies=async_copies
        )
        if not findings:
            return run_whatif(loaded, (*transformations, *written))
        from traceinsight.analysis.core.base import AnalysisConfig as Config
        from traceinsight.analysis.findings.spec import REQUIRES
        from traceinsight.analysis.findings.spec import changes as finding_changes
        from traceinsight.analysis.runner import compute_inputs

        cfg = config or Config()
        found = finding_changes(loaded, cfg, compute_inputs(loaded, cfg, REQUIRES), tuple(findings))
        return run_whatif(
            loaded, (*found.changes, *transformations, *written), base=found.base, before_is=found.base_note,
            steady_steps=found.steps, findings=found.replayed, notes=found.notes,
        )
    except TransformError as exc:
        raise UsageError(str(exc)) from None


def load_memory_snapshot(path: str | os.PathLike[str]) -> MemorySnapshot:
    """Read a ``torch.cuda.memory._dump_snapshot`` pickle into frames (segments, blocks, events,
    frames). The pickle is read with an unpickler that refuses every class and function, so a
    crafted file cannot run code; it raises ``TraceFormatError`` naming the file instead."""
    from traceinsight.trace.snapshot.load import load_memory_snapshot as load_snapshot

    return load_snapshot(path)


def analyze_memory_snapshot(
    snapshot: MemorySnapshot | str | os.PathLike[str],
    *,
    device: int | None = None,
    iterations: int | None = None,
    compare_with: MemorySnapshot | str | os.PathLike[str] | None = None,
) -> SnapshotReport:
    """Peak, leaks, fragmentation and the OOM of one device of a snapshot (the device with the
    most events unless ``device`` is given); ``iterations`` names how many iterations the
    trace holds when they cannot be found from it; ``compare_with`` adds the per-site change of
    the peak against a second snapshot."""
    from traceinsight.analysis.snapshot.report import analyze_snapshot

    def loaded(value: MemorySnapshot | str | os.PathLike[str]) -> MemorySnapshot:
        return load_memory_snapshot(value) if isinstance(value, (str, os.PathLike)) else value

    other = None if compare_with is None else loaded(compare_with)
    return analyze_snapshot(
        loaded(snapshot), device=device, iterations=iterations, compare_with=other
    )
