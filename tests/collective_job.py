"""A hand-made multi-rank NCCL job with two kinds of process groups (written by hand, not
recorded: no real trace we have holds several process groups, sequence numbers or skewed host
clocks, so the tests that need them build this one and say so).

Four ranks; per step, on every rank: a compute kernel, an all-reduce in its tensor-parallel
group ("tp01" = ranks 0, 1; "tp23" = ranks 2, 3; 1 MiB) and an all-reduce in the data-parallel
group ("dp" = all four; 64 MiB + 1 KiB × step, so that a collective matched to the wrong step
shows up as a size mismatch). The late rank spends ``late_us`` in a user annotation
``extra_host_work`` before launching its data-parallel all-reduce, and every other rank waits
for it. Each rank's clock is shifted by ``skew_us[rank]`` (what its trace records = true time
+ skew), so aligning the clocks must recover -skew. A rank listed in ``starts_late`` has no
first step (its trace began one step later).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from handmade import kernel, launch, op, write_trace

STEP_US = 10_000.0
DP_TRANSFER_US = 400.0
TP_TRANSFER_US = 40.0
BASE_NS = 1_700_000_000_000_000_000
TP_GROUP = {0: "tp01", 1: "tp01", 2: "tp23", 3: "tp23"}


def dp_bytes(step: int) -> int:
    return (64 << 20) + 1024 * step


def _nccl(name: str, group: str, seq: int | None, nelems: int, size: int) -> dict[str, Any]:
    args: dict[str, Any] = {
        "Collective name": name, "In msg nelems": nelems, "Out msg nelems": nelems, "Group size": size,
        "dtype": "Float", "Process Group Name": group,
    }  # fmt: skip
    if seq is not None:
        args["Seq"] = seq
    return args


def write_job(
    folder: Path,
    *,
    late_rank: int = 2,
    late_us: float = 2_000.0,
    skew_us: tuple[float, ...] = (0.0, -700.0, 35.0, 5_000.0),
    steps: int = 4,
    seq: bool = True,
    starts_late: tuple[int, ...] = (),
    device: str = "NVIDIA H200",
) -> list[str]:
    paths = []
    for rank in range(4):
        events: list[dict[str, Any]] = []
        corr = 1
        skew = skew_us[rank]
        for k in range(steps):
            if k == 0 and rank in starts_late:
                continue
            s = 1_000.0 + k * STEP_US  # true time
            events.append(op(f"ProfilerStep#{k}", s + skew, STEP_US - 10, cat="user_annotation"))
            # compute: 3 ms on every rank
            events.append(op("aten::mm", s + 10 + skew, 20))
            events.append(launch("cudaLaunchKernel", s + 15 + skew, 5, corr))
            events.append(kernel("sm90_xmma_gemm_bf16bf16_bf16f32", s + 30 + skew, 3_000, corr))
            corr += 1
            # tensor-parallel all-reduce, both ranks of the group on time
            tp_start = s + 3_040
            tp_args = _nccl("allreduce", TP_GROUP[rank], k if seq else None, 1 << 18, 2)
            events.append(op("record_param_comms", s + 3_000 + skew, 10, args=tp_args))
            events.append(launch("cudaLaunchKernel", s + 3_005 + skew, 5, corr))
            events.append(kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", tp_start + skew, TP_TRANSFER_US + rank * 0.5, corr, stream=21, extra=tp_args))
            corr += 1
            # data-parallel all-reduce: the late rank does extra host work first
            extra = late_us if rank == late_rank else 0.0
            if extra:
                events.append(op("extra_host_work", s + 3_100 + skew, extra, cat="user_annotation"))
            launch_at = s + 3_100 + extra
            arrive = launch_at + 20
            last = s + 3_100 + (late_us if 0 <= late_rank < 4 else 0.0) + 20
            dp_args = _nccl("allreduce", "dp", k if seq else None, dp_bytes(k) // 4, 4)
            events.append(op("record_param_comms", launch_at - 5 + skew, 10, args=dp_args))
            events.append(launch("cudaLaunchKernel", launch_at + skew, 5, corr))
            # every rank ends together (± rank × 1 µs): the last arrival + the transfer
            end = last + DP_TRANSFER_US + rank * 1.0
            events.append(kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", arrive + skew, end - arrive, corr, stream=20, extra=dp_args))
            corr += 1
        header = {
            "baseTimeNanoseconds": BASE_NS,
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 4},
            "deviceProperties": [{"id": 0, "name": device, "computeMajor": 9, "computeMinor": 0, "totalGlobalMem": 150_000_000_000, "numSms": 132}],
        }
        paths.append(str(write_trace(folder / f"coll.rank{rank}.json", events, **header)))
    return paths
