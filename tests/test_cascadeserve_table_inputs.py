"""CascadeServe's Alg. 1 inputs from Cascadia's lookup tables (Cascadia §4.1, CascadeServe
§3, App. C.2): replica shapes, profiles linear in the batch, servers of 8 GPUs, measured QPS
weights, and the plan's placement as instance groups."""

from __future__ import annotations

import numpy as np
import pytest

from baselines.cascadeserve.planner import GearPlan
from baselines.cascadeserve.profiles import Replica
from baselines.cascadeserve.table_inputs import accuracy_slo_problem, instance_groups, replica_shapes
from baselines.cascadia.parallelism import load_cached_tables
from envs.scenarios.cascadia import CASCADIA_MODELS
from experiments.cascadia_reproduction import GPU, TRACES, deepseek_tables


@pytest.fixture(scope="module")
def tables():
    return deepseek_tables(TRACES[0], load_cached_tables())


def test_replica_shapes_take_the_best_rate_per_gpu_without_pipelining(tables):
    for table, chosen in zip(tables, replica_shapes(tables)):
        assert chosen.shape.pp == 1 and chosen.capacity_rps > 0
        tp_only = [t for t in table.replicas if t.shape.pp == 1 and t.capacity_rps > 0]
        assert chosen.capacity_rps / chosen.shape.num_gpus == max(t.capacity_rps / t.shape.num_gpus for t in tp_only)


def problem(tables, arrivals_s, max_batch=4):
    scores = np.array([[50.0, 70.0, 90.0], [60.0, 80.0, 95.0]])
    return accuracy_slo_problem(tables, scores, arrivals_s, 80.0, gpu=GPU, total_gpus=32, gpus_per_server=8,
                                threshold_levels=11, n_ranges=2, max_batch=max_batch, num_cascade_samples=10,
                                sim_duration_s=1.0)


def test_problem_by_hand(tables):
    # 100 ms intervals (0, 0.1], (0.1, 0.2], (0.2, 0.3], (0.3, 0.4]: 2, 1, 0, 1 arrivals -> 20, 10, 0, 10 QPS
    p = problem(tables, [0.05, 0.06, 0.15, 0.31])
    assert p.models == CASCADIA_MODELS and p.accuracy_slo == 80.0 and p.latency_slo_s is None
    assert p.qps_max == pytest.approx(20.0)
    assert p.qps_weights == (0.25, 0.75)  # ranges (0, 10], (10, 20]: 0 and 10 QPS in the first, 20 and 10 in the second
    assert len(p.devices) == 32 and [d.node for d in p.devices[7:9]] == [0, 1]
    for profile, shape in zip(p.profiles, replica_shapes(tables)):
        assert profile.gpus_per_replica == shape.shape.tp
        assert profile.runtime_by_batch_s == pytest.approx([b / shape.capacity_rps for b in (1, 2, 3, 4)])
    with pytest.raises(ValueError, match="max_batch"):
        problem(tables, [0.05], max_batch=0)


def test_instance_groups_count_the_placement(tables):
    shapes = replica_shapes(tables)
    small, _, large = CASCADIA_MODELS
    placement = (Replica(small, (0,)), Replica(small, (1,)), Replica(large, tuple(range(8, 8 + shapes[2].shape.tp))))
    plan = GearPlan(CASCADIA_MODELS, 11, (), placement, 0.0, 0)
    groups = instance_groups(plan, tables, GPU)
    assert [(g.config.model, g.config.tp, g.count) for g in groups] == [
        (m, s.shape.tp, n) for m, s, n in zip(CASCADIA_MODELS, shapes, (2, 0, 1))]
    assert groups[2].config.dtype == "int4" and groups[0].config.gpu == GPU
