"""The ``collective_match`` section as plain-string tables (every job format lays them out)."""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.job.collective_match import CollectiveMatchResult
from traceinsight.render.units import ns, pct, size

TableParts = tuple[str, tuple[str, ...], list[tuple[str, ...]], str]


def _tables_of(m: CollectiveMatchResult) -> list[TableParts]:
    if not m.available:
        return [("Collectives across ranks", ("rank",), [], m.reason or "")]
    ranks: list[tuple[str, ...]] = [
        (str(r["rank"]), ns(r["offset_ns"]), str(r["collectives"]), ns(r["wait_ns"]), str(r["last_arrivals"]))
        for r in m.per_rank.iter_rows(named=True)
    ]
    link = f"{m.link}, {m.link_gbps:.0f} GB/s per direction" if m.link and m.link_gbps else f"link peak unknown: {m.link_reason}"
    note = (
        f"matched by {m.matched_by}"
        + (f" ({m.unmatched} on one rank only)" if m.unmatched else "")
        + f"; clocks aligned on the collectives' ends, which then agree within {ns(m.end_spread_p50_ns)} "
        f"(median) / {ns(m.end_spread_p90_ns)} (90 %); wait (whole trace) = last arrival − own arrival; {link}"
    )
    kinds = (
        m.collectives.group_by("collective")
        .agg(
            pl.len().alias("n"),
            pl.col("bytes").median().alias("bytes"),
            pl.col("transfer_ns").median().alias("transfer"),
            pl.col("skew_ns").median().alias("skew"),
            pl.col("busbw_gbps").median().alias("bus"),
            pl.col("link_share").median().alias("link"),
            pl.col("overlap_share").mean().alias("overlap"),
            pl.col("exposed").sum().alias("exposed"),
        )
        .sort(["transfer", "collective"], descending=[True, False])
    )
    kind_rows: list[tuple[str, ...]] = [
        (
            str(r["collective"]),
            str(r["n"]),
            size(r["bytes"]) if r["bytes"] is not None else "?",
            ns(r["transfer"]),
            ns(r["skew"]),
            f"{r['bus']:.1f}" if r["bus"] is not None else "?",
            pct(100 * r["link"]) if r["link"] is not None else "?",
            pct(100 * (r["overlap"] or 0.0)),
            str(r["exposed"]),
        )
        for r in kinds.iter_rows(named=True)
    ]
    late_rows: list[tuple[str, ...]] = [
        (
            str(r["rank"]),
            str(r["collectives"]),
            ns(r["late_by_per_step_ns"]),
            str(r["cause"]),
            str(r["work"] or "-"),
            ns(r["work_ns"]),
            ns(r["others_work_ns"]),
        )
        for r in m.late.iter_rows(named=True)
    ]
    per = "per step" if m.steps > 1 else "whole trace"
    return [
        ("Collectives across ranks", ("rank", "offset", "colls", "wait", "last"), ranks, note),
        (
            "Collectives by kind (medians)",
            ("kind", "n", "size", "transfer", "skew", "bus GB/s", "link", "overlap", "exp."),
            kind_rows,
            "transfer = the shortest duration among the ranks; bus bandwidth by nccl-tests' formulas; overlap = "
            "time beside compute kernels; link = bus bandwidth / the link's peak; exp. = exposed: less than half "
            "hidden on the last rank",
        ),
        (
            f"Late arrivals ({per})",
            ("rank", "last at", "late by", "cause", "work before", "its", "others"),
            late_rows,
            "over the steps every rank has; late by = its arrival − the second-last arrival; cause: kernels when compute is most of its extra "
            "lead-in, else host; work before = the host span covering most of its host time before the launch",
        ),
    ]


def matched_tables(m: CollectiveMatchResult) -> list[TableParts]:
    """(title, columns, rows, note) of each table of the section."""
    return _tables_of(m)
