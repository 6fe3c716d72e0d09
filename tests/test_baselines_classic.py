"""Classic routers (round-robin, random, least outstanding, least KV) and INFaaS cost routing:
each rule on hand-built observations, the observation features they read, short episodes."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import baselines
import envs  # noqa: F401  (registers the IDs)
from agents.rollout import evaluate
from routing_observations import routing_observation
from baselines.infaas import Infaas, InfaasThresholds, ReplicaState
from envs.observation import SERVICE_TIME_EWMA_WEIGHT

ROUTING = "servegym/Routing-v0"


@pytest.fixture(scope="module")
def env():
    return gym.make(ROUTING, episode_requests=60)


def observation(policy, rows, **kwargs):
    """Routing observation from raw feature values per slot."""
    return routing_observation(policy, rows, **kwargs)


def test_round_robin_cycles_over_valid_slots_and_restarts_on_reset(env):
    policy = baselines.make("round_robin", env)
    mask = [1, 0, 1, 1, 0, 0, 0, 1]
    obs = observation(policy, [{}] * 8, mask=mask)
    assert [policy.act(obs) for _ in range(6)] == [0, 2, 3, 7, 0, 2]
    policy.reset()
    assert policy.act(obs) == 0


def test_random_is_uniform_over_valid_slots_and_deterministic_per_seed(env):
    mask = [1, 1, 0, 1, 0, 0, 0, 0]
    obs = observation(baselines.make("random", env), [{}] * 8, mask=mask)
    a = baselines.make("random", env, seed=3)
    first = [a.act(obs) for _ in range(300)]
    a.reset()
    assert [a.act(obs) for _ in range(300)] == first
    assert set(first) == {0, 1, 3}
    assert all(abs(first.count(s) - 100) < 35 for s in (0, 1, 3))  # 300 draws, 1/3 each (sd ~8)
    assert [baselines.make("random", env, seed=4).act(obs) for _ in range(20)] != first[:20]
    with pytest.raises(ValueError, match="seed must be a non-negative integer, got -1"):
        baselines.make("random", env, seed=-1)


def test_least_outstanding_counts_waiting_running_and_swapped(env):
    policy = baselines.make("least_outstanding", env)
    rows = [
        {"waiting": 1, "running": 3},  # 4
        {"running": 2, "swapped": 1},  # 3
        {"waiting": 0, "running": 1},  # 1, masked out
        {"waiting": 2, "running": 1},  # 3
    ]
    assert policy.act(observation(policy, rows, mask=[1, 1, 0, 1, 0, 0, 0, 0])) == 1  # tie 1 / 3 -> lower slot
    assert policy.act(observation(policy, rows)) == 2


def test_least_kv_counts_host_memory_and_breaks_ties_by_waiting(env):
    policy = baselines.make("least_kv", env)
    rows = [
        {"kv_footprint": 30_000},
        {"kv_footprint": 12_000, "kv_used_fraction": 0.01},  # little on the GPU, 11k swapped to host
        {"kv_footprint": 20_000},
        {"kv_footprint": 20_000, "waiting": 0},
    ]
    assert policy.act(observation(policy, rows)) == 1
    rows[1]["kv_footprint"] = 25_000
    rows[2]["waiting"] = 2
    assert policy.act(observation(policy, rows)) == 3  # 20k tie: slot 3 has no waiting request


@pytest.mark.parametrize("name", ["round_robin", "random", "least_outstanding", "least_kv", "infaas"])
def test_classic_policies_keep_a_request_at_its_phase_change_unless_its_instance_is_masked(env, name):
    policy = baselines.make(name, env)
    rows = [{"kv_footprint": 9_000, "waiting": 5}, {}, {}, {}]
    assert policy.act(observation(policy, rows, source=0)) == 0
    moved = policy.act(observation(policy, rows, source=0, mask=[0, 1, 1, 1, 0, 0, 0, 0]))
    assert moved in (1, 2, 3)


def test_no_valid_slot_raises(env):
    policy = baselines.make("least_kv", env)
    with pytest.raises(ValueError, match="no valid instance"):
        policy.act(observation(policy, [{}] * 8, mask=[0] * 8))


def test_infaas_states_switch_exactly_at_the_thresholds():
    t = InfaasThresholds()  # target 1 s: OVERLOADED above 1.3 s with queue > 2, INTERFERED above 1.15 s with queue <= 1
    assert t.condition(1.3, 3) == ReplicaState.ACTIVE
    assert t.condition(np.nextafter(1.3, 2.0), 3) == ReplicaState.OVERLOADED
    assert t.condition(5.0, 2) == ReplicaState.ACTIVE  # slow, queue of 2: neither overloaded nor interfered
    assert t.condition(1.15, 1) == ReplicaState.ACTIVE
    assert t.condition(np.nextafter(1.15, 2.0), 1) == ReplicaState.INTERFERED
    assert t.condition(1.2, 0) == ReplicaState.INTERFERED
    assert InfaasThresholds(target_latency_s=20.0).condition(25.0, 3) == ReplicaState.ACTIVE  # 25 < 1.3 x 20


def test_infaas_state_holds_for_its_cooldown_then_recovers(env):
    policy = Infaas(env)
    slow = np.full(8, 0.5)
    depth = np.zeros(8, dtype=np.int64)
    slow[0], depth[0] = 2.0, 3  # overloaded
    slow[1], depth[1] = 1.2, 1  # interfered
    policy.update_states(slow, depth)
    assert policy.states[:3] == [ReplicaState.OVERLOADED, ReplicaState.INTERFERED, ReplicaState.ACTIVE]
    calm = np.full(8, 0.5)
    policy.update_states(calm, depth)
    assert policy.states[:2] == [ReplicaState.OVERLOADED, ReplicaState.INTERFERED]  # 2nd decision of 3 / 2
    policy.update_states(calm, depth)
    assert policy.states[:2] == [ReplicaState.OVERLOADED, ReplicaState.ACTIVE]
    policy.update_states(calm, depth)
    assert policy.states[:2] == [ReplicaState.ACTIVE, ReplicaState.ACTIVE]
    policy.reset()
    assert policy.states == [ReplicaState.ACTIVE] * 8


def test_infaas_cost_is_eq5_over_active_replicas(env):
    rows = [
        {"waiting": 0, "service_time_ewma": 0.9},  # cost 0 + 0.9 = 0.9 (alpha = beta = 1)
        {"running": 4, "service_time_ewma": 0.2},  # cost 4 + 0.2 = 4.2
    ]
    assert Infaas(env).act(observation(Infaas(env), rows)) == 0
    assert Infaas(env, alpha=0.0).act(observation(Infaas(env), rows)) == 1  # 0.9 vs 0.2
    # the cheapest replica is OVERLOADED (1.5 s > 1.3 s, queue 3): excluded while another is ACTIVE
    rows = [{"running": 3, "service_time_ewma": 1.5}, {"running": 6, "service_time_ewma": 1.0}]
    assert Infaas(env).act(observation(Infaas(env), rows)) == 1
    # none ACTIVE: the penalty ranks them; OVERLOADED 3 + 1.5 + 1 = 5.5, INTERFERED 1 + 1.2 + 0.5 = 2.7
    rows = [{"running": 3, "service_time_ewma": 1.5}, {"running": 1, "service_time_ewma": 1.2}]
    policy = Infaas(env)
    assert policy.act(observation(policy, rows, mask=[1, 1, 0, 0, 0, 0, 0, 0])) == 1
    np.testing.assert_allclose(
        policy.costs(np.array([1.5, 1.2] + [0.0] * 6), np.array([3, 1] + [0] * 6))[:2], [5.5, 2.7], rtol=1e-6
    )


def test_infaas_rejects_bad_constants(env):
    with pytest.raises(ValueError, match="alpha must be a non-negative finite number, got -1"):
        Infaas(env, alpha=-1.0)
    with pytest.raises(ValueError, match="beta must be a non-negative finite number, got nan"):
        Infaas(env, beta=float("nan"))
    with pytest.raises(ValueError, match="target_latency_s must be a positive finite number, got 0"):
        InfaasThresholds(target_latency_s=0)
    with pytest.raises(ValueError, match="overload_cooldown_decisions must be a non-negative integer, got 1.5"):
        InfaasThresholds(overload_cooldown_decisions=1.5)


def test_service_time_feature_is_the_ewma_of_completed_service_times():
    env = gym.make(ROUTING, episode_requests=80)
    policy = baselines.make("least_outstanding", env)
    obs, _ = env.reset(seed=1)
    done = False
    checked = 0
    while not done:
        obs, _, terminated, truncated, _ = env.step(policy.act(obs))
        done = terminated or truncated
        cluster = env.unwrapped.cluster
        for slot, instance_id in enumerate(cluster.instances):
            finished = [o for o in cluster.outcomes if o.instance_id == instance_id and o.completed]
            expected = 0.0
            for k, outcome in enumerate(finished):
                service_s = outcome.finish_s - outcome.first_scheduled_s
                expected = service_s if k == 0 else SERVICE_TIME_EWMA_WEIGHT * service_s + (1 - SERVICE_TIME_EWMA_WEIGHT) * expected
            observed = policy.decode(obs).instances["service_time_ewma"][slot]
            assert observed == pytest.approx(expected, rel=1e-5, abs=1e-5)
            checked += bool(finished)
    assert checked > 0


@pytest.mark.parametrize("name", ["round_robin", "random", "least_outstanding", "least_kv", "infaas"])
def test_classic_policies_run_whole_episodes_without_invalid_actions(name):
    (metrics,) = evaluate(name, ROUTING, [0], episode_requests=60)
    assert metrics["invalid_actions"] == 0 and metrics["steps"] == 60
    assert metrics["completed"] == 60
    (reasoning,) = evaluate(name, ROUTING, [0], scenario="pascal", episode_requests=30, rate_rps=3.0)
    assert reasoning["invalid_actions"] == 0 and reasoning["migrations"] == 0  # they never move a request
