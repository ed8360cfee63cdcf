"""What the memory snapshot report shows, format-free: parts with facts, a table and notes.

The terminal, Markdown and HTML renderers lay these out; none of them picks figures itself,
so the three say the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from traceinsight.analysis.snapshot.report import SnapshotReport
from traceinsight.render.units import size

TOP_SITES = 10


@dataclass(frozen=True)
class Part:
    title: str
    facts: list[tuple[str, str]] = field(default_factory=list)
    columns: tuple[str, ...] = ()
    rows: list[tuple[str, ...]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _when(idx: int | None, time_us: int | None, start_us: int | None) -> str:
    if idx is None:
        return "when the snapshot was taken (no trace recorded)"
    if idx < 0:
        return "before the first recorded event"
    at = f"event #{idx:,}"
    if time_us is not None and start_us is not None:
        at += f", +{(time_us - start_us) / 1000:,.1f} ms after the first event"
    return at


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole > 0 else "-"


def title(report: SnapshotReport) -> str:
    """The report's title: the snapshot, or the two runs compared labelled by what differs."""
    c = report.compare
    if c is None:
        return "Memory snapshot"
    return f"Memory compared: {c.title}"


def parts(report: SnapshotReport, *, top: int = TOP_SITES) -> list[Part]:
    found = [_header(report), _peak(report, top)]
    roles = report.peak.roles
    # all unknown: no stack names a phase, and a table saying so says nothing
    if roles is not None and roles.filter(pl.col("role") != "unknown").height:
        found.append(_roles(report))
    found += [_leaks(report, top), _fragmentation(report)]
    if report.allocator.available:
        found.append(_allocator(report))
    if report.oom.available:
        found.append(_oom(report, top))
    if report.compare is not None:
        found.append(_compare(report, top))
    return found


def _header(report: SnapshotReport) -> Part:
    devices = ", ".join(f"cuda:{d}" for d in report.devices) or "none"
    facts = [
        ("snapshot", f"{report.path} ({size(report.file_bytes)})"),
        (
            "layout",
            "segments only (older PyTorch: no trace)"
            if report.layout == "segments-only"
            else "segments and trace",
        ),
        ("device", f"cuda:{report.device} (in the snapshot: {devices})"),
        ("events traced", f"{report.events:,}"),
        ("distinct stacks", f"{report.stacks:,}"),
    ]
    if report.compare is not None:
        c = report.compare
        facts.append(
            (
                "compared with",
                f"{c.after_path} ({c.differs_by}: {c.before_label} → {c.after_label})",
            )
        )
    return Part(title(report), facts)


def _roles(report: SnapshotReport) -> Part:
    p, o = report.peak, report.oom
    assert p.roles is not None
    at_oom: dict[str, int] = {}
    if o.available and o.roles is not None:
        at_oom = {r["role"]: r["bytes"] for r in o.roles.iter_rows(named=True)}
    columns: tuple[str, ...] = ("role", "at the peak", "of peak", "allocations")
    if o.available:
        columns += ("at the out-of-memory error",)
    rows: list[tuple[str, ...]] = []
    for r in p.roles.iter_rows(named=True):
        row = (
            r["role"].replace("_", " "),
            size(r["bytes"]),
            _share(r["bytes"], p.peak_allocated_bytes),
            f"{r['count']:,}",
        )
        rows.append(row + ((size(at_oom.get(r["role"], 0)),) if o.available else ()))
    for role, held in at_oom.items():
        if role not in set(p.roles["role"].to_list()):
            rows.append((role.replace("_", " "), size(0), "-", "0", size(held)))
    return Part(
        "Roles: what the memory held at the peak was for",
        columns=columns,
        rows=rows,
        notes=[
            "from the stacks and the phases of each iteration (forward, backward, optimizer); "
            "kept: held from one iteration to the next and none of the others"
        ],
    )


