"""GPU catalog: the accelerator numbers every latency and cost figure derives from.

Every number is cited in ``hardware/data/gpus.csv`` (column ``source``).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path

_DATA = Path(__file__).parent / "data" / "gpus.csv"


@dataclass(frozen=True)
class GPUSpec:
    """One GPU type.

    Attributes:
        name: catalog key, e.g. ``"A100-80GB"``.
        fp16_tflops: dense fp16/bf16 tensor throughput, TFLOP/s (no sparsity).
        mem_bandwidth_gbps: HBM/GDDR bandwidth, GB/s.
        memory_gb: device memory, GB (10^9 bytes).
        intra_node_link_gbps: per-GPU GPU-to-GPU bandwidth inside a node (NVLink, xGMI or PCIe), GB/s.
        host_link_gbps: GPU-to-host bandwidth (PCIe), GB/s, used for swap and cold start.
        price_per_hour_usd: on-demand price of one GPU, $/hour.
        profile_family: the profiled GPU (``"a100"``, ``"a40"``, ``"h100"``) whose fitted
            efficiency factors this GPU borrows (see ``hardware/latency.py``).
        source: where the numbers come from.
    """

    name: str
    fp16_tflops: float
    mem_bandwidth_gbps: float
    memory_gb: float
    intra_node_link_gbps: float
    host_link_gbps: float
    price_per_hour_usd: float
    profile_family: str
    source: str

    @property
    def memory_bytes(self) -> float:
        return self.memory_gb * 1e9

    @property
    def price_per_second_usd(self) -> float:
        return self.price_per_hour_usd / 3600.0
