"""Make a synthetic job of N ranks from one real rank trace, with injected skew.

Rank r is the source trace with ``distributedInfo`` rewritten (rank r, world size N), every
timestamp shifted by r × ``--shift-us``, and, on the ``--slow-rank``, every kernel lengthened by
``--slow-factor``. Usage:

    python benchmarks/make_job.py sample_traces/ddp_train.rank0.json.gz /tmp/job32 --ranks 32
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any


def make(source: Path, out: Path, ranks: int, shift_us: float, slow_rank: int, slow_factor: float) -> list[Path]:
    doc: dict[str, Any] = json.loads(gzip.decompress(source.read_bytes()) if source.suffix == ".gz" else source.read_bytes())
    events = doc.pop("traceEvents")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for r in range(ranks):
        shifted = []
        for e in events:
            e2 = dict(e)
            if isinstance(e2.get("ts"), (int, float)):
                e2["ts"] = e2["ts"] + r * shift_us
            if r == slow_rank and e2.get("cat") == "kernel" and isinstance(e2.get("dur"), (int, float)):
                e2["dur"] = e2["dur"] * slow_factor
            shifted.append(e2)
        info = dict(doc.get("distributedInfo") or {}) | {"rank": r, "world_size": ranks}
        body = doc | {"distributedInfo": info, "traceEvents": shifted}
        path = out / f"synthetic.rank{r}.json.gz"
        path.write_bytes(gzip.compress(json.dumps(body).encode(), compresslevel=1))
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--shift-us", type=float, default=50.0)
    parser.add_argument("--slow-rank", type=int, default=1)
    parser.add_argument("--slow-factor", type=float, default=1.3)
    args = parser.parse_args()
    files = make(args.source, args.out, args.ranks, args.shift_us, args.slow_rank, args.slow_factor)
    print(f"wrote {len(files)} rank traces to {args.out}")


if __name__ == "__main__":
    main()