def _peak(report: SnapshotReport, top: int) -> Part:
    p = report.peak
    facts = [
        (
            "peak allocated",
            f"{size(p.peak_allocated_bytes)} at {_when(p.peak_idx, p.peak_time_us, report.first_time_us)}",
        ),
        ("reserved then", size(p.reserved_at_peak_bytes)),
        ("peak reserved", size(p.peak_reserved_bytes)),
        (
            "at the end",
            f"{size(p.end_allocated_bytes)} allocated, {size(p.end_reserved_bytes)} reserved",
        ),
    ]
    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    if p.sites is not None:
        for r in p.sites.head(top).iter_rows(named=True):
            rows.append(
                (
                    r["site"],
                    size(r["bytes"]),
                    f"{r['count']:,}",
                    _share(r["bytes"], p.peak_allocated_bytes),
                )
            )
        if p.sites.height > top:
            notes.append(f"{p.sites.height - top:,} more sites in the JSON output")
    return Part(
        "Peak: held at the peak, by allocation site",
        facts,
        ("site", "bytes", "allocations", "of peak"),
        rows,
        notes,
    )


def _leaks(report: SnapshotReport, top: int) -> Part:
    lk = report.leaks
    if not lk.available:
        return Part("Leaks", notes=[f"not available: {lk.reason}"])
    facts = [("iterations", lk.method)]
    if lk.compared < lk.iterations:
        facts.append(
            (
                "compared",
                f"the ends of {lk.compared} iterations spread evenly over the {lk.iterations:,}",
            )
        )
    rows: list[tuple[str, ...]] = []
    steps = max(lk.compared - 1, 1)
    if lk.leaks is not None:
        for r in lk.leaks.head(top).iter_rows(named=True):
            rows.append(
                (
                    r["site"],
                    size(r["growth_per_iteration_bytes"]),
                    f"{size(r['first_bytes'])} → {size(r['last_bytes'])}",
                    f"{r['grew_in']} of {steps}",
                )
            )
    notes = (
        []
        if rows
        else [
            f"no site keeps more memory alive each iteration across the {lk.iterations} iterations"
        ]
    )
    if lk.growing is not None:
        notes += [
            f"not a leak: {r['site']} holds {r['first_blocks']} block(s) at the first iteration's end "
            f"and {r['last_blocks']} at the last, growing {size(r['first_bytes'])} → {size(r['last_bytes'])}: "
            "the same memory grows, none is kept from earlier iterations"
            for r in lk.growing.head(top).iter_rows(named=True)
        ]
    return Part(
        "Leaks: sites whose held memory grows every iteration",
        facts,
        ("site", "growth / iteration", "first → last", "grew in"),
        rows,
        notes,
    )


def _fragmentation(report: SnapshotReport) -> Part:
    f = report.fragmentation
    if not f.available:
        return Part("Fragmentation", notes=[f"not available: {f.reason}"])
    facts = [
        (
            "reserved but free",
            f"{size(f.reserved_free_bytes)} of {size(f.reserved_bytes)} reserved ({f.segments:,} segments); at the peak {size(f.reserved_free_at_peak_bytes)}",
        ),
        ("free blocks in split segments", f"{f.inactive_blocks:,} ({size(f.inactive_bytes)})"),
        (
            "largest free block",
            f"{size(f.largest_inactive_bytes)} (largest request {size(f.largest_request_bytes)})",
        ),
        (
            "free tails",
            f"{f.inactive_tails:,} segments end in a free block ({size(f.inactive_tail_bytes)})",
        ),
        (
            "expandable segments",
            "on"
            if f.expandable
            else ("would help" if f.expandable_would_help else "off; would not help much"),
        ),
    ]
    return Part("Fragmentation", facts, notes=[f.advice])


