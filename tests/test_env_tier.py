"""K-tier headroom freeness (simulator.headroom) and servegym/Tier-v0."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import envs  # noqa: F401  (registers the IDs)
from envs.tier import TierEnv
from simulator.cluster import Cluster
from simulator.headroom import (
    batch_size,
    check_headroom_fractions,
    decay_rate,
    default_headroom_fractions,
    freeness_full,
    freeness_normal,
    head_of_line_demand_blocks,
    tier_headroom_blocks,
    virtual_usage_blocks,
)
from simulator.instance import InstanceConfig
from simulator.request import Request
from simulator.routers.freeness import freest_instance
from simulator.sequence import Sequence

MODEL = "Llama-3.1-8B"
TIERED = dict(num_tiers=3, priorities="uniform", tier_weights=(4.0, 2.0, 1.0))
SMALL = dict(episode_requests=200, **TIERED)


def seq(request_id: int, prompt_tokens: int, tier: int, output_tokens: int = 50) -> Sequence:
    return Sequence(Request(request_id, 0.0, prompt_tokens, output_tokens, tier=tier), record_token_curve=False)


def two_instance_cluster(scheduler: str = "priority") -> Cluster:
    cluster = Cluster({"A100-80GB": 2}, router=None)
    for _ in range(2):
        cluster.deploy(InstanceConfig(gpu="A100-80GB", model=MODEL, scheduler=scheduler), ready_now=True)
    return cluster


# ----------------------------------------------------------------- headroom budgets (eq. 3)
def test_k4_budgets_are_the_papers_exponential_decay():
    fractions = default_headroom_fractions(4)
    assert decay_rate(4) == 1.0  # Fig. 3: K = 4, lambda = 1.0
    np.testing.assert_allclose(fractions, [0.2, 0.2 * math.exp(-1), 0.2 * math.exp(-2), 0.2 * math.exp(-3)], rtol=1e-15)
    assert fractions.sum() == pytest.approx(0.3106, abs=5e-5)  # "31.1% of M"
    assert fractions[-1] / fractions[0] == pytest.approx(math.exp(-3))  # H_{K-1} ~ 0
    assert decay_rate(2) == 3.0 and decay_rate(7) == 0.5
    np.testing.assert_array_equal(default_headroom_fractions(1), [0.0])


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_decay_rate_rejects_non_positive_integer_tiers(bad):
    with pytest.raises(ValueError, match="num_tiers must be a positive integer"):
        decay_rate(bad)


def test_bad_headroom_fractions_are_named():
    with pytest.raises(ValueError, match=r"\[nan\]"):
        check_headroom_fractions([0.1, float("nan")])
    with pytest.raises(ValueError, match=r"\[-0.1\]"):
        check_headroom_fractions([-0.1, 0.2])
    with pytest.raises(ValueError, match="1-D"):
        check_headroom_fractions([])


# ----------------------------------------------------------------- freeness (eq. 1, 2, 4)
def test_queued_only_instance_freeness_by_hand():
    cluster = two_instance_cluster("priority")
    instance = cluster.instances[0]
    m = instance.kv.total_blocks
    instance.enqueue(seq(0, 320, tier=1))  # 20 blocks, enqueued first
    instance.enqueue(seq(1, 160, tier=0))  # 10 blocks: head of line under tier priority
    assert head_of_line_demand_blocks(instance) == 10
    assert batch_size(instance) == 1  # nothing running, the head of line joins
    h = [0.1, 0.05, 0.02]
    assert tier_headroom_blocks(instance, h) == pytest.approx(m * 0.15, rel=1e-12)  # tiers 0 and 1 present, once each
    assert virtual_usage_blocks(instance, h) == pytest.approx(10 + 0.15 * m, rel=1e-12)
    assert freeness_full(instance, h) == pytest.approx(m - 10 - 0.15 * m, rel=1e-12)
    assert freeness_normal(instance) == m - 10
    fcfs = two_instance_cluster("fcfs").instances[0]
    fcfs.enqueue(seq(0, 320, tier=1))
    fcfs.enqueue(seq(1, 160, tier=0))
    assert head_of_line_demand_blocks(fcfs) == 20  # FCFS head of line is the first arrival


def test_running_instance_freeness_by_hand():
    cluster = two_instance_cluster("priority")
    instance = cluster.instances[0]
    m = instance.kv.total_blocks
    a, b = seq(0, 320, tier=0), seq(1, 160, tier=0)
    instance.enqueue(a)
    instance.enqueue(b)
    while a.generated_tokens == 0 or b.generated_tokens == 0:  # one prefill iteration for both
        cluster.events.pop_and_run()
    # Decode slots reserved: ceil(321 / 16) + ceil(161 / 16) = 21 + 11 blocks, two running.
    assert instance.kv_used_blocks_now() == 32 and batch_size(instance) == 2
    h = [0.2, 0.1, 0.0]
    assert freeness_full(instance, h) == pytest.approx((m - 32 - 0.2 * m) / 2, rel=1e-12)  # one tier: H_0 once
    assert freeness_normal(instance) == (m - 32) / 2


def test_empty_is_infinitely_free_draining_infinitely_busy_and_unknown_tier_raises():
    cluster = two_instance_cluster()
    empty, busy = cluster.instances[0], cluster.instances[1]
    assert freeness_full(empty, [0.2]) == math.inf
    busy.enqueue(seq(0, 160, tier=0))
    cluster.drain(1)
    assert freeness_full(busy, [0.2]) == -math.inf and freeness_normal(busy) == -math.inf
    other = two_instance_cluster().instances[0]
    other.enqueue(seq(0, 160, tier=2))
    with pytest.raises(ValueError, match=r"tier\(s\) \[2\].*tiers 0..1"):
        freeness_full(other, [0.2, 0.1])


# ----------------------------------------------------------------- dispatch (§3.4)
def test_higher_tier0_headroom_turns_dispatch_away_exactly_at_the_formula_threshold():
    cluster = two_instance_cluster()
    a, b = cluster.instances[0], cluster.instances[1]
    a.enqueue(seq(0, 160, tier=0))  # F_A = M - 10 - H_0
    b.enqueue(seq(1, 480, tier=1))  # F_B = M - 30 - H_1
    m = a.kv.total_blocks
    arrival = seq(2, 100, tier=2)
    assert freest_instance(cluster, arrival, np.array([0.0, 0.0, 0.0])) == 0
    # H_0 = 19 blocks keeps A ahead (M - 29 > M - 30); 21 blocks puts B ahead.
    assert freest_instance(cluster, arrival, np.array([19 / m, 0.0, 0.0])) == 0
    assert freest_instance(cluster, arrival, np.array([21 / m, 0.0, 0.0])) == 1
    assert freeness_full(a, [21 / m, 0, 0]) == pytest.approx(m - 31, rel=1e-12)
    # A tier-1 budget charges B only.
    assert freest_instance(cluster, arrival, np.array([21 / m, 5 / m, 0.0])) == 0
    cluster.drain(0)
    assert freest_instance(cluster, arrival, np.array([0.0, 0.0, 0.0])) == 1


# ----------------------------------------------------------------- Tier-v0
def test_registered_and_passes_both_env_checkers_discrete_and_continuous():
    env = gym.make("servegym/Tier-v0", **SMALL)
    check_env(env.unwrapped)
    sb3_check_env(env.unwrapped)
    continuous = TierEnv(continuous=True, **SMALL)
    check_env(continuous)
    sb3_check_env(continuous)


def test_action_levels_set_headroom_and_the_router_uses_them():
    env = TierEnv(**SMALL)
    obs, info = env.reset(seed=0)
    np.testing.assert_allclose(env.headroom_fractions, default_headroom_fractions(3))
    assert env.cluster.router is env.router
    assert env.action_space == gym.spaces.MultiDiscrete([5, 5, 5])
    obs, _, _, _, info = env.step(np.array([4, 0, 2]))
    np.testing.assert_allclose(env.headroom_fractions, [0.4, 0.0, 0.2])
    assert info["headroom_fractions"] == pytest.approx([0.4, 0.0, 0.2])
    np.testing.assert_allclose(obs["context"][[0, 5, 10]], [1.0, 0.0, 0.5])
    continuous = TierEnv(continuous=True, **SMALL)
    continuous.reset(seed=0)
    continuous.step(np.array([0.05, 0.3, 0.0], dtype=np.float32))
    np.testing.assert_allclose(continuous.headroom_fractions, np.array([0.05, 0.3, 0.0], dtype=np.float32))



def test_budgets_set_by_hand_are_checked_once_and_kept_read_only():
    env = TierEnv(**SMALL)
    env.reset(seed=0)
    for bad, message in (([0.1, 1.5, 0.0], r"got \[1.5\]"), ([0.1, math.nan, 0.0], r"got \[nan\]"),
                         ([0.1, 0.2], "2 headroom fractions for 3 tiers")):
        with pytest.raises(ValueError, match=message):
            env.headroom_fractions = np.array(bad)
    mine = np.array([0.3, 0.1, 0.0])
    env.headroom_fractions = mine
    mine[0] = 0.9  # the env kept its own copy
    np.testing.assert_array_equal(env.headroom_fractions, [0.3, 0.1, 0.0])
    with pytest.raises(ValueError, match="read-only"):
        env.headroom_fractions[0] = 1.0

def test_context_counts_the_intervals_arrivals_and_finishes_per_tier():
    env = TierEnv(**SMALL)
    env.reset(seed=1)
    for _ in range(6):
        arrived_before, finished_before = env.cluster.arrived, len(env.cluster.outcomes)
        obs, *_ = env.step(np.array([2, 1, 0]))
        context = obs["context"]
        arrivals = [r.tier for r in env.cluster.submitted_requests[arrived_before:env.cluster.arrived]]
        finished = env.cluster.outcomes[finished_before:]
        for tier in range(3):
            rate = arrivals.count(tier) / env.scenario.control_interval_s
            assert context[5 * tier + 1] == pytest.approx(rate / (rate + 16.0))
            done = [o for o in finished if o.tier == tier]
            assert context[5 * tier + 2] == pytest.approx(len(done) / (len(done) + 16.0))
            met = sum(o.completed and env.reward_fn.met(o) for o in done)
            assert context[5 * tier + 3] == pytest.approx(met / len(done) if done else 0.0)
    assert context[15 + 1] == pytest.approx(env.cluster.arrived / 200)


def test_episode_runs_to_truncation_with_bounded_finite_observations():
    env = TierEnv(**SMALL)
    obs, _ = env.reset(seed=3)
    rng = np.random.default_rng(3)
    steps, done = 0, False
    while not done:
        for key, value in obs.items():
            assert env.observation_space[key].contains(value), key
            assert np.isfinite(value).all()
        obs, reward, terminated, truncated, info = env.step(rng.integers(0, 5, size=3))
        steps += 1
        done = terminated or truncated
    assert truncated and not terminated
    assert env.cluster.events.now_s == steps * env.scenario.control_interval_s  # decisions at 0, 1 s, 2 s, ...
    metrics = info["episode_metrics"]
    assert metrics["arrived"] == 200 and metrics["completed"] + metrics["rejected"] == 200


def test_same_seed_same_trajectory():
    def rollout(seed: int):
        env = TierEnv(**SMALL)
        obs, _ = env.reset(seed=seed)
        trace = []
        for step in range(12):
            obs, reward, *_ = env.step(np.array([step % 5, (step * 3) % 5, 4]))
            trace.append((obs, reward))
        return trace

    a, b, c = rollout(7), rollout(7), rollout(8)
    for (obs_a, r_a), (obs_b, r_b) in zip(a, b):
        assert r_a == r_b
        for key in obs_a:
            np.testing.assert_array_equal(obs_a[key], obs_b[key])
    assert any(not np.array_equal(x[0]["context"], y[0]["context"]) for x, y in zip(a, c))


def test_every_action_is_valid_and_out_of_space_actions_raise():
    env = TierEnv(**SMALL, strict=True)
    env.reset(seed=0)
    assert env.action_masks().shape == (15,) and env.action_masks().all()
    _, _, _, _, info = env.step(np.array([0, 4, 3]))  # strict never triggers: nothing is masked
    assert info["invalid_action"] is False
    with pytest.raises(ValueError, match="outside the action space"):
        env.step(np.array([5, 0, 0]))
    with pytest.raises(ValueError, match="outside the action space"):
        env.step(np.array([1, 1]))
    continuous = TierEnv(continuous=True, **SMALL)
    continuous.reset(seed=0)
    assert continuous.action_masks().shape == (3,)
    with pytest.raises(ValueError, match="outside the action space"):
        continuous.step(np.array([0.5, 0.0, 0.0], dtype=np.float32))
    with pytest.raises(ValueError, match="outside the action space"):
        continuous.step(np.array([np.nan, 0.0, 0.0], dtype=np.float32))


def test_slo_reward_is_tier_weighted():
    env = TierEnv(**SMALL)
    env.reset(seed=2)
    weights = np.array([4.0, 2.0, 1.0]) / 4.0
    done = False
    while not done:
        finished_before = len(env.cluster.outcomes)
        _, reward, terminated, truncated, _ = env.step(np.array([2, 1, 0]))
        finished = env.cluster.outcomes[finished_before:]
        expected = sum(weights[o.tier] * (1.0 if o.completed and env.reward_fn.met(o) else -1.0) for o in finished)
        assert reward == pytest.approx(expected)
        done = terminated or truncated


def test_maskable_ppo_and_continuous_ppo_train_briefly():
    env = TierEnv(**SMALL)
    model = MaskablePPO("MultiInputPolicy", env, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(1024)
    assert model.num_timesteps == 1024
    assert any(not torch.equal(a, b) for a, b in zip(before, model.policy.parameters()))
    observation, _ = env.reset(seed=1)
    for _ in range(10):  # the trained policy's tiers are always unmasked
        action, _ = model.predict(observation, action_masks=env.action_masks(), deterministic=True)
        observation, _, _, _, info = env.step(action)
        assert not info["invalid_action"]
    continuous = TierEnv(continuous=True, **SMALL)
    continuous_model = PPO("MultiInputPolicy", continuous, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    continuous_model.learn(128)
    action, _ = continuous_model.predict(continuous.reset(seed=1)[0], deterministic=True)
    assert continuous_model.num_timesteps == 128 and continuous.action_space.contains(action)
