"""Each collective of each rank matched to its peers, and the ranks' clocks aligned on them.

**Key.** A collective is identified across ranks by its process group and its place in that
group's sequence. Recent Kineto writes the sequence number (``Seq``) on the collective's op
and kernel: the same on every rank of the group, so matching by it survives a rank whose trace
starts earlier or later. Point-to-point operations (send/recv) have a sequence of their own, so
they are keyed apart. A group without sequence numbers on every rank falls back to the order
within the group (the k-th collective of a group on one rank is the k-th on the others),
shifted per rank so that the kinds and sizes agree best with the lowest rank's: a rank whose
trace begins one collective later is not matched off by one.

**Clocks.** Each trace's times are on its host's clock (``baseTimeNanoseconds``). A collective
completes on every rank at about the same instant (the last piece of data arrives everywhere
within a few µs), whatever the ranks' arrival times, so the ends of matched collectives
measure the clock offsets without being disturbed by arrival skew. A rank's offset is the
median of (reference end − its end) over the collectives it shares, iterated over all groups
so that ranks with no group in common with rank 0 are reached through others (tensor and
pipeline parallel groups). ``end_spread_ns`` after alignment says how well it holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from traceinsight.analysis.job.collectives import all_collectives
from traceinsight.analysis.job.summary import RankSummary

KEY = ["process_group", "p2p", "match_k"]
UNNAMED_GROUP = "default"  # what a rank summary calls the group of a collective without a name
P2P_KINDS = ("send_recv", "send", "recv", "sendrecv")
# Kinds whose end is not common to all ranks (a send ends before its recv; an all-to-all
# rank is done when its own exchanges are): left out of the
# clock alignment.
_NOT_FOR_CLOCKS = (*P2P_KINDS, "barrier", "all_to_all")
# How far (in collectives) a rank's order may be shifted against the reference rank's.
MAX_SHIFT = 16
_ALIGN_ROUNDS = 40


@dataclass(frozen=True)
class Matched:
    """Every rank's matched collectives (one row per rank and collective) and the clocks."""

    rows: pl.DataFrame
    offsets: pl.DataFrame  # rank, offset_ns (add to the rank's absolute times), collectives
    matched_by: str
    unmatched: int  # collectives seen on one rank only


def _best_shift(ref: np.ndarray, other: np.ndarray, ref_end: np.ndarray, other_end: np.ndarray) -> int:
    """The shift s (other[i] matches ref[i + s]) with the most agreeing signatures less the
    disagreeing ones; among equals
    (a group whose collectives all look alike), the one whose ends are closest in time."""
    scored: list[tuple[int, float, int, int]] = []
    for s in range(-MAX_SHIFT, MAX_SHIFT + 1):
        lo, hi = max(0, -s), min(len(other), len(ref) - s)
        if hi <= lo:
            continue
        agree = int(np.sum(other[lo:hi] == ref[lo + s : hi + s]))
        score = 2 * agree - (hi - lo)  # agreements less disagreements
        distance = float(np.median(np.abs(other_end[lo:hi] - ref_end[lo + s : hi + s])))
        scored.append((-score, distance, abs(s), s))
    return min(scored)[3] if scored else 0


def _order_keys(rows: pl.DataFrame, offsets: dict[int, int]) -> pl.DataFrame:
    """``match_k`` for rows of groups without sequence numbers: order within (rank, group,
    p2p), shifted against the lowest rank of the group by kind and size, then by end times
    (on the clocks as aligned so far: ``offsets``)."""
    ordered = rows.sort("abs_start_ns").with_columns(
        (pl.col("abs_end_ns") + pl.col("rank").replace_strict(offsets, default=0, return_dtype=pl.Int64)).alias("_end"),
        pl.int_range(pl.len(), dtype=pl.Int64).over("rank", "process_group", "p2p").alias("_ord"),
        (pl.col("kind") + pl.lit("|") + pl.col("bytes").cast(pl.String).fill_null("?")).alias("_sig"),
    )
    shifts: list[dict[str, object]] = []
    for (group, p2p), part in ordered.group_by("process_group", "p2p", maintain_order=True):
        ranks = sorted(part["rank"].unique().to_list())
        ref = part.filter(pl.col("rank") == ranks[0]).sort("_ord")
        for r in ranks:
            own = part.filter(pl.col("rank") == r).sort("_ord")
            shift = 0 if r == ranks[0] else _best_shift(
                ref["_sig"].to_numpy(), own["_sig"].to_numpy(), ref["_end"].to_numpy(), own["_end"].to_numpy()
            )
            shifts.append({"process_group": group, "p2p": p2p, "rank": r, "_shift": shift})
    table = pl.DataFrame(shifts, schema={"process_group": pl.String, "p2p": pl.Boolean, "rank": pl.Int64, "_shift": pl.Int64})
    return (
        ordered.join(table, on=["process_group", "p2p", "rank"], how="left")
        .with_columns((pl.col("_ord") + pl.col("_shift").fill_null(0)).alias("match_k"))
        .drop("_ord", "_sig", "_shift", "_end")
    )


