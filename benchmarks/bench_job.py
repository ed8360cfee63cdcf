"""Time and parent memory of analysing a job: --jobs 1 vs --jobs 2, against one rank; Ray.

Each measurement runs in a fresh Python process and reports its wall time and its own peak RSS
(``resource.getrusage(RUSAGE_SELF)``: the parent only, not its workers). The Parquet cache is
off, so every rank is decoded from JSON. Usage:

    python benchmarks/bench_job.py --ranks 32 [--ray 8,64,256] [--ray-source FILE]

The pool comparison uses ranks made from ``ddp_train.rank0`` (1.2 MB); the Ray scaling curve
uses small ranks made from ``job_balanced.rank0`` (100 KB) unless ``--ray-source`` says
otherwise, so that 256 ranks fit in minutes on a small machine. ``--no-pool`` skips the pool.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

_CHILD = r"""
import json, resource, sys, time
from pathlib import Path
mode, arg, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0 = time.perf_counter()
if mode == "one":
    from traceinsight.engine.job import summarize_file
    from traceinsight.trace.discover import inspect
    summarize_file(inspect(arg), cache=False)
    n = 1
elif mode == "ray":
    import ray
    from traceinsight.engine.job import load_job
    ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": ":".join(sys.path)}})
    t0 = time.perf_counter()  # Ray's start-up is not per-rank work
    job = load_job(arg, engine="ray", cache=False)
    n = len(job.ranks); assert not job.failed, job.failed
else:
    from traceinsight.engine.job import load_job
    job = load_job(arg, engine="local", jobs=jobs, cache=False)
    n = len(job.ranks); assert not job.failed, job.failed
    job.analyze()
wall = time.perf_counter() - t0
print(json.dumps({"wall_s": wall, "ranks": n, "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def child(mode: str, arg: str, jobs: int) -> dict[str, float]:
    env = os.environ | {"PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-c", _CHILD, mode, arg, str(jobs)], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    from make_job import make

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", type=Path, default=ROOT / "sample_traces" / "ddp_train.rank0.json.gz")
    parser.add_argument("--ranks", type=int, default=32)
    parser.add_argument("--ray", default="", help="rank counts for the Ray run, e.g. 8,64,256")
    parser.add_argument("--ray-source", type=Path, default=ROOT / "sample_traces" / "job_balanced.rank0.json.gz")
    parser.add_argument("--no-pool", action="store_true", help="only the Ray runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_pool:
            pool(args.source, Path(tmp), args.ranks)
        for n in [int(x) for x in args.ray.split(",") if x]:
            ray_dir = Path(tmp) / f"ray{n}"
            make(args.ray_source, ray_dir, n, 50.0, 1, 1.3)
            r = child("ray", str(ray_dir), 2)
            print(f"ray, {n} ranks of {args.ray_source.name}: {r['wall_s']:.2f} s, {1000 * r['wall_s'] / n:.0f} ms per rank, "
                  f"parent peak RSS {r['maxrss_mb']:.0f} MB", flush=True)


def pool(source: Path, tmp: Path, ranks: int) -> None:
    from make_job import make

    job_dir = tmp / f"job{ranks}"
    files = make(source, job_dir, ranks, 50.0, 1, 1.3)
    one = child("one", str(files[0]), 1)
    print(f"one rank in-process: {one['wall_s']:.2f} s, parent peak RSS {one['maxrss_mb']:.0f} MB", flush=True)
    results = {}
    for jobs in (1, 2):
        r = child("pool", str(job_dir), jobs)
        results[jobs] = r
        print(f"{r['ranks']} ranks, --jobs {jobs}: {r['wall_s']:.2f} s, parent peak RSS {r['maxrss_mb']:.0f} MB "
              f"({r['maxrss_mb'] / one['maxrss_mb']:.2f}x one rank)", flush=True)
    print(f"jobs 2 / jobs 1 time: {results[2]['wall_s'] / results[1]['wall_s']:.2f}", flush=True)


if __name__ == "__main__":
    main()
