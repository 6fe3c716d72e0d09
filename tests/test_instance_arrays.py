"""The simulator's per-instance arrays (``simulator.instance_arrays``) equal what the instances'
queues and KV manager say, step after step, through preemption, swapping, migration, draining
and scaling; the vectorised Llumnix dispatch equals the instance-by-instance one."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401
from envs.observation import InstanceFeatures, InstanceLoad
from simulator.cluster import Cluster
from simulator.instance import InstanceConfig
from simulator.request import Request
from simulator.routers.freeness import _freest_instance_by_instance, freest_instance, serving_freeness_full
from simulator.instance_arrays import (
    BLOCK_SIZE,
    KV_TOTAL_BLOCKS,
    KV_USED_BLOCKS,
    LIFECYCLE,
    LIFECYCLE_CODES,
    PENDING_PREFILL_TOKENS,
    ROLE,
    ROLE_CODES,
    RUNNING,
    SWAPPED,
    SWAPPED_KV_BLOCKS,
    WAITING,
    WAITING_PREFILL_BLOCKS,
    WATERMARK_BLOCKS,
    InstanceArrays,
)
from envs.random_policy import random_masked_action

ENGINE = "vidur-2024"  # the hand-computed expectations here use its latency model and batching

CASES = [
    ("servegym/Routing-v0", "pascal", {"rate_rps": 8.0}),  # swap preemption, reasoning, phase changes
    ("servegym/Routing-v0", "multitier", {}),  # four tiers, priority scheduler
    ("servegym/Migration-v0", "default", {"router": "llumnix"}),  # live migration
    ("servegym/Migration-v0", "pascal", {"mode": "phase"}),
    ("servegym/Scaling-v0", "default", {"gpu_inventory": {"A100-80GB": 6, "L40S": 6}, "max_instances": 12,
                                        "scaling_window_s": 2.0}),  # deploy, drain, stop
    ("servegym/Tier-v0", "multitier", {}),
    ("servegym/Cascade-v0", "cascadeserve", {}),
]


def expected_row(instance) -> dict[int, int]:
    block = instance.kv.block_size
    row = {
        WAITING: len(instance.waiting), RUNNING: len(instance.running), SWAPPED: len(instance.swapped),
        KV_USED_BLOCKS: instance.kv.used_blocks,
        PENDING_PREFILL_TOKENS: sum(s.prefill_target_tokens - s.kv_tokens for s in instance.waiting),
        WAITING_PREFILL_BLOCKS: sum(-(-s.prefill_target_tokens // block) for s in instance.waiting),
        SWAPPED_KV_BLOCKS: sum(-(-s.kv_tokens // block) for s in instance.swapped),
        KV_TOTAL_BLOCKS: instance.kv.total_blocks, WATERMARK_BLOCKS: instance.kv.watermark_blocks, BLOCK_SIZE: block,
        LIFECYCLE: LIFECYCLE_CODES[instance.lifecycle.value], ROLE: ROLE_CODES[instance.role.value],
    }
    return row


def expected_tiers(instance) -> dict[int, int]:
    tiers: dict[int, int] = {}
    for seq in instance.sequences():
        tiers[seq.tier] = tiers.get(seq.tier, 0) + 1
    return tiers


# The Python engine keeps its arrays in simulator/admission.py (preemption, swap-in) and
# segments; the compiled engine's views read the core's. Both are checked on pascal (requests
# swapped to host and back) and multitier (four tiers, the priority scheduler).
BACKEND_CASES = [(*case, "compiled") for case in CASES] + [
    (*case, "python") for case in CASES if case[1] in ("pascal", "multitier") and case[0] == "servegym/Routing-v0"]


@pytest.mark.parametrize(("env_id", "scenario", "options", "backend"), BACKEND_CASES)
def test_arrays_equal_the_instances_state_at_every_step(env_id, scenario, options, backend):
    env = gym.make(env_id, scenario=scenario, backend=backend, **options)
    unwrapped = env.unwrapped
    rng = np.random.default_rng(3)
    env.reset(seed=3)
    seen = {"waiting": 0, "swapped": 0, "kv": 0}
    for _ in range(300):
        cluster = unwrapped.cluster
        table, tiers = cluster.arrays.table, cluster.arrays.tier_table
        assert cluster.arrays.rows == len(cluster.instances)
        for instance_id, instance in cluster.instances.items():
            row = expected_row(instance)
            assert {column: int(table[instance_id, column]) for column in row} == row, (instance_id, cluster.events.now_s)
            actual_tiers = {k: int(v) for k, v in enumerate(tiers[instance_id]) if v}
            assert actual_tiers == expected_tiers(instance), (instance_id, cluster.events.now_s)
            seen["waiting"] += row[WAITING] > 0
            seen["swapped"] += row[SWAPPED] > 0
            seen["kv"] += row[KV_USED_BLOCKS] > 0
        _, _, terminated, truncated, _ = env.step(random_masked_action(env.action_space, unwrapped.action_masks(), rng))
        if terminated or truncated:
            env.reset()
    assert seen["kv"] > 0
    if scenario == "pascal" and env_id == "servegym/Routing-v0":
        assert seen["waiting"] > 0 and seen["swapped"] > 0


def test_vectorised_dispatch_equals_the_instance_by_instance_rule():
    env = gym.make("servegym/Tier-v0", scenario="multitier")
    unwrapped = env.unwrapped
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    compared = 0
    for _ in range(40):
        cluster = unwrapped.cluster
        for seq in cluster.arrived_sequences[-5:]:
            for fractions in (unwrapped.headroom_fractions, np.zeros(4), np.full(4, 0.4)):
                assert freest_instance(cluster, seq, fractions) == _freest_instance_by_instance(cluster, seq, fractions)
                ids = np.flatnonzero(cluster.accepting(seq))
                vectorised = InstanceLoad(cluster, ids, len(fractions)).freeness_full(fractions)
                assert serving_freeness_full(cluster, ids.tolist(), fractions) == vectorised.tolist()  # bit for bit
                compared += 1
        env.step(random_masked_action(env.action_space, unwrapped.action_masks(), rng))
    assert compared > 100


def test_clusters_keep_arrays_only_when_asked_and_bad_capacity_raises():
    config = InstanceConfig(engine=ENGINE, gpu="A100-80GB", model="Llama-3.1-8B")
    plain = Cluster({"A100-80GB": 1})
    plain.deploy(config, ready_now=True)
    assert plain.arrays is None and plain.instances[0].unsynced_kv_blocks() == 0
    tracked = Cluster({"A100-80GB": 2}, track_arrays=True)
    tracked.deploy(config, ready_now=True)
    tracked.deploy(config)
    assert tracked.arrays.table[:2, LIFECYCLE].tolist() == [LIFECYCLE_CODES["serving"], LIFECYCLE_CODES["starting"]]
    tracked.drain(1)
    assert tracked.arrays.table[1, LIFECYCLE] == LIFECYCLE_CODES["stopped"]
    with pytest.raises(ValueError, match="capacity must be a positive integer, got 0"):
        InstanceArrays(0)
    with pytest.raises(ValueError, match="expected 0, got 3"):
        InstanceArrays().add_row(3, 100, 1, 16, "aggregated")


def test_observation_follows_lifecycle_changes_and_slot_order():
    """The rows kept between fills (presence, lifecycle, role, hardware) change when an
    instance is deployed, starts, drains or stops, and when the slots change."""
    config = InstanceConfig(engine=ENGINE, gpu="A100-80GB", model="Llama-3.1-8B")
    cluster = Cluster({"A100-80GB": 3}, router=None, track_arrays=True)
    for _ in range(2):
        cluster.deploy(config, ready_now=True)
    features = InstanceFeatures(max_instances=4, num_tiers=1, tpot_target_s=None, reasoning=False)
    column = features.column
    flags = ["present", "starting", "serving", "draining"]

    def lifecycle_rows(slots=None):
        matrix = features.fill(cluster, slots)
        return [[float(matrix[row, column[name]]) for name in flags] for row in range(4)]

    empty = [0.0] * 4
    assert lifecycle_rows() == [[1, 0, 1, 0], [1, 0, 1, 0], empty, empty]
    cluster.deploy(config)
    assert lifecycle_rows() == [[1, 0, 1, 0], [1, 0, 1, 0], [1, 1, 0, 0], empty]
    assert lifecycle_rows([2, None, 0]) == [[1, 1, 0, 0], empty, [1, 0, 1, 0], empty]
    assert features.slots.tolist() == [0, 2]
    cluster.submit([Request(0, 0.0, 100, 50)])
    cluster.dispatch(cluster.advance().seq, 1)
    cluster.drain(1)
    rows = lifecycle_rows()
    assert rows[1] == [1, 0, 0, 1] and features.fill(cluster)[1, column["freeness_normal"]] == -1.0  # draining: −∞
    cluster.drain(0)
    assert lifecycle_rows() == [empty, [1, 0, 0, 1], [1, 1, 0, 0], empty]
    assert features.slots.tolist() == [1, 2]


def test_freeness_full_names_a_tier_beyond_the_headroom_fractions():
    cluster = Cluster({"A100-80GB": 1}, router=None, track_arrays=True)
    cluster.deploy(InstanceConfig(engine=ENGINE, gpu="A100-80GB", model="Llama-3.1-8B"), ready_now=True)
    cluster.submit([Request(0, 0.0, 100, 50, tier=2)])  # tier 2 of tiers 0..2
    cluster.dispatch(cluster.advance().seq, 0)
    load = InstanceLoad(cluster, np.array([0]), 2)  # two headroom fractions: tiers 0 and 1
    with pytest.raises(ValueError, match=r"^requests of a tier beyond the 2 headroom fractions$"):
        load.freeness_full(np.array([0.1, 0.2]))


def test_the_kv_used_column_follows_prefix_cache_pins_and_unpins():
    from simulator.kv_blocks import KVBlockManager

    kv = KVBlockManager(total_blocks=20, block_size=16, watermark_fraction=0.0)
    arrays = InstanceArrays(2)
    kv.track(arrays, 1)
    kv.allocate(10)
    kv.unpin(4)  # 4 held blocks stay cached, held by no request: 10 - 4 in use
    assert (kv.used_blocks, kv.cached_blocks, arrays.table[1, KV_USED_BLOCKS]) == (6, 4, 6)
    kv.pin(3)  # a prefix-cache hit holds 3 of them again: 6 + 3
    assert (kv.used_blocks, kv.cached_blocks, arrays.table[1, KV_USED_BLOCKS]) == (9, 1, 9)
    assert arrays.table[0, KV_USED_BLOCKS] == 0  # another row's column is untouched
