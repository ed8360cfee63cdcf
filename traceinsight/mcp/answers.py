"""Each tool's answer, from the public API (``ti.load``, ``ti.analyze``, ``ti.diff``, ...)
and the JSON report's own layout (``render.envelope.document``, each result's ``to_dict()``).
Nothing here computes a figure of its own: a new field of a section reaches the tools as it
reaches ``analyze --format json``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from traceinsight.errors import UsageError
from traceinsight.mcp.shape import Answer, Shaper
from traceinsight.mcp.sqlguard import check_query
from traceinsight.mcp.store import Entry, Progress, Store

if TYPE_CHECKING:
    from traceinsight.analysis.core.base import Result

MAX_LIMIT = 1000
# Lists inside a section's facts longer than this are cut (its main table is paged as `rows`).
FACT_ROWS = 10
KERNEL_COLUMNS = ("name", "kind", "ts_ns", "dur_ns", "stream", "step", "op_name", "top_op_name", "launch_name", "annotation")
MEMORY_PARTS = ("summary", "peak", "leaks", "fragmentation", "oom", "timeline", "compare")


def _limit(limit: int, offset: int) -> None:
    if not 1 <= limit <= MAX_LIMIT:
        raise UsageError(f"limit must be between 1 and {MAX_LIMIT}")
    if offset < 0:
        raise UsageError("offset must be >= 0")


def _sql_error(exc: Exception, tables: tuple[str, ...]) -> UsageError:
    message = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return UsageError(f"SQL error: {message} (tables: {', '.join(tables)})")


def _strings(frame: pl.DataFrame) -> pl.DataFrame:
    """Categoricals as plain strings, as ``Trace.sql`` hands them to SQL."""
    import polars.selectors as cs

    return frame.with_columns(cs.categorical().cast(pl.String))


def _page(shaper: Shaper, answer: Answer, frame: pl.DataFrame, limit: int, offset: int) -> Answer:
    from traceinsight.analysis.core.base import jsonable

    rows: list[dict[str, Any]] = jsonable(frame.slice(offset, limit))
    return shaper.rows(answer, rows, offset=offset, total=frame.height)


def _sections(entry: Entry) -> dict[str, Result]:
    sections: dict[str, Result] | None = getattr(entry.report, "sections", None)
    if sections is None:
        raise UsageError(f"{entry.handle} is an allocator snapshot: ask the memory tool")
    return sections


def _cut(value: Any, path: str, cut: dict[str, int]) -> Any:
    if isinstance(value, list) and len(value) > FACT_ROWS:
        cut[path] = len(value)
        value = value[:FACT_ROWS]
    if isinstance(value, list):
        return [_cut(v, f"{path}[]", cut) for v in value]
    if isinstance(value, dict):
        return {k: _cut(v, f"{path}.{k}" if path else k, cut) for k, v in value.items()}
    return value


def opened(entry: Entry, shaper: Shaper, progress: Progress | None = None) -> Answer:
    """The handle and the overview: what the file is and the verdict in one line."""
    entry.analyse(progress)
    data: dict[str, Any] = {
        "handle": entry.handle,
        "kind": entry.kind,
        "source": entry.source,
        "load_s": round(entry.load_s, 3),
        "analyze_s": round(entry.analyze_s, 3),
        "memory_bytes": entry.bytes,
    }
    if entry.kind == "snapshot":
        facts = entry.report.to_dict()
        data["snapshot"] = {k: v for k, v in facts.items() if k not in ("peak", "leaks", "fragmentation", "oom", "compare", "timeline")}
        data["answers"] = [p for p in MEMORY_PARTS if p != "summary"]
    else:
        sections = _sections(entry)
        data["sections"] = {
            name: {"available": result.available, **({"reason": result.reason} if not result.available else {})}
            for name, result in sections.items()
        }
        if entry.kind == "trace":
            data["verdict"] = entry.report.headline.verdict  # type: ignore[union-attr]
            data["overview"] = sections["overview"].to_dict() if "overview" in sections else None
        else:
            job: Any = entry.report
            data["ranks"] = list(job.paths)
            data["failed"] = [str(f) for f in job.failed]
            data["findings"] = len(job.findings)
    return shaper.document(Answer(kind="open", handle=entry.handle, data=data, notes=list(entry.notes)))


def verdict(entry: Entry, shaper: Shaper) -> Answer:
    from traceinsight.analysis.core.base import jsonable

    sections = _sections(entry)
    report: Any = entry.report
    data: dict[str, Any]
    if entry.kind == "job":
        data = {"findings": [jsonable(f) for f in report.findings]}
        if "job_findings" in sections:
            data["job_findings"] = sections["job_findings"].to_dict()
        return shaper.document(Answer(kind="verdict", handle=entry.handle, data=data))
    data = {"headline": report.headline.to_dict()}
    for name in ("window", "findings"):
        if name in sections:
            data[name] = sections[name].to_dict()
    return shaper.document(Answer(kind="verdict", handle=entry.handle, data=data))


def section(
    entry: Entry, shaper: Shaper, name: str, *, where: str | None, order_by: str | None,
    descending: bool, limit: int, offset: int,
) -> Answer:  # fmt: skip
    _limit(limit, offset)
    sections = _sections(entry)
    aliases = {"critical path": "critical_path", "critical-path": "critical_path"}
    name = aliases.get(name.strip().lower(), name.strip().lower())
    if name not in sections:
        raise UsageError(f"unknown section {name!r}; this {entry.kind} has {', '.join(sections)}")
    result = sections[name]
    cut: dict[str, int] = {}
    facts = _cut(result.to_dict(), "", cut)
    table = _strings(result.to_polars())
    notes = [f"facts.{path}: the first {FACT_ROWS} of {n} items (the section's main table is paged in `rows`)" for path, n in cut.items()]
    if where:
        query = f"SELECT * FROM rows WHERE {where}"
        check_query(query, ("rows",))
        try:
            table = pl.SQLContext({"rows": table.lazy()}, eager=True).execute(query)
        except (pl.exceptions.PolarsError, ValueError) as exc:
            raise _sql_error(exc, (f"rows with columns {', '.join(table.columns)}",)) from None
    if order_by:
        if order_by not in table.columns:
            raise UsageError(f"order_by {order_by!r}: no such column; the table has {', '.join(table.columns) or 'no columns'}")
        table = table.sort(order_by, descending=descending, nulls_last=True)
    answer = Answer(kind="section", handle=entry.handle, data={"section": name, "columns": table.columns, "facts": facts}, notes=notes)
    return _page(shaper, answer, table, limit, offset)


def sql(entry: Entry, shaper: Shaper, query: str, *, limit: int, offset: int, cache: bool) -> Answer:
    from traceinsight.trace.schema import FRAME_SCHEMAS

    _limit(limit, offset)
    tables = tuple(FRAME_SCHEMAS)
    check_query(query, tables)
    try:
        if entry.kind == "trace":
            frame = entry.trace.sql(query)
        elif entry.kind == "job":
            if not cache:
                raise UsageError("SQL over a job reads its ranks' Parquet cache: start the server with --cache")
            frame = entry.data.sql(query)  # type: ignore[union-attr]
        else:
            raise UsageError(f"{entry.handle} is an allocator snapshot: SQL runs over traces and jobs")
    except (pl.exceptions.PolarsError, ValueError) as exc:
        raise _sql_error(exc, tables) from None
    answer = Answer(kind="sql", handle=entry.handle, data={"query": query, "columns": frame.columns})
    return _page(shaper, answer, _strings(frame), limit, offset)


def kernels(
    entry: Entry, shaper: Shaper, *, step: int | None, op: str | None, limit: int, offset: int
) -> Answer:
    _limit(limit, offset)
    if step is None and not op:
        raise UsageError("name a step, an op, or both")
    frame = _strings(entry.trace.kernels)
    wanted = frame
    if step is not None:
        wanted = wanted.filter(pl.col("step") == step)
    if op:
        needle = op.lower()
        wanted = wanted.filter(
            pl.col("op_name").str.to_lowercase().str.contains(needle, literal=True)
            | pl.col("top_op_name").str.to_lowercase().str.contains(needle, literal=True)
        )
    notes = []
    if wanted.is_empty():
        steps = frame["step"].drop_nulls().unique().sort()
        notes.append(f"no kernel matches; the trace's kernels are in steps {', '.join(map(str, steps.to_list()[:50])) or 'none'}")
    by_name = (
        wanted.group_by("name")
        .agg(calls=pl.len(), dur_ns=pl.col("dur_ns").sum())
        .sort("dur_ns", descending=True)
        .head(20)
    )
    from traceinsight.analysis.core.base import jsonable

    span = (wanted["end_ns"].max(), wanted["ts_ns"].min()) if wanted.height else (None, None)
    data = {
        "step": step,
        "op": op,
        "kernels": wanted.height,
        "device_ns": int(wanted["dur_ns"].sum()) if wanted.height else 0,
        "span_ns": (span[0] - span[1]) if span[0] is not None else None,  # type: ignore[operator]
        "top_by_time": jsonable(by_name),
    }
    table = wanted.sort("ts_ns").select([c for c in KERNEL_COLUMNS if c in wanted.columns])
    return _page(shaper, Answer(kind="kernels", handle=entry.handle, data=data, notes=notes), table, limit, offset)


def diff(store: Store, shaper: Shaper, before: str, after: str, *, top: int) -> Answer:
    import traceinsight as ti
    from traceinsight.render.envelope import document

    if not 1 <= top <= 100:
        raise UsageError("top must be between 1 and 100")
    b, a = store.get(before, kind="trace"), store.get(after, kind="trace")
    result = ti.diff(b.trace, a.trace, label_before=b.source, label_after=a.source, top_n=top)
    data = document(result)["diff"]
    return shaper.document(Answer(kind="diff", handle=None, data={"before": b.handle, "after": a.handle, **data}))


def compare(store: Store, shaper: Shaper, runs: list[str], *, findings: bool) -> Answer:
    import traceinsight as ti
    from traceinsight.render.envelope import document

    if len(runs) < 2:
        raise UsageError("compare takes two or more runs")
    paths: list[Any] = []
    for run in runs:
        matches = [str(p) for p in store.roots.expand(run)]
        paths.append(matches[0] if len(matches) == 1 else matches)
    result = ti.compare(paths, jobs=store.jobs, cache=store.cache, skip=None if findings else ["findings"])
    return shaper.document(Answer(kind="compare", data=document(result)["series"]))


def whatif(entry: Entry, shaper: Shaper, **changes: Any) -> Answer:
    import traceinsight as ti

    if not any(changes.values()):
        raise UsageError("name a change: findings, scale, remove, host, graphs, overlap_comm or async_copies")
    result = ti.whatif(entry.trace, **changes)
    return shaper.document(Answer(kind="whatif", handle=entry.handle, data=result.to_dict()))


def memory(store: Store, entry: Entry, shaper: Shaper, part: str, *, compare_with: str | None) -> Answer:
    import traceinsight as ti

    if entry.kind != "snapshot":
        raise UsageError(f"{entry.handle} is a {entry.kind}: the memory tool reads allocator snapshots (.pickle)")
    if part not in MEMORY_PARTS:
        raise UsageError(f"unknown part {part!r}; choose from {', '.join(MEMORY_PARTS)}")
    report = entry.report
    if compare_with:
        other = store.get(compare_with, kind="snapshot")
        report = ti.analyze_memory_snapshot(entry.data, compare_with=other.data)  # type: ignore[arg-type]
    facts = report.to_dict()
    if part == "summary":
        data = {k: v for k, v in facts.items() if k != "timeline"}
    elif part == "compare" and facts.get("compare") is None:
        raise UsageError("the compare part needs compare_with: a second snapshot")
    else:
        data = {part: facts.get(part)}
    return shaper.document(Answer(kind="memory", handle=entry.handle, data=data))


def markdown(entry: Entry) -> str:
    from traceinsight.render.formats import render

    text = render(entry.report, "md")
    return text if isinstance(text, str) else text.decode()


def json_document(entry: Entry) -> str:
    import json

    from traceinsight.render.envelope import document

    return json.dumps(document(entry.report), allow_nan=False)
