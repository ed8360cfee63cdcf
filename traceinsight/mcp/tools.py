"""The tools, resources and prompt of ``traceinsight mcp``, each a thin call into
``answers.py``. Descriptions say what each answer measures and its limits, as the docs do,
so that an assistant picks the right tool; ``tests/processes/test_mcp.py`` fails on a tool or a
parameter without one."""

from __future__ import annotations

import contextlib
import functools
import sys
import traceback
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import Context
from pydantic import Field

from traceinsight.errors import TraceInsightError
from traceinsight.mcp import answers
from traceinsight.mcp.shape import Answer, Shaper
from traceinsight.mcp.store import Store

F = TypeVar("F", bound=Callable[..., Any])

Source = Annotated[str, Field(description="a handle from `open` (t1, j2, s3), or a path under the server's roots (opened on the way)")]
Limit = Annotated[int, Field(description=f"rows to return, 1 to {answers.MAX_LIMIT}; fewer when the answer would pass the size cap")]
Offset = Annotated[int, Field(description="index of the first row to return (a previous answer's page.next_offset)")]

INSTRUCTIONS = """\
traceinsight reads PyTorch profiler (Kineto) traces, the ranks of a distributed job and CUDA
allocator snapshots, and answers with measured figures: where device time goes, idle gaps
and their causes, steps, the findings (what to change first, with the time each saves) and
what-if replays. Start with `open` on a path (a .json/.json.gz trace, a folder of rank
traces, a .pickle snapshot): it returns a handle and the overview. Then `verdict` (the
one-line answer and the findings with evidence and price), `section` for one analysis,
`kernels` for one step or op, `sql` for anything else, `diff` / `compare` across runs,
`whatif` to replay a change, `memory` for snapshots. Before trusting per-step figures, read
the `window` section: a trace that holds only warm-up, or one step, says so there.
Only files under the server's roots can be opened; answers over the size cap come in parts
(`more`). Times are in ns unless a field's name says otherwise.
"""

DIAGNOSIS = """\
Diagnose {source} with the traceinsight tools, in the order a performance engineer works:

1. `open` it. Note the device, the number of steps and how long the trace covers.
2. Is the window valid? Read `section` "window": warm-up only, a single step, or steps cut at
   the edges make per-step figures unreliable; say so before anything else if it is the case.
3. The verdict: `verdict` gives the one-line answer and the findings ranked by the time each
   would save (per step), with confidence and the method of each estimate.
4. Evidence: for the top findings, look at what they cite: `section` "gaps" (idle time and
   its causes), "steps", "ops", "kernels", "bound" (overhead-, memory- or compute-bound
   regions), "critical_path"; `kernels` of the slowest step; `sql` for a question the sections
   do not answer.
5. What-if: replay the change the top finding proposes with `whatif` (scale a kernel family,
   remove a sync, collapse launches as CUDA graphs do, overlap communication) and report the
   predicted step time before and after.

Quote the figures the tools return, with their units; say what the trace cannot tell (an
estimate with low confidence, a section that is not available and why).
"""


def guarded(fn: F, *, verbose: bool, resource: bool = False) -> F:
    """``fn`` with every failure as one clear line: the SDK turns a ``ToolError`` into an
    error result the assistant reads (a ``ResourceError`` into an error response); a bug gets
    its type and first line (the traceback goes to stderr with ``-v`` only)."""
    from mcp.server.mcpserver.exceptions import ResourceError, ToolError

    error: type[Exception] = ResourceError if resource else ToolError

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TraceInsightError as exc:
            raise error(str(exc)) from None
        except (OSError, ValueError, KeyError, TypeError, RuntimeError, MemoryError) as exc:
            if verbose:
                traceback.print_exc(file=sys.stderr)
            first = (str(exc).strip().splitlines() or [""])[0]
            raise error(f"{type(exc).__name__}: {first}") from None

    return call  # type: ignore[return-value]


