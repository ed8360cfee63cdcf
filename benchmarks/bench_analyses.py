"""Analysis-time benchmark: what ``traceinsight analyze`` costs on a large trace, end to end and
per analysis, against ``json.load`` of the same file in the same run.

For each trace: ``json.load`` of the file (in a fresh process, so its memory does not weigh
on the rest), the cold load (parse, no cache), each registered analysis timed by name (the
results it requires are computed first and not timed, so each row is that analysis's own
time; ``critical_path`` builds the trace's dependency graph, which ``findings`` then reuses),
all of them together as ``analyze`` runs them, and ``traceinsight analyze --no-cache --format
json`` end to end in a fresh process (load, every analysis, the JSON written). New analyses are
picked up from the registry; analyses over several traces (jobs) are left out.

``--tiles 10,60`` builds the benchmark trace at those sizes (``make_large_trace.py``: copies of
``--source`` one after the other) and prints, last, how each time grew against the number of
events: 1.0 is linear; above it, that analysis grows faster than the trace.

    python benchmarks/bench_analyses.py                    # builds .bench/large.json if needed
    python benchmarks/bench_analyses.py --tiles 10,60      # two sizes, and the growth between them
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
from traceinsight.analysis.registry import ANALYSES  # noqa: E402
from traceinsight.analysis.report import analyze  # noqa: E402
from traceinsight.analysis.runner import compute_inputs  # noqa: E402
from traceinsight.trace.loader import load  # noqa: E402

DEFAULT_TRACE = ROOT / ".bench" / "large.json"
DEFAULT_SOURCE = ROOT / "sample_traces" / "train_eager.json.gz"
JSON_LOAD = "import json, sys, time; t = time.perf_counter(); json.load(open(sys.argv[1])); print(time.perf_counter() - t)"


def _make(source: Path, path: Path, *, target_mb: float | None = None, tiles: int | None = None) -> None:
    if path.exists():
        return
    print(f"building {path} from {source} ...", flush=True)
    size = ["--tiles", str(tiles)] if tiles else ["--target-mb", str(target_mb or 450)]
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_large_trace.py"), str(source), "-o", str(path), *size], check=True)


def _best_of(repeat: int, fn: object) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times) if repeat > 1 else statistics.fmean(times)


def _json_load_s(path: Path) -> float | None:
    if path.suffix != ".json":
        return None  # json.load reads plain JSON; a .gz would time the inflate as well
    out = subprocess.run([sys.executable, "-c", JSON_LOAD, str(path)], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def _end_to_end_s(path: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "traceinsight", "analyze", str(path), "--no-cache", "--format", "json", "-o", str(Path("/dev/null"))],
        check=True, capture_output=True, cwd=ROOT,
    )
    return time.perf_counter() - start


def _replays(path: Path, no_cache: bool) -> tuple[int, float]:
    """How many times one ``analyze`` of a fresh load replays the dependency graph, and the
    seconds spent in those replays: a count that machine noise does not move."""
    from traceinsight.analysis.whatif import model, replay, shared

    calls = [0, 0.0]
    original = replay.replay

    def counted(*args: object, **kw: object) -> object:
        start = time.perf_counter()
        try:
            return original(*args, **kw)  # type: ignore[arg-type]
        finally:
            calls[0] += 1
            calls[1] += time.perf_counter() - start

    modules = (replay, shared, model)
    for module in modules:
        module.replay = counted  # type: ignore[assignment]
    try:
        analyze(load(path, cache=not no_cache), AnalysisConfig())
    finally:
        for module in modules:
            module.replay = original
    return int(calls[0]), float(calls[1])


def bench(
    path: Path, *, repeat: int, chosen: list[str], no_cache: bool, end_to_end: bool, count_replays: bool = False
) -> dict[str, float]:
    """Print the table for one trace; return every time (s) by name, plus ``events``."""
    json_s = _json_load_s(path)
    start = time.perf_counter()
    trace = load(path, cache=not no_cache)
    load_s = time.perf_counter() - start
    source = "cache" if trace.meta.from_cache else "parse"
    print(f"{path}: {trace.events.height:,} events, {trace.kernels.height:,} GPU activities")
    if json_s is not None:
        print(f"json.load: {json_s:.2f} s")
    print(f"load ({source}): {load_s:.2f} s\n")
    specs = [spec for spec in ANALYSES if spec.kind == "trace" and (not chosen or spec.name in chosen)]
    config = AnalysisConfig()
    rows = []
    for spec in specs:
        inputs = compute_inputs(trace, config, spec.requires)
        seconds = _best_of(repeat, lambda spec=spec, inputs=inputs: spec.run(trace, config, inputs))
        rows.append((spec.name, seconds))
    names = [spec.name for spec in specs]
    together = _best_of(repeat, lambda: analyze(trace, config, only=names))

    width = max([len(n) for n, _ in rows] + [len("all together")])
    print(f"{'analysis':<{width}}  seconds")
    for name, seconds in rows:
        print(f"{name:<{width}}  {seconds:7.3f}")
    print(f"{'-' * width}  -------")
    print(f"{'sum':<{width}}  {sum(s for _, s in rows):7.3f}")
    print(f"{'all together':<{width}}  {together:7.3f}")
    print(f"\ntotal with load: {load_s + together:.2f} s")
    times = dict(rows) | {"all together": together, "load": load_s, "events": float(trace.events.height)}
    replayed = sum(s for n, s in rows if n in ("critical_path", "findings"))
    if source == "parse":
        print(f"critical_path + findings: {replayed:.2f} s = {replayed / load_s:.2f} x the cold load")
    if json_s is not None:
        times["json.load"] = json_s
        print(f"load: {load_s / json_s:.2f} x json.load; load + all together: {(load_s + together) / json_s:.2f} x json.load")
    if count_replays:
        n, seconds = _replays(path, no_cache)
        times["replays"], times["replay s"] = float(n), seconds
        print(f"replays of the dependency graph in one analyze: {n} ({seconds:.2f} s in them)")
    if end_to_end:
        e2e = _end_to_end_s(path)
        times["end to end"] = e2e
        ratio = f" = {e2e / json_s:.2f} x json.load" if json_s is not None else ""
        print(f"traceinsight analyze --no-cache --format json, end to end: {e2e:.2f} s{ratio}")
    print()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", type=Path, nargs="?", default=None)
    parser.add_argument("--tiles", default="", help="comma-separated copies of --source to build and time (e.g. 10,60)")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="the trace --tiles copies")
    parser.add_argument("--out-dir", type=Path, default=ROOT / ".bench", help="where --tiles writes the traces it builds")
    parser.add_argument("--repeat", type=int, default=1, help="runs per analysis; the best is kept")
    parser.add_argument("--only", default="", help="comma-separated analysis names (default: all)")
    parser.add_argument("--no-cache", action="store_true", help="parse the file instead of reading the cache")
    parser.add_argument("--no-end-to-end", action="store_true", help="skip the `traceinsight analyze` run")
    parser.add_argument(
        "--count-replays", action="store_true",
        help="also count the dependency-graph replays of one analyze on a fresh load (and their seconds)",
    )
    args = parser.parse_args()
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    tiles = [int(t) for t in args.tiles.split(",") if t.strip()]
    if tiles:
        paths = [args.out_dir / f"{args.source.name.split('.')[0]}-x{n}.json" for n in tiles]
        for n, path in zip(tiles, paths, strict=True):
            _make(args.source, path, tiles=n)
    else:
        paths = [args.trace or DEFAULT_TRACE]
        if paths[0] == DEFAULT_TRACE:
            _make(DEFAULT_SOURCE, DEFAULT_TRACE, target_mb=450)
        elif not paths[0].exists():
            raise SystemExit(f"{paths[0]} does not exist")
    results = [
        bench(
            path, repeat=args.repeat, chosen=chosen, no_cache=args.no_cache or bool(tiles),
            end_to_end=not args.no_end_to_end, count_replays=args.count_replays,
        )
        for path in paths
    ]
    if len(results) >= 2:
        small, large = results[0], results[-1]
        size = large["events"] / small["events"]
        print(f"growth from {int(small['events']):,} to {int(large['events']):,} events ({size:.1f} x): time ratio / event ratio (1.0 = linear)")
        for name in [n for n in small if n != "events"]:
            if small[name] > 0 and name in large:
                print(f"  {name:<14} {small[name]:8.3f} s -> {large[name]:8.3f} s   {large[name] / small[name] / size:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
