"""Load-time benchmark: cold load, cached load and peak memory against ``json.load``.

Each measurement runs in a fresh Python process so its peak memory is its own: the larger of
that process's peak RSS and the peak, sampled from outside, of the memory of the process and
every process it starts (the decode helpers; proportional set sizes, so a page they share
counts once), summed, plus what they keep in shared memory whether mapped or not, once: the
decoded pieces the helpers leave in ``/dev/shm`` for the parent, and the in-memory file
holding a gzip trace's text. Figures
are reported as ratios to ``json.load`` of the same file in the same run, which makes them
comparable across machines. ``cold`` decodes with the default helpers (one process per core),
``cold_wN`` with N processes (``--workers auto,2,1``).

    python benchmarks/bench_load.py                      # builds .bench/large.json if needed
    python benchmarks/bench_load.py path/to/trace.json --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = ROOT / ".bench" / "large.json"
DEFAULT_SOURCE = ROOT / "sample_traces" / "train_eager.json.gz"

_CHILD = r"""
import json, os, resource, sys, time
mode, path, workers = sys.argv[1], sys.argv[2], sys.argv[3]
# what docs/trace-model.md asks of users: set before polars is first imported
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:10,muzzy_decay_ms:0")
start = time.perf_counter()
if mode == "json_load":
    with open(path, "rb") as handle:
        doc = json.load(handle)
    n = len(doc["traceEvents"])
else:
    import traceinsight
    trace = traceinsight.load(
        path, cache=(mode != "cold"), workers=int(workers) if workers != "auto" else None
    )
    n = trace.events.height
    assert trace.meta.from_cache == (mode == "cached"), (mode, trace.meta.from_cache)
elapsed = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": elapsed, "peak_rss_bytes": peak * 1024, "rows": n}))
"""
_SAMPLE_S = 0.05


def _tree_memory_bytes(root: int) -> int:
    """Memory of ``root`` and every process below it (decode helpers), summed: their peaks
    overlap, so the largest process alone would understate what the load needs. Each counts
    its proportional set size, which splits a page shared by several processes (polars' library,
    the mapped trace file) among them instead of counting it in each; RSS where that is unknown."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parents[int(entry)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        children = [p for p, parent in parents.items() if parent == pid and p not in tree]
        tree.update(children)
        frontier.extend(children)
    return sum(_process_memory_bytes(pid) for pid in tree) + _memfd_bytes(tree)


def _process_memory_bytes(pid: int) -> int:
    """Proportional set size without shared memory (counted whole by ``_memfd_bytes``)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            fields = {line.split(":")[0]: int(line.split()[1]) for line in handle if "kB" in line}
        return (fields["Pss"] - fields.get("Pss_Shmem", 0)) * 1024
    except (OSError, IndexError, ValueError, KeyError):
        pass
    try:
        with open(f"/proc/{pid}/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def _memfd_bytes(tree: set[int]) -> int:
    """In-memory files the processes hold open (a gzip trace's text), each counted once and
    whole: pages of it that no process maps are memory too, which no RSS shows."""
    sizes: dict[tuple[int, int], int] = {}
    for pid in tree:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:"):
                    continue
                stat = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            sizes[(stat.st_dev, stat.st_ino)] = stat.st_blocks * 512
    return sum(sizes.values())


def _spool_bytes() -> int:
    """Bytes of the decode helpers' pieces waiting in shared memory: RAM that no process
    maps, so no RSS shows it."""
    total = 0
    for spool in Path("/dev/shm").glob("traceinsight-decode-*"):
        for piece in spool.glob("*"):
            try:
                total += piece.stat().st_blocks * 512
            except OSError:
                continue
    return total


def _run(mode: str, path: Path, cache_dir: str, workers: str = "auto") -> dict[str, float]:
    # PYTHONPATH: measure this checkout, not whichever copy the interpreter has installed
    python_path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {"TRACEINSIGHT_CACHE_DIR": cache_dir, "PATH": "/usr/bin:/bin", "PYTHONPATH": python_path}
    # Sampled from out here, so that the sampling takes no time from the measured process.
    with subprocess.Popen(
        [sys.executable, "-c", _CHILD, mode, str(path), workers],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    ) as proc:
        tree_peak = 0
        while proc.poll() is None:
            tree_peak = max(tree_peak, _tree_memory_bytes(proc.pid) + _spool_bytes())
            time.sleep(_SAMPLE_S)
        stdout = proc.stdout.read() if proc.stdout else ""
    if proc.returncode:
        raise SystemExit(f"{mode} run failed with exit code {proc.returncode}")
    result: dict[str, float] = json.loads(stdout.strip().splitlines()[-1])
    result["peak_rss_bytes"] = max(result["peak_rss_bytes"], tree_peak)
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
    parser.add_argument(
        "--workers",
        default="auto,1",
        help="decode processes of the cold loads, one row each (auto: one per core): "
        "'auto,1' gives the rows cold and cold_w1",
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
    cold_rows = {f"cold_w{w}" if w != "auto" else "cold": w for w in args.workers.split(",")}
    results: dict[str, list[dict[str, float]]] = {"json_load": []}
    results.update((row, []) for row in cold_rows)
    results["cached"] = []
    with tempfile.TemporaryDirectory() as cache_dir:
        for _ in range(args.repeat):
            if not args.skip_json_load:
                results["json_load"].append(_run("json_load", args.trace, cache_dir))
            # each repetition starts without a cache entry, fills it, then reads it back
            for entry in Path(cache_dir).iterdir():
                subprocess.run(["rm", "-rf", str(entry)], check=True)
            for row, workers in cold_rows.items():
                results[row].append(_run("cold", args.trace, cache_dir, workers=workers))
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
        f"{'peak mem MB':>12} {'mem/file':>9} {'rows':>10}"
    )
    for mode, runs in results.items():
        if not runs:
            continue
        times = [r["seconds"] for r in runs]
        seconds = statistics.median(times)
        spread = f"{min(times):.2f}–{max(times):.2f}"
        # peak memory: the worst run, since the allocator's timing makes it vary a little
        rss = max(r["peak_rss_bytes"] for r in runs)
        ratio = f"{seconds / base:.3f}x" if base else "-"
        print(
            f"{mode:<12} {seconds:>9.2f} {spread:>13} {ratio:>13} {rss / 1e6:>12.0f} "
            f"{rss / size:>9.2f} {int(runs[0]['rows']):>10,}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
