"""Analysis-time benchmark: every registered analysis, timed by name, on a large trace.

The trace is loaded once (through the cache, so later runs skip the parse); then each analysis
in ``traceinsight.analysis.core.registry.ANALYSES`` is run on it and timed (the results it requires
are computed first and not timed, so each row is that analysis's own time), and finally all of
them together as ``traceinsight analyze`` runs them, each once. New analyses are picked up from
the registry; analyses over several traces (jobs) are left out.

    python benchmarks/bench_analyses.py                    # builds .bench/large.json if needed
    python benchmarks/bench_analyses.py path/to/trace.json --repeat 3 --only gaps,steps
"""

from __future__ import annotations

import argparse
import gc
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from traceinsight.analysis.core.base import AnalysisConfig  # noqa: E402
from traceinsight.analysis.core.registry import ANALYSES  # noqa: E402
from traceinsight.analysis.core.runner import compute_inputs  # noqa: E402
from traceinsight.analysis.report import analyze  # noqa: E402
from traceinsight.trace.loader import load  # noqa: E402

DEFAULT_TRACE = ROOT / ".bench" / "large.json"
DEFAULT_SOURCE = ROOT / "sample_traces" / "train_eager.json.gz"


def _ensure_trace(path: Path) -> None:
    if path.exists():
        return
    if path != DEFAULT_TRACE:
        raise SystemExit(f"{path} does not exist")
    print(f"building {path} from {DEFAULT_SOURCE} ...", flush=True)
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "make_large_trace.py"), str(DEFAULT_SOURCE), "-o", str(path), "--target-mb", "450"],
        check=True,
    )


def _best_of(repeat: int, fn: object) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times) if repeat > 1 else statistics.fmean(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", type=Path, nargs="?", default=DEFAULT_TRACE)
    parser.add_argument("--repeat", type=int, default=1, help="runs per analysis; the best is kept")
    parser.add_argument("--only", default="", help="comma-separated analysis names (default: all)")
    parser.add_argument("--no-cache", action="store_true", help="parse the file instead of reading the cache")
    args = parser.parse_args()
    _ensure_trace(args.trace)

    start = time.perf_counter()
    trace = load(args.trace, cache=not args.no_cache)
    load_s = time.perf_counter() - start
    source = "cache" if trace.meta.from_cache else "parse"
    print(f"{args.trace}: {trace.events.height:,} events, {trace.kernels.height:,} GPU activities")
    print(f"load ({source}): {load_s:.2f} s\n")

    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    specs = [spec for spec in ANALYSES if spec.kind == "trace" and (not chosen or spec.name in chosen)]
    config = AnalysisConfig()
    rows = []
    for spec in specs:
        inputs = compute_inputs(trace, config, spec.requires)
        seconds = _best_of(args.repeat, lambda spec=spec, inputs=inputs: spec.run(trace, config, inputs))
        rows.append((spec.name, seconds))
    names = [spec.name for spec in specs]
    together = _best_of(args.repeat, lambda: analyze(trace, config, only=names))

    width = max([len(n) for n, _ in rows] + [len("all together")])
    print(f"{'analysis':<{width}}  seconds")
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds:7.3f}")
    print(f"{'-' * width}  -------")
    print(f"{'sum':<{width}}  {sum(s for _, s in rows):7.3f}")
    print(f"{'all together':<{width}}  {together:7.3f}")
    print(f"\ntotal with load: {load_s + together:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
