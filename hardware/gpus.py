"""GPU catalog: the accelerator numbers every latency and cost figure derives from.

Every number is cited in ``hardware/data/gpus.csv`` (column ``source``). Conventions:

* ``fp16_tflops`` is the dense fp16/bf16 tensor rate (vendor "with sparsity" figures halved).
* Link bandwidths are per direction: vendor NVLink/xGMI/PCIe figures are bidirectional
  totals, and a KV copy or an all-reduce step moves data one way, so the CSV halves them.
  GPUs without a GPU-to-GPU link (A10, RTX4090, L40S) use their PCIe bandwidth.
* ``memory_gib`` is the capacity in GiB (2^30 bytes), the unit the memory is built in: an
  "80 GB" A100 or H100 carries 80 GiB of HBM (nvidia-smi: 81,920 / 81,559 MiB), which is
  also how Vidur counts it (``total_memory_gb * 1024**3``). GDDR cards (A10, L40S, A40) lose
  1/16 of it to ECC when ECC is on; the catalog keeps the physical capacity, as vLLM's
  ``gpu_memory_utilization`` is applied to what the driver reports and the 0.9 default
  leaves that much slack. Each row's ``source`` cites the capacity.
* ``price_per_hour_usd`` is one GPU's on-demand price; Cauchy's Table 1 prices are $/hour
  (its TFLOP/$ column equals TFLOPS * 3600 / price).

``profile_family`` names the GPU with measured Vidur profiles whose fitted efficiency
factors a GPU borrows: Hopper parts (H100, H800, H20) -> ``"h100"``; Ampere datacenter
HBM parts (A100, A800) -> ``"a100"``, and so do the other HBM parts V100 and MI210 (closest
HBM bandwidth-to-compute balance among the profiled GPUs); GDDR cards (A10, A40, L40S,
RTX4090) -> ``"a40"``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from hardware.csv_rows import checked_rows

_DATA = Path(__file__).parent / "data" / "gpus.csv"

PROFILE_FAMILIES = ("a100", "a40", "h100")

_NUMERIC_FIELDS = (
    "fp16_tflops",
    "mem_bandwidth_gbps",
    "memory_gib",
    "intra_node_link_gbps",
    "host_link_gbps",
    "price_per_hour_usd",
)
_CSV_COLUMNS = ("name", *_NUMERIC_FIELDS, "profile_family", "source")


@dataclass(frozen=True)
class GPUSpec:
    """One GPU type.

    Attributes:
        name: catalog key, e.g. ``"A100-80GB"``.
        fp16_tflops: dense fp16/bf16 tensor throughput, TFLOP/s (no sparsity).
        mem_bandwidth_gbps: HBM/GDDR bandwidth, GB/s.
        memory_gib: device memory, GiB (2^30 bytes).
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
    memory_gib: float
    intra_node_link_gbps: float
    host_link_gbps: float
    price_per_hour_usd: float
    profile_family: str
    source: str

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ValueError("GPUSpec name must be non-empty")
        for field_name in _NUMERIC_FIELDS:
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"GPU {self.name!r}: {field_name}={value!r} is not a number")
            if not math.isfinite(value) or value <= 0:
                raise ValueError(
                    f"GPU {self.name!r}: {field_name}={value!r} must be a positive finite number"
                )
        if self.profile_family not in PROFILE_FAMILIES:
            raise ValueError(
                f"GPU {self.name!r}: unknown profile_family {self.profile_family!r}; "
                f"known: {', '.join(PROFILE_FAMILIES)}"
            )
        if not self.source.strip():
            raise ValueError(f"GPU {self.name!r}: source must cite where the numbers come from")

    @property
    def memory_bytes(self) -> float:
        """Device memory in bytes, ``memory_gib * 2**30``."""
        return self.memory_gib * 2**30

    @property
    def memory_gb(self) -> float:
        """Device memory in GB (10^9 bytes), for callers that count decimal gigabytes."""
        return self.memory_bytes / 1e9

    @property
    def price_per_second_usd(self) -> float:
        return self.price_per_hour_usd / 3600.0


def load_gpu_catalog(csv_path: Path) -> dict[str, GPUSpec]:
    """Parse and validate a GPU catalog CSV; errors name the bad row (line) and field."""
    catalog: dict[str, GPUSpec] = {}
    for where, row in checked_rows(csv_path, _CSV_COLUMNS):
        numbers: dict[str, float] = {}
        for field_name in _NUMERIC_FIELDS:
            text = row[field_name]
            try:
                numbers[field_name] = float(text)
            except ValueError:
                raise ValueError(f"{where}: {field_name}={text!r} is not a number") from None
        try:
            spec = GPUSpec(
                name=row["name"],
                profile_family=row["profile_family"],
                source=row["source"],
                **numbers,
            )
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        if spec.name in catalog:
            raise ValueError(f"{where}: duplicate GPU name {spec.name!r}")
        catalog[spec.name] = spec
    if not catalog:
        raise ValueError(f"{csv_path}: no GPU rows")
    return catalog


GPU_CATALOG: Mapping[str, GPUSpec] = MappingProxyType(load_gpu_catalog(_DATA))


def gpu_names() -> list[str]:
    """Catalog keys in CSV order."""
    return list(GPU_CATALOG)


def get_gpu(name: str) -> GPUSpec:
    """The catalog entry for ``name`` (exact key); ``ValueError`` listing known names otherwise."""
    try:
        return GPU_CATALOG[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown GPU {name!r}; known: {', '.join(GPU_CATALOG)}") from None
