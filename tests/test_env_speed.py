"""The env speed benchmark's split of MaskablePPO's wall time: the parts it times lie inside the
env's share, and timing them leaves the env's behaviour unchanged."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import envs  # noqa: F401
from envs.random_policy import random_masked_action
from experiments.benchmarks.env_speed import _PartTimer, main, ppo_steps_per_s, shipped_ppo_steps_per_s


def test_simulator_and_observation_shares_lie_inside_the_env_share():
    rate, env_share, simulator, observation = ppo_steps_per_s("servegym/Routing-v0", "default", 512)
    assert rate > 0
    assert 0 < simulator and 0 < observation and simulator + observation < env_share < 1


def test_timing_the_parts_changes_no_observation_or_reward():
    def trajectory(timed: bool) -> list:
        env = gym.make("servegym/Routing-v0", scenario="default")
        timer = _PartTimer(env) if timed else None
        rng = np.random.default_rng(0)
        observation, _ = env.reset(seed=3)
        seen = [observation["instances"].copy()]
        for _ in range(50):
            action = random_masked_action(env.action_space, env.unwrapped.action_masks(), rng)
            observation, reward, _, _, _ = env.step(action)
            seen += [observation["instances"].copy(), reward]
        if timer is not None:
            assert timer.seconds["advance"] > 0 and timer.seconds["observation"] > 0
        return seen

    plain, timed = trajectory(False), trajectory(True)
    assert all(np.array_equal(a, b) for a, b in zip(plain, timed)) and len(plain) == len(timed)


def test_a_cuda_policy_without_cuda_is_refused_by_name(capsys):
    if torch.cuda.is_available():
        pytest.skip("CUDA is present")
    with pytest.raises(SystemExit):
        main(["--ppo-device", "cuda", "--ids", "servegym/Routing-v0"])
    assert "--ppo-device cuda: torch sees no CUDA device here" in capsys.readouterr().err


def test_shipped_hyperparameters_train_two_rollouts_of_the_ids_own_setting():
    # Routing-v0's shipped setting: n_envs 2 (defaults), n_steps 512, native (in-process) envs, so 64
    # steps asked become two rollouts of 2 x 512.
    rate, env_share, n_envs, vec_env, trained, set_up_s = shipped_ppo_steps_per_s("servegym/Routing-v0", "default", 64)
    assert (n_envs, vec_env, trained) == (2, "native", 2 * 2 * 512)
    assert rate > 0 and 0 < env_share < 1 and set_up_s > 0
    rate, env_share, n_envs, vec_env, trained, set_up_s = shipped_ppo_steps_per_s("servegym/Routing-v0", "default", 64,
                                                                                   backend="python")
    assert (n_envs, vec_env, trained) == (2, "dummy", 2 * 2 * 512)  # the python engine: no native vector env
    assert rate > 0 and 0 < env_share < 1 and set_up_s > 0
