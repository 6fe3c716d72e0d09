"""Tests that close gaps a planted-bug audit found (issue 42): each expectation is derived here,
independently of the code under test (by hand, from the paper's formula, or by brute force)."""

from __future__ import annotations

import dataclasses
import math

import gymnasium as gym
import numpy as np
import pytest

import envs
from envs.scenario import InstanceGroup
from simulator.instance import Role
from simulator.kv_blocks import KVBlockManager, blocks_for_tokens
from simulator.metrics.stats import LatencyStats, percentile_linear
from simulator.routers.freeness import serving_freeness_full
from simulator.sequence import Residency


def _split_pascal(prefill: int, decode: int) -> envs.scenario.Scenario:
    """The pascal scenario (reasoning requests: a route decision, then a phase decision at
    ``</think>``) on prefill-only instances followed by decode-only ones."""
    scenario = envs.make_scenario("pascal")
    config = scenario.instances[0].config
    groups = (InstanceGroup(dataclasses.replace(config, role=Role.PREFILL), prefill),
              InstanceGroup(dataclasses.replace(config, role=Role.DECODE), decode))
    return dataclasses.replace(scenario, instances=groups, max_instances=0, episode_requests=30)


def test_routing_mask_sends_new_requests_to_prefill_and_phase_changes_to_decode_instances():
    env = gym.make("servegym/Routing-v0", scenario=_split_pascal(prefill=2, decode=3))
    env.reset(seed=0)
    masks: dict[str, list[list[bool]]] = {"route": [], "phase": []}
    for _ in range(200):
        decision = env.unwrapped._decision
        mask = env.unwrapped.action_masks()
        masks[decision.kind].append(mask.tolist())
        _, _, terminated, truncated, _ = env.step(int(np.flatnonzero(mask)[0]))
        if terminated or truncated:
            break
    env.close()
    # Slots 0-1 are prefill-only, 2-4 decode-only (deployment order): a new request may start only
    # where prefill runs, the answer phase of a reasoning request only where decode runs.
    assert masks["route"] and masks["phase"]
    assert all(mask == [True, True, False, False, False] for mask in masks["route"])
    assert all(mask == [False, False, True, True, True] for mask in masks["phase"])


@pytest.mark.parametrize("watermark_fraction, total, free_after_at_boundary", [(0.01, 100, 1), (0.1, 250, 25), (0.0, 7, 0)])
def test_kv_watermark_admits_exactly_down_to_the_watermark(watermark_fraction, total, free_after_at_boundary):
    kv = KVBlockManager(total_blocks=total, block_size=16, watermark_fraction=watermark_fraction)
    assert kv.watermark_blocks == free_after_at_boundary  # int(fraction * total), by hand
    boundary = total - free_after_at_boundary  # leaves exactly the watermark free
    assert kv.can_admit(boundary) and not kv.can_admit(boundary + 1)
    kv.allocate(3)
    assert kv.can_admit(boundary - 3) and not kv.can_admit(boundary - 2)
    kv.allocate(total - 3)  # growth may use the watermark: a full cache is allowed
    assert kv.free_blocks == 0 and kv.can_admit(0) == (free_after_at_boundary == 0)
    kv.release(total)
    assert kv.used_blocks == 0


def test_kv_blocks_for_tokens_is_the_ceiling_at_and_around_block_boundaries():
    assert [blocks_for_tokens(t, 16) for t in (0, 1, 15, 16, 17, 32, 33)] == [0, 1, 1, 1, 2, 2, 3]


def test_kv_over_allocation_and_over_release_raise_at_the_exact_boundary():
    kv = KVBlockManager(total_blocks=10, block_size=16, watermark_fraction=0.0)
    kv.allocate(10)
    with pytest.raises(RuntimeError, match="1 blocks asked, 0 free"):
        kv.allocate(1)
    kv.release(4)
    with pytest.raises(RuntimeError, match="7 blocks released, 6 in use"):
        kv.release(7)


def test_latency_percentiles_of_a_skewed_sample_by_hand():
    # Mean 22 is far from the median 2: a percentile that used the mean, or the wrong rank, fails.
    # Linear interpolation at index (n - 1) q / 100 = 4q / 100 over the sorted [1, 2, 2, 5, 100].
    values = np.array([100.0, 2.0, 1.0, 5.0, 2.0, np.nan])
    stats = LatencyStats.of(values)
    assert stats.mean_s == 22.0
    assert stats.p50_s == 2.0  # index 2
    assert stats.p90_s == pytest.approx(5 + 0.6 * 95)  # index 3.6
    assert stats.p95_s == pytest.approx(5 + 0.8 * 95)  # index 3.8
    assert stats.p99_s == pytest.approx(5 + 0.96 * 95)  # index 3.96
    for q, expected in ((0, 1.0), (25, 2.0), (50, 2.0), (62.5, 3.5), (90, 62.0), (100, 100.0)):
        assert percentile_linear([100.0, 2.0, 1.0, 5.0, 2.0], q) == pytest.approx(expected)


def _freeness_by_hand(instance, fractions: list[float]) -> float:
    """multitier-llumnix eq. 1-4 from the instance's own state: (M - physical usage - head-of-line
    demand - Σ_p M h_p [tier p present]) / (running + [anything queued])."""
    queued = instance.waiting + instance.swapped
    batch = len(instance.running) + (1 if queued else 0)
    if batch == 0:
        return math.inf
    total = instance.kv.total_blocks
    usage = instance.kv.used_blocks + instance.unsynced_kv_blocks()
    if queued:
        head = min(queued, key=instance.scheduler.priority_key)
        tokens = head.kv_tokens + 1 if head.residency == Residency.SWAPPED else head.prefill_target_tokens
        usage += -(-tokens // instance.kv.block_size)
    present = {seq.tier for seq in instance.running + queued}
    headroom = total * sum(fractions[tier] for tier in sorted(present))
    return (total - (usage + headroom)) / batch


def test_tier_v0_dispatch_freeness_matches_the_papers_formula_during_an_episode():
    # the expectation is computed by hand from each request's blocks and queue order, which only the
    # Python engine exposes; the compiled one replays its trajectories bit for bit (golden tests)
    env = gym.make("servegym/Tier-v0", scenario="multitier", episode_requests=120, backend="python")
    env.reset(seed=3)
    compared = busy = 0
    for step in range(12):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample() * 0 + step % 3)
        tier_env = env.unwrapped
        fractions = np.asarray(tier_env.headroom_fractions, dtype=float)
        cluster = tier_env.cluster
        ids = np.flatnonzero(cluster.accepting()).tolist()
        got = serving_freeness_full(cluster, ids, fractions)
        for instance_id, value in zip(ids, got):
            expected = _freeness_by_hand(cluster.instances[instance_id], fractions.tolist())
            assert value == pytest.approx(expected, rel=1e-12), (step, instance_id)
            compared += 1
            busy += math.isfinite(expected)
        if terminated or truncated:
            break
    env.close()
    assert compared >= 24 and busy >= 12  # the check saw loaded instances, not only empty ones
