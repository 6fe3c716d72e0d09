"""Gymnasium's episode contract: stepping an episode that has ended is an error that says to
call ``reset()``; after ``reset()`` the env steps again from the start."""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest

import envs
from envs.episode_outcomes import EpisodeOutcomes
from envs.random_policy import random_masked_action

SCENARIO = {"servegym/Cascade-v0": "cascadeserve"}  # the cascade env needs a cascade


def _run_to_end(env: gym.Env, rng: np.random.Generator) -> int:
    env.reset(seed=3)
    for step in range(1, 10_000):
        action = random_masked_action(env.action_space, env.unwrapped.action_masks().reshape(-1), rng)
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            assert "episode_metrics" in info
            return step
    raise AssertionError("the episode did not end in 10,000 steps")


@pytest.mark.parametrize("env_id", list(envs.ENV_IDS))
def test_stepping_a_finished_episode_asks_for_reset_and_reset_starts_again(env_id):
    env = gym.make(env_id, scenario=SCENARIO.get(env_id, "default"), episode_requests=30,
                   disable_env_checker=True).unwrapped
    rng = np.random.default_rng(0)
    steps = _run_to_end(env, rng)
    cost_usd = env.cluster.cost_usd()
    with pytest.raises(gym.error.ResetNeeded, match=r"the episode has ended .*call reset\(\) before step\(\)"):
        env.step(env.action_space.sample())
    assert env.cluster.cost_usd() == cost_usd  # nothing ran and nothing was charged
    assert _run_to_end(env, np.random.default_rng(0)) == steps  # the same seed replays the same episode


def test_step_before_reset_asks_for_reset():
    env = gym.make("servegym/Routing-v0", disable_env_checker=True).unwrapped
    with pytest.raises(gym.error.ResetNeeded, match=r"call reset\(\) before step\(\)"):
        env.step(0)


@pytest.mark.parametrize("env_id", list(envs.ENV_IDS))
def test_episode_outcomes_are_every_request_and_a_deep_copy_shares_them(env_id):
    # SB3's DummyVecEnv deep-copies every step's infos: the ended episode's outcomes (final, their
    # cluster dropped at the next reset) are shared, not copied object by object.
    env = gym.make(env_id, scenario=SCENARIO.get(env_id, "default"), episode_requests=30, disable_env_checker=True)
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    while True:
        action = random_masked_action(env.action_space, env.unwrapped.action_masks().reshape(-1), rng)
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    outcomes = info["episode_outcomes"]
    assert isinstance(outcomes, EpisodeOutcomes) and isinstance(outcomes, tuple)
    assert list(outcomes) == env.unwrapped.cluster.outcomes
    assert sorted(o.request_id for o in outcomes) == sorted(r.request_id for r in env.unwrapped.cluster.submitted_requests)
    copied = copy.deepcopy(info)
    assert copied["episode_outcomes"] is outcomes
    assert copied["episode_metrics"] == info["episode_metrics"] and copied["episode_metrics"] is not info["episode_metrics"]
    sent = pickle.loads(pickle.dumps(outcomes))  # SubprocVecEnv sends them whole (NaN fields: compared by repr)
    assert isinstance(sent, EpisodeOutcomes) and list(map(repr, sent)) == list(map(repr, outcomes))
