"""servegym/Routing-v0: API conformance, masking, determinism, training smoke, phase decisions."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import envs  # noqa: F401  (registers the IDs)
from envs.base import InvalidActionError
from envs.routing import RoutingEnv
from envs.wrappers import FlattenServingObservation
from simulator.request import SLO

SMALL = dict(episode_requests=120)


def masked_random_rollout(env: RoutingEnv, seed: int, steps: int = 60):
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    trace = [obs]
    for _ in range(steps):
        action = int(rng.choice(np.flatnonzero(env.action_masks())))
        obs, reward, terminated, truncated, info = env.step(action)
        trace.append((obs, reward))
        if terminated or truncated:
            break
    return trace


def test_registered_and_passes_both_env_checkers():
    env = gym.make("servegym/Routing-v0", **SMALL)
    check_env(env.unwrapped)
    sb3_check_env(env.unwrapped)
    flat = FlattenServingObservation(RoutingEnv(**SMALL))
    check_env(flat)
    sb3_check_env(flat)


def test_observations_stay_in_bounds_and_finite_over_an_episode():
    env = RoutingEnv(**SMALL)
    obs, info = env.reset(seed=3)
    done = False
    while not done:
        for key, value in obs.items():
            assert env.observation_space[key].contains(value), key
            assert np.isfinite(value).all()
        obs, reward, terminated, truncated, info = env.step(env.fallback_action())
        done = terminated or truncated
    assert truncated and not terminated
    metrics = info["episode_metrics"]
    assert metrics["arrived"] == 120 and metrics["completed"] + metrics["rejected"] == 120


def test_same_seed_same_trajectory_and_different_seed_differs():
    a = masked_random_rollout(RoutingEnv(**SMALL), seed=5)
    b = masked_random_rollout(RoutingEnv(**SMALL), seed=5)
    c = masked_random_rollout(RoutingEnv(**SMALL), seed=6)
    for (obs_a, r_a), (obs_b, r_b) in zip(a[1:], b[1:]):
        assert r_a == r_b
        for key in obs_a:
            np.testing.assert_array_equal(obs_a[key], obs_b[key])
    assert any(not np.array_equal(x[0]["context"], y[0]["context"]) for x, y in zip(a[1:], c[1:]))


def test_masked_action_falls_back_with_penalty_and_strict_raises():
    env = RoutingEnv(**SMALL, invalid_action_penalty=2.5)
    env.reset(seed=0)
    env.cluster.drain(3)  # instance 3 no longer takes requests
    assert not env.action_masks()[3]
    reference = RoutingEnv(**SMALL, invalid_action_penalty=2.5)
    reference.reset(seed=0)
    reference.cluster.drain(3)
    _, r_valid, *_ , info_valid = reference.step(env.fallback_action())
    _, r_invalid, *_, info = env.step(3)
    assert info["invalid_action"] and not info_valid["invalid_action"]
    assert r_invalid == pytest.approx(r_valid - 2.5)
    strict = RoutingEnv(**SMALL, strict=True)
    strict.reset(seed=0)
    strict.cluster.drain(3)
    with pytest.raises(InvalidActionError, match="masked out"):
        strict.step(3)


def test_out_of_space_action_and_bad_arguments_raise():
    env = RoutingEnv(**SMALL)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="outside the action space"):
        env.step(8)
    with pytest.raises(ValueError, match="unknown reward 'speed'"):
        RoutingEnv(reward="speed")
    with pytest.raises(ValueError, match="unknown scenario 'nope'"):
        RoutingEnv(scenario="nope")
    with pytest.raises(ValueError, match="rate_rps must be a finite number > 0, got -1.0"):
        RoutingEnv(rate_rps=-1.0)
    with pytest.raises(ValueError, match="unknown scenario override"):
        RoutingEnv(rate=3.0)


def test_slo_reward_counts_met_minus_missed_requests():
    env = RoutingEnv(**SMALL)
    env.reset(seed=2)
    total, met, finished = 0.0, 0, 0
    done = False
    while not done:
        _, reward, terminated, truncated, info = env.step(env.fallback_action())
        total += reward
        met += info["slo_met"]
        finished += info["finished"]
        done = terminated or truncated
    assert finished == 120
    assert total == met - (finished - met)
    assert info["episode_metrics"]["slo_met"] == met


def test_reasoning_requests_come_back_for_a_phase_decision():
    env = RoutingEnv(episode_requests=30, lengths="servegen_deepseek_r1", rate_rps=2.0,
                     slo_by_tier=(SLO(ttft_s=60.0),))
    env.reset(seed=1)
    kinds = []
    done = False
    while not done:
        context = env.context()
        kinds.append("route" if context[0] else "phase")
        _, _, terminated, truncated, info = env.step(env.fallback_action())
        done = terminated or truncated
    assert kinds.count("route") == 30
    assert kinds.count("phase") == 30  # every ServeGen request reasons, then answers


def test_maskable_ppo_and_flat_ppo_train_briefly():
    env = RoutingEnv(**SMALL)
    model = MaskablePPO("MultiInputPolicy", env, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(total_timesteps=256)
    assert model.num_timesteps == 256
    assert any(not torch.equal(a, b) for a, b in zip(before, model.policy.parameters()))  # 4 updates moved it
    observation, _ = env.reset(seed=1)
    for _ in range(20):  # the trained policy picks only unmasked slots
        action, _ = model.predict(observation, action_masks=env.action_masks(), deterministic=True)
        assert env.action_masks()[int(action)]
        observation, _, _, _, info = env.step(int(action))
        assert not info["invalid_action"]
    flat = FlattenServingObservation(RoutingEnv(**SMALL))
    flat_model = PPO("MlpPolicy", flat, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    flat_model.learn(total_timesteps=128)
    assert flat_model.num_timesteps == 128 and flat_model.observation_space.shape == flat.observation_space.shape


def test_load_shares_stay_exact_when_squashed_counts_saturate():
    """Under multitier's burst the squashed counts of 200-odd waiting requests differ in the third
    decimal; ``request_share`` and ``tier_k_share`` give each instance's part of the cluster's
    requests (and of each tier's) exactly."""
    env = RoutingEnv("multitier", episode_requests=600)
    obs, _ = env.reset(seed=2)
    for step in range(500):
        obs, *_ = env.step(0 if step % 3 == 0 else step % 4)
    names = env.features.names
    instances = list(env.cluster.instances.values())
    counts = np.array([i.num_requests for i in instances], dtype=float)
    assert counts.min() > 80  # saturated: squash(80, 16) = 0.83
    np.testing.assert_allclose(obs["instances"][:4, names.index("request_share")], counts / counts.sum(), rtol=1e-5)
    for tier in range(4):
        per_tier = np.array([sum(s.tier == tier for s in i.sequences()) for i in instances], dtype=float)
        np.testing.assert_allclose(obs["instances"][:4, names.index(f"tier_{tier}_share")], per_tier / per_tier.sum(),
                                   rtol=1e-4)
    empty, _ = env.reset(seed=2)
    assert not empty["instances"][:, names.index("request_share")].any()  # nothing arrived yet: no shares
