"""GPU Combos (Cauchy §3.1, §3.3.2): a prefill GPU group paired with a decode GPU group, or
a homogeneous aggregated group, and the instances a combo deploys.

A combo is deployed and removed whole (``simulator.combo_cluster.ComboCluster``). Prefill GPUs
are consolidated into one instance with TP = prefill count ("we prioritize consolidating them
into a single instance with higher TP", §3.1), which the testbed caps at 2 (two GPUs per
server, §4.1); the decode GPUs form ``decode / prefill`` instances of the same TP (the 1PxD
notation of Table 3). An aggregated combo ``<n x G>`` (§3.3.1, e.g. ``<2 x A800>``) is one
aggregated TP-n instance. Which combos a planner considers is the planner's business
(``baselines.cauchy.combos``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from hardware.gpus import get_gpu
from simulator.instance import InstanceConfig, Role

MAX_TP = 2  # §4.1: two GPUs per server
COMBO_FIELDS = ("gpu", "model", "tp", "role")  # the InstanceConfig fields a combo sets itself
_NAME = re.compile(r"^<(\d+)x([^,<>]+?)(?:,(\d+)x([^,<>]+))?>$")


def _positive_int(label: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{label} must be a positive integer, got {value!r}")
    return value


@dataclass(frozen=True)
class Combo:
    """``<prefill_gpus x prefill_gpu, decode_gpus x decode_gpu>``; ``decode_gpu=None`` is the
    aggregated combo ``<prefill_gpus x prefill_gpu>``."""

    prefill_gpu: str
    prefill_gpus: int
    decode_gpu: str | None = None
    decode_gpus: int = 0

    def __post_init__(self) -> None:
        get_gpu(self.prefill_gpu)
        tp = _positive_int("prefill_gpus", self.prefill_gpus)
        if tp > MAX_TP:
            raise ValueError(f"prefill_gpus={tp} exceeds the TP limit {MAX_TP} (two GPUs per server, Cauchy §4.1)")
        if self.decode_gpu is None:
            if self.decode_gpus != 0:
                raise ValueError(f"an aggregated combo has no decode GPUs, got decode_gpus={self.decode_gpus!r}")
            return
        get_gpu(self.decode_gpu)
        decode = _positive_int("decode_gpus", self.decode_gpus)
        if decode % tp:
            raise ValueError(f"decode_gpus={decode} is not a multiple of the prefill TP {tp}")

    @property
    def aggregated(self) -> bool:
        return self.decode_gpu is None

    @property
    def tp(self) -> int:
        """TP degree of every instance of the combo."""
        return self.prefill_gpus

    @property
    def num_decode_instances(self) -> int:
        return self.decode_gpus // self.prefill_gpus

    @property
    def name(self) -> str:
        """``<1xH800-SXM,2xH20-NVL>`` or ``<2xA800-PCIe>`` (the paper's notation, §3.1)."""
        if self.decode_gpu is None:
            return f"<{self.prefill_gpus}x{self.prefill_gpu}>"
        return f"<{self.prefill_gpus}x{self.prefill_gpu},{self.decode_gpus}x{self.decode_gpu}>"

    @property
    def decode_side_gpu(self) -> str:
        """The GPU type that decodes: the decode GPU, or the aggregated GPU."""
        return self.prefill_gpu if self.decode_gpu is None else self.decode_gpu

    def gpu_counts(self) -> dict[str, int]:
        """GPUs per type the combo holds."""
        counts = {self.prefill_gpu: self.prefill_gpus}
        if self.decode_gpu is not None:
            counts[self.decode_gpu] = counts.get(self.decode_gpu, 0) + self.decode_gpus
        return counts

    def price_per_hour_usd(self) -> float:
        """``P_n`` of eq. 16: Σ GPUs x $/hour."""
        return sum(count * get_gpu(gpu).price_per_hour_usd for gpu, count in self.gpu_counts().items())

    def instance_configs(self, model: str, **options: Any) -> list[InstanceConfig]:
        """The instances to deploy, entry first: the aggregated instance, or the prefill
        instance followed by the decode instances. ``options`` are further ``InstanceConfig``
        fields for every instance (e.g. its local ``scheduler``: the serving engine's batching)."""
        reserved = set(COMBO_FIELDS) & options.keys()
        if reserved:
            raise ValueError(f"instance options {sorted(reserved)} are set by the combo itself")
        if self.decode_gpu is None:
            return [InstanceConfig(gpu=self.prefill_gpu, model=model, tp=self.tp, **options)]
        prefill = InstanceConfig(gpu=self.prefill_gpu, model=model, tp=self.tp, role=Role.PREFILL, **options)
        decode = InstanceConfig(gpu=self.decode_gpu, model=model, tp=self.tp, role=Role.DECODE, **options)
        return [prefill] + [decode] * self.num_decode_instances


def combo_of_configs(configs: Sequence[InstanceConfig]) -> Combo:
    """The combo whose ``instance_configs`` are ``configs`` (entry first): one aggregated
    instance, or a prefill instance followed by identical decode instances, all sharing the
    entry's other fields (its instance options, e.g. the scheduler)."""
    if not configs:
        raise ValueError("no instance configs: not a GPU combo")
    entry = configs[0]
    if entry.pp != 1:
        raise ValueError(f"{entry.model} on {entry.gpu} with pp={entry.pp} is not a GPU combo instance")
    if entry.role == Role.AGGREGATED and len(configs) == 1:
        combo = Combo(entry.gpu, entry.tp)
    elif entry.role == Role.PREFILL and len(configs) > 1:
        combo = Combo(entry.gpu, entry.tp, configs[1].gpu, configs[1].tp * (len(configs) - 1))
    else:
        raise ValueError(f"instances {[(c.gpu, c.tp, c.role) for c in configs]} are not a GPU combo")
    options = {f.name: getattr(entry, f.name) for f in fields(InstanceConfig) if f.name not in COMBO_FIELDS}
    if list(configs) != combo.instance_configs(entry.model, **options):
        raise ValueError(f"instances {[(c.gpu, c.tp, c.role) for c in configs]} are not the instances of {combo.name}")
    return combo


def parse_combo(name: str) -> Combo:
    """The combo called ``name`` (``Combo.name`` notation)."""
    match = _NAME.match(name.replace(" ", "")) if isinstance(name, str) else None
    if match is None:
        raise ValueError(f"cannot parse GPU combo {name!r}; expected '<1xH800-SXM,2xH20-NVL>' or '<2xA800-PCIe>'")
    prefill_gpus, prefill_gpu, decode_gpus, decode_gpu = match.groups()
    if decode_gpu is None:
        return Combo(prefill_gpu, int(prefill_gpus))
    return Combo(prefill_gpu, int(prefill_gpus), decode_gpu, int(decode_gpus))

