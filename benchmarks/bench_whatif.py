"""Graph + one replay of a large trace against its cold load time, in one run: what
``analyze`` builds once per trace for the critical path and the replayed savings (the graph,
its replay with recorded durations, the wake edges between threads).

    python benchmarks/bench_whatif.py                 # .bench/large.json (make_large_trace.py)
    python benchmarks/bench_whatif.py TRACE

The cold load (no cache) and the graph build + replay run in this process, one after the
other; the ratio is what the target (at most 25 %) is about.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from traceinsight.analysis.whatif.graph import build  # noqa: E402
from traceinsight.analysis.whatif.replay import replay  # noqa: E402
from traceinsight.analysis.whatif.threads import as_woken, with_wakes  # noqa: E402
from traceinsight.trace.loader import load  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("trace", nargs="?", default=str(ROOT / ".bench" / "large.json"))
    args = parser.parse_args()
    t0 = time.perf_counter()
    trace = load(args.trace, cache=False)
    t1 = time.perf_counter()
    graph = build(trace)
    t2 = time.perf_counter()
    timeline = replay(graph)
    t3 = time.perf_counter()
    woken = with_wakes(graph, timeline)
    if woken is not graph:
        as_woken(woken, timeline)
    t4 = time.perf_counter()
    load_s, graph_s, replay_s, wake_s = t1 - t0, t2 - t1, t3 - t2, t4 - t3
    print(f"events {trace.events.height:,}  host nodes {graph.host_nodes:,}  device nodes {graph.gpu_nodes:,}  rounds {timeline.rounds}")
    print(f"cold load {load_s:.2f} s  graph {graph_s:.2f} s  replay {replay_s:.2f} s  wake edges {wake_s:.2f} s")
    print(f"graph + replay + wake edges = {100 * (graph_s + replay_s + wake_s) / load_s:.1f} % of the cold load (target ≤ 25 %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