def _allocator(report: SnapshotReport) -> Part:
    w = report.allocator
    facts = [
        ("recorded settings", w.recorded_settings),
        (
            "replay check",
            f"replayed peak reserved {size(w.replayed_peak_reserved_bytes)} against "
            f"{size(w.recorded_peak_reserved_bytes)} recorded ({w.replay_error:+.1%})",
        ),
    ]
    if w.limit_bytes:
        facts.append(
            ("replayed under", f"the limit the out-of-memory error shows: {size(w.limit_bytes)}")
        )
    rows: list[tuple[str, ...]] = []
    if w.runs is not None:
        rows = [
            (
                r["settings"],
                size(r["peak_reserved_bytes"]),
                f"{r['cudamalloc_calls']:,}",
                f"{r['segment_maps']:,}",
                "yes" if r["ooms"] else "",
            )
            for r in w.runs.iter_rows(named=True)
        ]
    return Part(
        "Allocator settings: peak reserved memory predicted by replaying the trace",
        facts,
        ("settings", "peak reserved", "cudaMalloc calls", "page mappings", "runs out"),
        rows,
        [w.advice],
    )


def _oom(report: SnapshotReport, top: int) -> Part:
    o = report.oom
    facts = [
        ("request", f"{size(o.request_bytes)} at {_when(o.idx, o.time_us, report.first_time_us)}"),
        ("limit hit", o.limit_text),
        ("device free then", size(o.device_free_bytes)),
        ("short by", size(o.shortfall_bytes)),
        ("allocated / reserved", f"{size(o.allocated_bytes)} / {size(o.reserved_bytes)}"),
    ]
    if o.ooms > 1:
        facts.append(
            (
                "out-of-memory events",
                f"{o.ooms:,} (the last is explained: earlier ones were caught and retried, as cuDNN does when a workspace does not fit)",
            )
        )
    rows: list[tuple[str, ...]] = []
    by_role = (
        o.sites is not None
        and "role" in o.sites.columns
        and bool((o.sites["role"] != "unknown").any())
    )
    if o.sites is not None:
        rows = [
            (
                r["site"],
                size(r["bytes"]),
                f"{r['count']:,}",
                str(r["role"]).replace("_", " ") if by_role else ("yes" if r["in_forward"] else ""),
            )
            for r in o.sites.head(top).iter_rows(named=True)
        ]
    notes = [
        f"{'fix' if fix is o.fix else ('or' if fix.covers else 'partly')}: {fix.text}; frees {size(fix.frees_bytes)}"
        + ("" if fix.covers else ", not enough on its own")
        for fix in o.fixes
    ] or ["no single change found that covers the shortfall"]
    return Part(
        "Out of memory: what was held when the request failed",
        facts,
        ("site", "bytes", "allocations", "mostly" if by_role else "in forward"),
        rows,
        notes,
    )


def _compare(report: SnapshotReport, top: int) -> Part:
    c = report.compare
    assert c is not None
    facts = [
        (
            "peak allocated",
            f"{size(c.before_peak_bytes)} → {size(c.after_peak_bytes)} ({'+' if c.peak_change_bytes >= 0 else ''}{size(c.peak_change_bytes)})",
        ),
        (
            "peak reserved",
            f"{size(c.before_peak_reserved_bytes)} → {size(c.after_peak_reserved_bytes)} ({'+' if c.peak_reserved_change_bytes >= 0 else ''}{size(c.peak_reserved_change_bytes)})",
        ),
    ]
    rows: list[tuple[str, ...]] = []
    if c.sites is not None:
        rows = [
            (
                r["site"],
                size(r["before_bytes"]),
                size(r["after_bytes"]),
                ("+" if r["change_bytes"] > 0 else "") + size(r["change_bytes"]),
            )
            for r in c.sites.head(top).iter_rows(named=True)
        ]
    notes = [] if rows else ["no site holds a different amount at the peak"]
    return Part(
        f"Compared: {c.before_label} vs {c.after_label}: held at the peak, by site",
        facts,
        ("site", c.before_label, c.after_label, "change"),
        rows,
        notes,
    )