def _sections(kind: str) -> str:
    """The registered sections, as the report has them (a new analysis is listed by itself)."""
    from traceinsight.analysis.job.specs import JOB_ANALYSES
    from traceinsight.analysis.registry import ANALYSES

    # `series` is the row of a compare, not a section of one job.
    specs = ANALYSES if kind == "trace" else [s for s in JOB_ANALYSES if s.name != "series"]
    return "\n".join(f"- {s.name}: {s.description}" for s in specs)


def _progress(ctx: Context | None) -> Callable[[str], None] | None:
    """Progress notifications from a tool's worker thread (a no-op unless the client asked for
    them): a large trace takes tens of seconds to open, and a client that hears nothing may
    give up."""
    if ctx is None:
        return None
    import anyio.from_thread

    count = [0]

    def tell(message: str) -> None:
        count[0] += 1
        # A courtesy: never the reason a load fails.
        with contextlib.suppress(Exception):
            anyio.from_thread.run(ctx.report_progress, count[0], None, message)

    return tell


def register(app: Any, store: Store, shaper: Shaper, *, verbose: bool) -> None:
    """Every tool, the report resources and the diagnosis prompt on ``app`` (an MCPServer)."""
    from mcp.types import ToolAnnotations

    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

    def tool(name: str, description: str) -> Callable[[F], F]:
        def add(fn: F) -> F:
            app.add_tool(guarded(fn, verbose=verbose), name=name, description=description, annotations=read_only)
            return fn

        return add

    @tool("open", "Open a trace (.json / .json.gz), a folder or glob of rank traces (a job), a "
          "folder of profiler cycles (the latest, or `cycle`), or a CUDA allocator snapshot "
          "(.pickle), and analyse it. Returns a handle for the other tools and the overview: "
          "the verdict in one line, each section's availability, the time the load and the "
          "analysis took. Opening the same unchanged file again returns the same handle at once; "
          "a large trace takes the loader's time once (hundreds of MB: tens of seconds).")
    def open_(
        path: Annotated[str, Field(description="a path under the server's roots; relative paths start at the first root")],
        kind: Annotated[str, Field(description="auto (from the path), trace, job or snapshot")] = "auto",
        cycle: Annotated[str, Field(description="a folder of profiler cycles: latest, or N (1 the oldest, -1 the latest)")] = "latest",
        ctx: Context | None = None,
    ) -> Answer:
        progress = _progress(ctx)
        return answers.opened(store.open(path, kind=kind, cycle=cycle, progress=progress), shaper, progress)

    @tool("verdict", "The verdict and the findings: the one-line answer, then what to change "
          "first, ranked by the time each would save per step, each with its evidence (ops, "
          "kernels, regions, source locations), its price (saving_ns, saving_pct of the analysed "
          "time), confidence and the method of the estimate (replayed on the step's dependency "
          "graph, or a pool estimate); and the window section, which says whether the trace's "
          "steps can be trusted. For a job: the cross-rank findings (stragglers, collective wait).")
    def verdict(source: Source) -> Answer:
        return answers.verdict(store.get(source), shaper)

    @tool("section", "One analysis by name, with its table filtered, sorted and paged. `facts` is the "
          "section as the JSON report writes it, lists cut to their first 10 items; `rows` is its main "
          "table. A section that could not run says why (available, reason).\n"
          f"Sections of a trace:\n{_sections('trace')}\nSections of a job:\n{_sections('job')}")
    def section(
        source: Source,
        name: Annotated[str, Field(description="the section's name, e.g. gaps, steps, kernels, bound, critical_path")],
        where: Annotated[str | None, Field(description="SQL condition over the table's columns, e.g. \"dur_ns > 100000 AND cause = 'sync'\"")] = None,
        order_by: Annotated[str | None, Field(description="a column of the table to sort by")] = None,
        descending: Annotated[bool, Field(description="sort from the largest value")] = True,
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> Answer:
        return answers.section(store.get(source), shaper, name, where=where, order_by=order_by,
                               descending=descending, limit=limit, offset=offset)

    @tool("sql", "Read-only SQL (polars SQL) over a trace's frames: tables events (every host "
          "and device span: name, kind, ts_ns, dur_ns, step, parent, input_dims, ...), kernels "
          "(GPU kernels, memcpys, memsets with their launch and op: name, dur_ns, stream, step, "
          "op_name, top_op_name, ...), counters, memory; for a job each has a rank column (needs "
          "the server's --cache). One SELECT or WITH statement; table functions (read_csv, "
          "read_parquet, ...) are refused, so a query reads nothing but the trace. Rows are paged.")
    def sql(
        source: Source,
        query: Annotated[str, Field(description="e.g. SELECT name, SUM(dur_ns) AS ns FROM kernels GROUP BY name ORDER BY ns DESC LIMIT 10")],
        limit: Limit = 100,
        offset: Offset = 0,
    ) -> Answer:
        return answers.sql(store.get(source), shaper, query, limit=limit, offset=offset, cache=store.cache)

    @tool("kernels", "The GPU kernels of one step, of one op, or of an op within a step: their "
          "count, device time, span, the kernels that take the most time, and the kernels in time "
          "order (paged). An op matches when its name holds `op` (case-insensitive), as the "
          "kernel's own op or its top-level op. Steps are ProfilerStep numbers (or the loop "
          "iterations found when the trace has none).")
    def kernels(
        source: Source,
        step: Annotated[int | None, Field(description="a step number, as the steps section lists them")] = None,
        op: Annotated[str | None, Field(description="part of an op's name, e.g. aten::mm or a module's record_function label")] = None,
        limit: Limit = 100,
        offset: Offset = 0,
    ) -> Answer:
        return answers.kernels(store.get(source, kind="trace"), shaper, step=step, op=op, limit=limit, offset=offset)

    @tool("diff", "Did a change make a run faster, beyond noise, and why: the step-time verdict "
          "with a confidence interval (bootstrap over steps), then the device time breakdown, ops, "
          "kernels and regions that changed most, and the findings that appeared or went away. "
          "Needs steps in both traces for the statistics (at least 3 each).")
    def diff(
        before: Annotated[str, Field(description="the baseline run: handle or path")],
        after: Annotated[str, Field(description="the changed run: handle or path")],
        top: Annotated[int, Field(description="rows per table of ops, kernels and regions (1 to 100)")] = 10,
    ) -> Answer:
        return answers.diff(store, shaper, before, after, top=top)

    @tool("compare", "Two or more runs side by side (trace files, or folders/globs of a job's "
          "ranks), each against the first with the statistics diff uses: step time, device time "
          "breakdown and, with findings=true, each run's findings (slower: every run is analysed).")
    def compare(
        runs: Annotated[list[str], Field(description="paths under the roots (a trace, or a job's folder or glob), the baseline first")],
        findings: Annotated[bool, Field(description="also each run's findings (analyses every run in full)")] = False,
    ) -> Answer:
        return answers.compare(store, shaper, runs, findings=findings)

    @tool("whatif", "Replay the trace's steps on their dependency graph with a change and predict "
          "the step time before and after, with the critical path after it. Changes: scale device "
          "work (gemm=0.5, 'name~nccl=2x faster'), remove host calls or kernels by regex "
          "(cudaStreamSynchronize), scale host time (0.5, or optimizer=0.5), collapse launches as "
          "CUDA graphs do, overlap communication, asynchronous copies; several apply together. "
          "steady_saving_pct (the median step) is the headline figure. `explained` is false, with a note, "
          "when replaying the trace as recorded misses a step's recorded device time by more than 5 %: the "
          "prediction is then outside what the model explains. A replayed finding's method names the "
          "changes its saving was replayed with; findings=[ids] applies those findings' changes "
          "together on the step the findings are priced on (the saving of a fix that covers several, "
          "which their listed savings, each what it adds to those priced before it, do not give).")
    def whatif(
        source: Source,
        scale: Annotated[list[str] | None, Field(description="FAMILY=FACTOR or 'name~REGEX=FACTOR'; FACTOR a time multiplier (0.5) or a speed-up (2x, '2x faster')")] = None,
        remove: Annotated[list[str] | None, Field(description="regexes of host spans or device work to remove, e.g. cudaStreamSynchronize")] = None,
        host: Annotated[list[str] | None, Field(description="FACTOR (all host time) or REGION=FACTOR (inside spans matching REGION)")] = None,
        graphs: Annotated[bool, Field(description="launch calls cost ~0, as with CUDA graphs")] = False,
        overlap_comm: Annotated[bool, Field(description="communication kernels fully overlapped")] = False,
        async_copies: Annotated[bool, Field(description="blocking copies no longer make the host wait")] = False,
        findings: Annotated[list[str] | None, Field(description="ids of this trace's findings whose changes to apply together, e.g. ['eager_attention', 'host_sync']")] = None,
    ) -> Answer:
        return answers.whatif(store.get(source, kind="trace"), shaper, scale=scale or [], remove=remove or [], host=host or [],
                              graphs=graphs, overlap_comm=overlap_comm, async_copies=async_copies, findings=findings or [])

    @tool("memory", "Answers from a CUDA allocator snapshot (torch.cuda.memory._dump_snapshot): "
          "summary; peak (what was allocated at the peak, by allocation site); leaks (memory that "
          "grows across iterations, by site); fragmentation (reserved but unusable memory); oom "
          "(the out-of-memory error, if recorded: what was asked and what held memory); timeline "
          "(allocated and reserved over time, downsampled); compare (per-site change of the peak "
          "against compare_with). The pickle is read without running anything in it.")
    def memory(
        source: Source,
        part: Annotated[str, Field(description="summary, peak, leaks, fragmentation, oom, timeline or compare")] = "summary",
        compare_with: Annotated[str | None, Field(description="a second snapshot (handle or path) for part=compare")] = None,
    ) -> Answer:
        return answers.memory(store, store.get(source, kind="snapshot"), shaper, part, compare_with=compare_with)

    @tool("more", "The next part of an answer that was over the size cap: pass the `continuation` "
          "the previous part gave. Parts are JSON text to join in order; the server keeps the "
          "most recent long answers only.")
    def more(continuation: Annotated[str, Field(description="the continuation of the previous part")]) -> Answer:
        return shaper.more(continuation)

    @tool("loaded", "What this server holds: each handle with its kind, source path, memory and "
          "the time its load and analysis took, and the memory cap.")
    def loaded() -> Answer:
        rows = [
            {"handle": e.handle, "kind": e.kind, "source": e.source, "memory_bytes": e.bytes,
             "load_s": round(e.load_s, 3), "analyze_s": round(e.analyze_s, 3)}
            for e in store.entries()
        ]  # fmt: skip
        data = {"roots": [str(r) for r in store.roots.folders], "memory_cap_bytes": store.max_bytes,
                "memory_bytes": store.used_bytes(), "entries": rows}  # fmt: skip
        return shaper.document(Answer(kind="loaded", data=data))

    def report_json(handle: str) -> str:
        return answers.json_document(store.get(handle))

    def report_markdown(handle: str) -> str:
        return answers.markdown(store.get(handle))

    app.resource("traceinsight://report/{handle}.json", name="report-json", mime_type="application/json",
                 description="The whole JSON report of a loaded trace, job or snapshot (traceinsight's "
                 "versioned envelope, as `analyze --format json` writes it), by handle.")(guarded(report_json, verbose=verbose, resource=True))
    app.resource("traceinsight://report/{handle}.md", name="report-markdown", mime_type="text/markdown",
                 description="The Markdown report of a loaded trace, job or snapshot, by handle.")(guarded(report_markdown, verbose=verbose, resource=True))

    def diagnose(source: str) -> str:
        return DIAGNOSIS.format(source=source)

    app.prompt(name="diagnose", title="Diagnose a trace",
               description="Walk through a trace as a senior engineer does: window validity, the "
               "verdict, its evidence, then a what-if of the top fix.")(diagnose)
