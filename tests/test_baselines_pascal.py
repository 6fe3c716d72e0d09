"""PASCAL (PASCAL §IV-B): Algorithm 1, Algorithm 2, adaptive migration and the two
variants on hand-built observations; the features they read; short episodes."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import baselines
import envs  # noqa: F401  (registers the IDs)
from agents.rollout import evaluate
from routing_observations import routing_observation
from simulator.sequence import Residency

ROUTING = "servegym/Routing-v0"
CAPACITY = 80_000  # KV tokens per instance in these observations


@pytest.fixture(scope="module")
def env():
    return gym.make(ROUTING, scenario="pascal", episode_requests=40)


def observation(policy, rows, **kwargs):
    """Routing observation with ``kv_capacity`` defaulting to ``CAPACITY``."""
    return routing_observation(policy, rows, defaults={"kv_capacity": CAPACITY}, **kwargs)


def test_algorithm1_skips_instances_behind_pace_and_takes_the_smallest_gpu_plus_cpu_kv(env):
    policy = baselines.make("pascal", env)
    rows = [
        {"kv_footprint": 1_000, "pacer_behind": 1.0},  # smallest, but an answer is behind pace
        {"kv_footprint": 2_000, "answers_overdue": 1},  # an answer waits past </think>
        {"kv_footprint": 9_000, "kv_used_fraction": 0.01},  # 0.8k on the GPU, 8.2k swapped to host
        {"kv_footprint": 5_000},
    ]
    assert policy.act(observation(policy, rows)) == 3
    for row in rows[2:]:
        row["pacer_behind"] = 1.0
    assert policy.act(observation(policy, rows)) == 0  # E empty: all instances, min m_i


def test_algorithm2_takes_fewest_high_priority_reasoning_among_compliant(env):
    policy = baselines.make("pascal", env)
    roomy = {"kv_used_fraction": 0.1}
    rows = [
        {"reasoning": 5, "demoted": 4, "fresh_answering": 6, **roomy},  # r = 1 (4 demoted to low priority)
        {"reasoning": 2, "fresh_answering": 1, **roomy},  # r = 2
        {"reasoning": 0, "pacer_behind": 1.0, **roomy},  # r = 0 but violating
        {"reasoning": 3, **roomy},  # the source, r = 3
    ]
    assert policy.act(observation(policy, rows, source=3)) == 0
    for row in rows:
        row["pacer_behind"] = 1.0
    # nobody compliant: min r + a over all: 1 + 6, 2 + 1, 0 + 0, 3 + 0 -> slot 2
    assert policy.act(observation(policy, rows, source=3)) == 2
    rows[2]["fresh_answering"] = 4  # slot 2: 0 + 4; slot 1: 2 + 1 = 3; slot 3: 3 + 0 = 3 (source wins the tie)
    assert policy.act(observation(policy, rows, source=3)) == 3
    rows[3]["reasoning"] = 4
    assert policy.act(observation(policy, rows, source=3)) == 1


def test_adaptive_migration_stays_only_when_source_has_memory_and_target_has_not(env):
    pascal, stay, move = (baselines.make(n, env) for n in ("pascal", "pascal_no_migration", "pascal_non_adaptive"))
    request = dict(source=0, prompt_tokens=1_000, generated_tokens=3_000)  # 4k KV + 500 headroom = 4.5k needed
    full_target = [{"reasoning": 6, "kv_used_fraction": 0.5}, {"reasoning": 0, "kv_used_fraction": 0.95}]
    # source 40k free; target 4k free < 4.5k
    for policy, expected in ((pascal, 0), (stay, 0), (move, 1)):
        assert policy.act(observation(policy, full_target, **request)) == expected
    roomy_target = [{"reasoning": 6, "kv_used_fraction": 0.5}, {"reasoning": 0, "kv_used_fraction": 0.9}]  # 8k free
    assert pascal.act(observation(pascal, roomy_target, **request)) == 1
    full_source = [{"reasoning": 6, "kv_used_fraction": 0.96}, {"reasoning": 0, "kv_used_fraction": 0.95}]
    assert pascal.act(observation(pascal, full_source, **request)) == 1  # neither has memory: Algorithm 2


def test_has_memory_subtracts_what_queued_requests_claim(env):
    policy = baselines.make("pascal", env)
    request = dict(source=0, prompt_tokens=500, generated_tokens=1_000)  # needs 1.5k + 0.5k = 2k
    # 8k free on each; slot 1 has 3k of prompts waiting and 4k swapped to host: 1k unclaimed
    rows = [
        {"kv_used_fraction": 0.9, "kv_footprint": 72_000},
        {"kv_used_fraction": 0.9, "kv_footprint": 76_000, "pending_prefill_tokens": 3_000},
    ]
    obs = observation(policy, rows, **request)
    np.testing.assert_allclose(policy.unclaimed_kv_tokens(policy.decode(obs))[:2], [8_000, 1_000], atol=1.0)
    assert policy.has_memory(policy.decode(obs))[:2].tolist() == [True, False]
    assert policy.act(obs) == 0  # r ties at 0: Algorithm 2 keeps the source
    rows[0]["reasoning"] = 2
    assert policy.act(observation(policy, rows, **request)) == 0  # Alg. 2 says slot 1, which has no memory
    rows[1]["pending_prefill_tokens"] = 0
    assert policy.act(observation(policy, rows, **request)) == 1


def test_no_migration_moves_only_off_a_masked_source(env):
    policy = baselines.make("pascal_no_migration", env)
    rows = [{"reasoning": 9}, {"reasoning": 0, "kv_footprint": 10}, {"reasoning": 0}]
    assert policy.act(observation(policy, rows, source=0)) == 0
    assert policy.act(observation(policy, rows, source=0, mask=[0, 1, 1, 0, 0, 0, 0, 0])) == 2  # Alg. 2, ties: less KV


def test_bad_headroom_raises(env):
    with pytest.raises(ValueError, match="answer_headroom_tokens must be a non-negative integer, got -5"):
        baselines.make("pascal", env, answer_headroom_tokens=-5)


def test_pascal_features_match_the_cluster_state():
    """kv_footprint, demoted and answers_overdue against the instances' sequences, over an
    overloaded episode (swaps, demotions and queued answers happen: at 8 req/s under the scenario's
    vllm-0.6; at 6 req/s, which overloaded the former vidur-2024 engine, nothing is swapped)."""
    env = gym.make(ROUTING, scenario="pascal", episode_requests=150, rate_rps=8.0)
    policy = baselines.make("pascal_non_adaptive", env)
    obs, _ = env.reset(seed=0)
    seen = {"host": 0, "demoted": 0, "overdue": 0}
    done = False
    while not done:
        cluster = env.unwrapped.cluster
        now = cluster.events.now_s
        for slot, instance in enumerate(cluster.instances.values()):
            block = instance.kv.block_size
            host = sum(-(-s.kv_tokens // block) * block for s in instance.swapped)
            footprint = instance.kv_used_blocks_now() * block + host
            reasoning = [s for s in instance.sequences() if s.generated_tokens < s.reasoning_tokens]
            demoted = sum(s.demoted for s in reasoning)
            overdue = sum(
                s.reasoning_tokens > 0 and s.generated_tokens == s.reasoning_tokens
                and s.residency != Residency.RUNNING and now - s.reasoning_end_s > 0.1
                for s in instance.sequences()
            )
            view = policy.decode(obs)
            assert view.instances["kv_footprint"][slot] == pytest.approx(footprint, abs=0.5)
            assert view.instances["demoted"][slot] == demoted
            assert view.instances["answers_overdue"][slot] == overdue
            seen["host"] += host > 0
            seen["demoted"] += demoted > 0
            seen["overdue"] += overdue > 0
        obs, _, terminated, truncated, _ = env.step(policy.act(obs))
        done = terminated or truncated
    assert all(count > 0 for count in seen.values()), seen


@pytest.mark.parametrize("name", ["pascal", "pascal_no_migration", "pascal_non_adaptive"])
def test_pascal_policies_run_whole_episodes_without_invalid_actions(name):
    (metrics,) = evaluate(name, ROUTING, [0], scenario="pascal", episode_requests=60, rate_rps=4.0)
    assert metrics["invalid_actions"] == 0
    assert metrics["steps"] >= 60 + 0.9 * metrics["completed"]  # an arrival and a </think> decision each
    if name == "pascal_no_migration":
        assert metrics["migrations"] == 0
    else:
        assert metrics["migrations"] > 0
