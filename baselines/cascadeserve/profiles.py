"""Planning inputs of CascadeServe (CascadeServe §3 "User-provided information", App. C.1):
model profiles (runtime per batch size, memory), the devices, and model replicas on them.

Our simulator gives every instance its GPUs exclusively (no co-location), so the profile built
from a servegym scenario (``scenario_profiles``) charges a replica its GPUs' whole memory; the
planner's memory model is general (any memory per replica) and the tests use co-located toys.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hardware.gpus import get_gpu
from hardware.latency import latency_model


@dataclass(frozen=True)
class ModelProfile:
    """One registered model: ``runtime_by_batch_s[b - 1]`` is one inference of a batch of b samples
    (seconds, App. C.1's profile); a replica spans ``gpus_per_replica`` devices of one node and
    takes ``memory_gb_per_device`` on each."""

    name: str
    runtime_by_batch_s: tuple[float, ...]
    memory_gb_per_device: float
    gpus_per_replica: int = 1

    def __post_init__(self) -> None:
        if not self.runtime_by_batch_s or any(not (math.isfinite(t) and t > 0) for t in self.runtime_by_batch_s):
            raise ValueError(f"{self.name}: runtime_by_batch_s must be positive finite seconds, got {self.runtime_by_batch_s}")
        if not (math.isfinite(self.memory_gb_per_device) and self.memory_gb_per_device >= 0):
            raise ValueError(f"{self.name}: memory_gb_per_device must be >= 0, got {self.memory_gb_per_device!r}")
        if isinstance(self.gpus_per_replica, bool) or not isinstance(self.gpus_per_replica, int) or self.gpus_per_replica < 1:
            raise ValueError(f"{self.name}: gpus_per_replica must be a positive integer, got {self.gpus_per_replica!r}")

    @property
    def max_batch(self) -> int:
        return len(self.runtime_by_batch_s)

    @property
    def runtime_per_sample_s(self) -> float:
        """``runtime(r)`` of eq. 3: seconds per sample at the default batch size 1 (§4.4)."""
        return self.runtime_by_batch_s[0]

    def runtime_s(self, batch: int) -> float:
        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= self.max_batch:
            raise ValueError(f"{self.name}: batch must be an integer in [1, {self.max_batch}], got {batch!r}")
        return self.runtime_by_batch_s[batch - 1]


@dataclass(frozen=True)
class Device:
    """One GPU: its index, the node it sits in, and its memory (GB)."""

    index: int
    node: int
    memory_gb: float


@dataclass(frozen=True, order=True)
class Replica:
    """A model replica on ``devices`` (indices, one node)."""

    model: str
    devices: tuple[int, ...]


def full_replication(models: Sequence[ModelProfile], devices: Sequence[Device]) -> tuple[Replica, ...]:
    """§4.1's initial placement: every model on every device (a k-GPU model on every aligned group
    of k devices of a node)."""
    by_node: dict[int, list[int]] = {}
    for device in sorted(devices, key=lambda d: d.index):
        by_node.setdefault(device.node, []).append(device.index)
    replicas = []
    for model in models:
        k = model.gpus_per_replica
        for node in sorted(by_node):
            indices = by_node[node]
            replicas.extend(Replica(model.name, tuple(indices[i:i + k])) for i in range(0, len(indices) - k + 1, k))
    return tuple(replicas)


def scenario_profiles(
    models: Sequence[str],
    gpu: str,
    num_gpus: int,
    gpus_per_node: int,
    prompt_tokens: int,
    tp_by_model: dict[str, int],
    dtype: str = "int4",
    max_batch: int = 16,
) -> tuple[tuple[ModelProfile, ...], tuple[Device, ...]]:
    """Profiles from servegym's latency model: a batch of b one-token requests of ``prompt_tokens``
    each is one prefill iteration of b·prompt tokens (§6.1: HellaSwag classified from the next
    token). A replica holds its GPUs exclusively, as servegym instances do."""
    for label, value in (("num_gpus", num_gpus), ("gpus_per_node", gpus_per_node), ("prompt_tokens", prompt_tokens), ("max_batch", max_batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{label} must be a positive integer, got {value!r}")
    spec = get_gpu(gpu)
    profiles = []
    for name in models:
        tp = tp_by_model.get(name, 1)
        lat = latency_model(gpu, name, tp=tp, dtype=dtype)
        runtimes = tuple(
            lat.iteration_time_s(b * prompt_tokens, b * prompt_tokens * (prompt_tokens + 1) / 2, 0, 0)
            for b in range(1, max_batch + 1)
        )
        profiles.append(ModelProfile(name, runtimes, spec.memory_gb, tp))
    devices = tuple(Device(i, i // gpus_per_node, spec.memory_gb) for i in range(num_gpus))
    return tuple(profiles), devices
