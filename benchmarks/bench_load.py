"""Load-time benchmark: cold load, cached load and peak memory against ``json.load``.

Each measurement runs in a fresh Python process so its peak RSS is its own. Figures are
reported as ratios to ``json.load`` of the same file in the same run, which makes them
comparable across machines.

    python benchmarks/bench_load.py                      # builds .bench/large.json if needed
    python benchmarks/bench_load.py path/to/trace.json --repeat 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = ROOT / ".bench" / "large.json"
DEFAULT_SOURCE = ROOT / "sample_traces" / "train_eager.json.gz"

_CHILD = r"""
import json, os, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]
# what docs/trace-model.md asks of users: set before polars is first imported
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:10,muzzy_decay_ms:0")
start = time.perf_counter()
if mode == "json_load":
    with open(path, "rb") as handle:
        doc = json.load(handle)
    n = len(doc["traceEvents"])
else:
    import traceinsight
    trace = traceinsight.load(path, cache=(mode != "cold"))
    n = trace.events.height
    assert trace.meta.from_cache == (mode == "cached"), (mode, trace.meta.from_cache)
elapsed = time.perf_counter() - start
peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
print(json.dumps({"seconds": elapsed, "peak_rss_bytes": peak * 1024, "rows": n}))
"""


def _run(mode: str, path: Path, cache_dir: str) -> dict[str, float]:
    # PYTHONPATH: measure this checkout, not whichever copy the interpreter has installed
    env = {"TRACEINSIGHT_CACHE_DIR": cache_dir, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(path)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("trace", type=Path, nargs="?", default=DEFAULT_TRACE)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--skip-json-load", action="store_true", help="leave out the json.load baseline"
    )
    args = parser.parse_args()
    if not args.trace.exists():
        if args.trace != DEFAULT_TRACE:
            parser.error(f"{args.trace} does not exist")
        print(f"building {DEFAULT_TRACE} from {DEFAULT_SOURCE} ...", flush=True)
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "benchmarks" / "make_large_trace.py"),
                str(DEFAULT_SOURCE),
                "-o",
                str(DEFAULT_TRACE),
                "--target-mb",
                "450",
            ],
            check=True,
        )
    size = args.trace.stat().st_size
    results: dict[str, list[dict[str, float]]] = {"json_load": [], "cold": [], "cached": []}
    with tempfile.TemporaryDirectory() as cache_dir:
        for _ in range(args.repeat):
            if not args.skip_json_load:
                results["json_load"].append(_run("json_load", args.trace, cache_dir))
            # each repetition starts without a cache entry, fills it, then reads it back
            for entry in Path(cache_dir).iterdir():
                subprocess.run(["rm", "-rf", str(entry)], check=True)
            results["cold"].append(_run("cold", args.trace, cache_dir))
            _run("fill", args.trace, cache_dir)
            results["cached"].append(_run("cached", args.trace, cache_dir))
    print(f"trace: {args.trace} ({size / 1e6:.0f} MB)")
    base = (
        statistics.median(r["seconds"] for r in results["json_load"])
        if results["json_load"]
        else None
    )
    print(
        f"{'measurement':<12} {'median s':>9} {'range s':>13} {'vs json.load':>13} "
        f"{'peak RSS MB':>12} {'RSS/file':>9} {'rows':>10}"
    )
    for mode, runs in results.items():
        if not runs:
            continue
        times = [r["seconds"] for r in runs]
        seconds = statistics.median(times)
        spread = f"{min(times):.2f}–{max(times):.2f}"
        # peak RSS: the worst run, since the allocator's timing makes it vary a little
        rss = max(r["peak_rss_bytes"] for r in runs)
        ratio = f"{seconds / base:.3f}x" if base else "-"
        print(
            f"{mode:<12} {seconds:>9.2f} {spread:>13} {ratio:>13} {rss / 1e6:>12.0f} "
            f"{rss / size:>9.2f} {int(runs[0]['rows']):>10,}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