def keyed(summaries: Sequence[RankSummary], offsets: dict[int, int] | None = None) -> tuple[pl.DataFrame, str]:
    """Every rank's collectives with the match key (:data:`KEY`) and how they were keyed
    (``offsets``: clock offsets by rank, for the order fallback's tie-break)."""
    rows = all_collectives(summaries)
    if rows.height == 0:
        return rows, "nothing"
    rows = rows.with_columns(
        # A trace that names no process group (before Kineto wrote it): the collectives of one
        # kind keep their order on every rank whether or not the kinds share a group (an
        # all-to-all group and a data-parallel group interleave differently on each rank).
        pl.when(pl.col("process_group") == UNNAMED_GROUP)
        .then(pl.lit(UNNAMED_GROUP + "/") + pl.col("kind"))
        .otherwise(pl.col("process_group"))
        .alias("process_group"),
        pl.col("kind").is_in(list(P2P_KINDS)).alias("p2p"),
        (pl.col("end_ns") + (pl.col("abs_start_ns") - pl.col("start_ns"))).alias("abs_end_ns"),
    )
    # A group is keyed by sequence number only when every rank's every collective in it has one.
    by_seq = rows.group_by("process_group", "p2p").agg(pl.col("seq").is_not_null().all().alias("_seq"))
    rows = rows.join(by_seq, on=["process_group", "p2p"], how="left")
    with_seq = rows.filter(pl.col("_seq")).with_columns(pl.col("seq").alias("match_k"))
    without = rows.filter(~pl.col("_seq"))
    parts = [with_seq]
    if without.height:
        parts.append(_order_keys(without, offsets or {}))
    out = pl.concat([p.drop("_seq") for p in parts], how="vertical_relaxed")
    n_seq, n_order = with_seq.height, without.height
    how = (
        "process group and sequence number"
        if n_order == 0
        else "order within the process group"
        if n_seq == 0
        else "process group and sequence number where present, else order within the group"
    )
    return out, how


def align(rows: pl.DataFrame) -> pl.DataFrame:
    """rank, offset_ns, collectives: the clock offset of each rank against the lowest rank."""
    ranks = rows.select("rank").unique().sort("rank")
    usable = rows.filter(~pl.col("kind").is_in(list(_NOT_FOR_CLOCKS)) & (pl.len().over(KEY) >= 2))
    if usable.height == 0:
        # Only all-to-alls (or sends and receives): their ends are the best measure there is.
        usable = rows.filter(pl.len().over(KEY) >= 2)
    offsets = ranks.with_columns(pl.lit(0, pl.Int64).alias("offset_ns"))
    if usable.height == 0:
        return offsets.with_columns(pl.lit(0, pl.Int64).alias("collectives"))
    for _ in range(_ALIGN_ROUNDS):
        step = (
            usable.join(offsets, on="rank", how="left")
            .with_columns((pl.col("abs_end_ns") + pl.col("offset_ns")).alias("_end"))
            # against the median end of the collective's ranks (its own included: every rank
            # moves at once, so a rank chasing the others alone would overshoot)
            .with_columns((pl.col("_end").median().over(KEY) - pl.col("_end")).alias("_resid"))
            .group_by("rank")
            .agg(pl.col("_resid").median().round().cast(pl.Int64).alias("_delta"))
        )
        offsets = offsets.join(step, on="rank", how="left").with_columns(
            (pl.col("offset_ns") + pl.col("_delta").fill_null(0)).alias("offset_ns")
        ).drop("_delta")
        if int(step["_delta"].abs().max() or 0) <= 100:  # type: ignore[arg-type]
            break
    anchor = int(offsets["offset_ns"][0])
    counts = usable.group_by("rank").agg(pl.len().cast(pl.Int64).alias("collectives"))
    return (
        offsets.with_columns(pl.col("offset_ns") - anchor)
        .join(counts, on="rank", how="left")
        .with_columns(pl.col("collectives").fill_null(0))
        .sort("rank")
    )


def match(summaries: Sequence[RankSummary]) -> Matched:
    """The matched collectives of every rank on the aligned clock: ``start_al_ns`` /
    ``end_al_ns`` (aligned), ``wait_ns`` (last arrival − own arrival), ``is_last``."""
    rows, how = keyed(summaries)
    if rows.height and not how.startswith("process group and sequence number"):
        # The order fallback again, its ties broken on the clocks aligned by the first pass.
        first = align(rows.filter(pl.len().over(KEY) >= 2))
        rows, how = keyed(summaries, {int(r): int(o) for r, o in first.select("rank", "offset_ns").iter_rows()})
    if rows.height == 0:
        return Matched(rows, pl.DataFrame(schema={"rank": pl.Int64, "offset_ns": pl.Int64, "collectives": pl.Int64}), how, 0)
    unmatched = int(rows.filter(pl.len().over(KEY) < 2).height)
    rows = rows.filter(pl.len().over(KEY) >= 2)
    offsets = align(rows)
    aligned = (
        rows.join(offsets.select("rank", "offset_ns"), on="rank", how="left")
        .with_columns(
            (pl.col("abs_start_ns") + pl.col("offset_ns")).alias("start_al_ns"),
            (pl.col("abs_end_ns") + pl.col("offset_ns")).alias("end_al_ns"),
        )
        .with_columns(
            (pl.col("start_al_ns").max().over(KEY) - pl.col("start_al_ns")).alias("arrival_wait_ns"),
            (pl.col("start_al_ns") == pl.col("start_al_ns").max().over(KEY)).alias("_latest"),
        )
        .with_columns(
            # One last rank per collective (ties: the lowest rank).
            (pl.col("rank") == pl.col("rank").filter(pl.col("_latest")).min().over(KEY)).alias("is_last"),
        )
        .drop("_latest")
        .sort([*KEY, "rank"])
    )
    return Matched(aligned, offsets, how, unmatched)
