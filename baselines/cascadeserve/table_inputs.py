"""CascadeServe on Cascadia's testbed: Alg. 1's inputs (CascadeServe §3 "User-provided
information") from Cascadia's replica lookup tables (``baselines.cascadia.parallelism``), and the
gear plan's placement as instance groups.

CascadeServe replicates models but has no parallelism search of its own; "we tune the
parallelism ... for CascadeServe" (Cascadia §4.1): each model gets the TP-only replica shape
with the highest sustainable rate per GPU in the tables (``replica_shapes``). A replica's
per-request runtime is 1 / that rate; servegym engines batch continuously, so the profile of a
batch of b is b times it. Devices are servers of ``gpus_per_server`` GPUs. The QPS spectrum is
(0, the highest QPS measured in the 100 ms intervals of the given arrivals], its ranges weighted
by those measurements (App. C.2's re-planning with the measured QPS distribution).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from baselines.cascadeserve.accuracy_slo import measured_weights
from baselines.cascadeserve.cluster_gears import interval_qps
from baselines.cascadeserve.planner import GearPlan, PlanningProblem
from baselines.cascadeserve.profiles import Device, ModelProfile
from baselines.cascadia.parallelism import ModelLatencyTable, ReplicaTable
from envs.scenario import InstanceGroup
from hardware.gpus import get_gpu
from simulator.instance import InstanceConfig


def replica_shapes(tables: Sequence[ModelLatencyTable]) -> list[ReplicaTable]:
    """Per model, the TP-only replica shape with the highest sustainable rate per GPU (fewer GPUs
    on ties)."""
    return [max((t for t in table.replicas if t.shape.pp == 1 and t.capacity_rps > 0),
                key=lambda t: (t.capacity_rps / t.shape.num_gpus, -t.shape.tp)) for table in tables]


def accuracy_slo_problem(
    tables: Sequence[ModelLatencyTable],
    scores: np.ndarray,
    arrivals_s: Sequence[float],
    accuracy_slo: float,
    *,
    gpu: str,
    total_gpus: int,
    gpus_per_server: int,
    threshold_levels: int,
    n_ranges: int,
    max_batch: int,
    num_cascade_samples: int,
    sim_duration_s: float,
) -> PlanningProblem:
    """Alg. 1's inputs for the tables' cascade (smallest first) on ``total_gpus`` GPUs with an
    accuracy SLO (§3): validation ``scores`` (samples x models), QPS spectrum and range weights
    from ``arrivals_s`` (module docstring)."""
    if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
        raise ValueError(f"max_batch must be a positive integer, got {max_batch!r}")
    if isinstance(gpus_per_server, bool) or not isinstance(gpus_per_server, int) or gpus_per_server < 1:
        raise ValueError(f"gpus_per_server must be a positive integer, got {gpus_per_server!r}")
    memory_gb = get_gpu(gpu).memory_gb
    profiles = tuple(
        ModelProfile(table.model, tuple(b / shape.capacity_rps for b in range(1, max_batch + 1)), memory_gb, shape.shape.tp)
        for table, shape in zip(tables, replica_shapes(tables))
    )
    devices = tuple(Device(i, i // gpus_per_server, memory_gb) for i in range(total_gpus))
    qps = interval_qps(arrivals_s)
    qps_max = float(qps.max())
    weights = measured_weights(qps, qps_max, n_ranges)
    return PlanningProblem(tuple(t.model for t in tables), profiles, devices, scores, threshold_levels, qps_max, n_ranges,
                           None, num_cascade_samples=num_cascade_samples, sim_duration_s=sim_duration_s,
                           accuracy_slo=accuracy_slo, qps_weights=tuple(float(w) for w in weights))


def instance_groups(plan: GearPlan, tables: Sequence[ModelLatencyTable], gpu: str) -> tuple[InstanceGroup, ...]:
    """The gear plan's placement as instance groups (one per model, its replica shape)."""
    counts = plan.replica_counts()
    return tuple(InstanceGroup(InstanceConfig(engine=t.settings.engine, gpu=gpu, model=t.model, tp=s.shape.tp, dtype=t.dtype), counts[t.model])
                 for t, s in zip(tables, replica_shapes(tables)))
