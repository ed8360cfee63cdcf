"""The link a job's collectives run over, and its peak, as far as the traces tell.

A trace names the GPU (``deviceProperties``) and the host (``hostName`` when written); it does
not name the interconnect. What can be said:

- every rank on one host, a GPU of an SXM/NVLink board: NVLink, at the GPU's one-direction
  NVLink bandwidth (the figure nccl-tests' bus bandwidth is compared with);
- one host, a PCIe card (the name says "PCIe"): PCIe, at its x16 one-direction rate, unless
  NVLink bridges join the cards (the trace cannot tell; the figure is then a floor);
- ranks on several hosts: the network between them (InfiniBand, RoCE, Ethernet) is not in the
  trace: the peak is unknown and said so, and the intra-host figure is not used.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from traceinsight.analysis.job.summary import RankSummary

# One-direction NVLink bandwidth per GPU (GB/s): NVIDIA's datasheets give the bidirectional
# total (H100/H200 SXM 900 GB/s, A100 SXM 600, H800/A800 400, B200 1.8 TB/s, V100 SXM2 300);
# half of it. The export variants come before the patterns they would also match.
_NVLINK = (
    (r"B200|B100|GB200", 900.0, "NVLink 5"),
    (r"H800", 200.0, "NVLink 4 (H800: 400 GB/s total)"),
    (r"H100|H200|GH200", 450.0, "NVLink 4"),
    (r"A800", 200.0, "NVLink 3 (A800: 400 GB/s total)"),
    (r"A100", 300.0, "NVLink 3"),
    (r"V100", 150.0, "NVLink 2"),
)
# PCIe x16, one direction (GB/s): Gen5 ~63, Gen4 ~32 (after 128b/130b encoding).
_PCIE = (
    (r"H100.*PCIE|H100 NVL|L40|L4\b", 63.0, "PCIe Gen5 x16"),
    (r"A100.*PCIE|A10\b|A30|A40|V100.*PCIE|V100S|T4\b", 32.0, "PCIe Gen4 x16"),
)


@dataclass(frozen=True)
class Link:
    name: str | None  # "NVLink 4", "PCIe Gen5 x16", None when unknown
    peak_gbps: float | None
    reason: str  # how it was chosen, or why it is unknown


def job_link(summaries: Sequence[RankSummary]) -> Link:
    """The link of the job's collectives and its one-direction peak per GPU."""
    if summaries and all(s.comm_measured_on == "host" for s in summaries):
        return Link(None, None, "host-side collectives (gloo or another CPU backend): they go through the host, not the GPU link")
    hosts = {s.host_name for s in summaries if s.host_name}
    names = {s.device_name for s in summaries if s.device_name}
    if len(hosts) > 1:
        return Link(None, None, f"ranks on {len(hosts)} hosts: the network between them is not in the trace")
    if not hosts and len(summaries) > 8:
        return Link(None, None, f"{len(summaries)} ranks and no host names: more than one host is likely, and the network is not in the trace")
    if len(names) != 1:
        return Link(None, None, "the GPU is not named in every trace" if not names else "the ranks' GPUs differ")
    device = next(iter(names))
    where = f"one host ({next(iter(hosts))})" if hosts else "one host assumed (no host name in the traces)"
    upper = device.upper()
    for pattern, gbps, label in _PCIE:
        if re.search(pattern, upper):
            return Link(label, gbps, f"{device}, {where}: PCIe card (NVLink bridges, if any, are not in the trace)")
    for pattern, gbps, label in _NVLINK:
        if re.search(pattern, upper):
            return Link(label, gbps, f"{device}, {where}: {label}, {gbps:.0f} GB/s per direction")
    return Link(None, None, f"no link peak known for {device}")
