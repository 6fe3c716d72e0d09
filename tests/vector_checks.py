"""Equality checks of the native vector envs' tests (test_vector_env.py, test_tier_vector_env.py,
test_migration_vector_env.py, test_scaling_vector_env.py): an env's observation, episode metrics and
outcomes against a single env's, bit for bit; the SB3 vector env against DummyVecEnv."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any

import gymnasium as gym
import numpy as np
from sb3_contrib.common.maskable.utils import get_action_masks
from stable_baselines3.common.vec_env import DummyVecEnv

from agents.vec_env import NativeVecEnv

from simulator.metrics.columns import LazyOutcomes, OutcomeColumns
from simulator.outcome import RequestOutcome


def assert_same_observation(vector_obs: dict[str, np.ndarray], single_obs: dict[str, np.ndarray]) -> None:
    """The same keys, dtypes, shapes and values."""
    assert vector_obs.keys() == single_obs.keys()
    for key, value in single_obs.items():
        assert vector_obs[key].dtype == value.dtype, key
        np.testing.assert_array_equal(vector_obs[key], value, err_msg=key, strict=True)


def assert_same_metrics(vector: dict[str, float], single: dict[str, float]) -> None:
    """The same names and values (NaN equal to NaN)."""
    assert vector.keys() == single.keys()
    for key, value in single.items():
        assert vector[key] == value or (np.isnan(value) and np.isnan(vector[key])), key


def assert_same_outcomes(vector: Sequence[RequestOutcome], single: Sequence[RequestOutcome]) -> None:
    """A native env's ended episode carries ``LazyOutcomes``: their columns, read from the
    engine's, equal those read from the single env's outcome objects field by field (NaN equal to
    NaN); and the objects themselves equal the single env's."""
    assert isinstance(vector, LazyOutcomes)
    expected = OutcomeColumns.from_outcomes(single)
    for field in fields(OutcomeColumns):
        got, want = getattr(vector.columns, field.name), getattr(expected, field.name)
        assert got.dtype == want.dtype and got.shape == want.shape, field.name
        if want.dtype.kind == "f":
            np.testing.assert_array_equal(got, want, err_msg=field.name)
        else:
            assert got.tolist() == want.tolist(), field.name
    assert list(map(repr, vector)) == list(map(repr, single))


def assert_sb3_vec_env_matches_dummy(env_id: str, kwargs: dict[str, Any], step_info: Sequence[str],
                                     choose_actions: Callable[[np.random.Generator, np.ndarray], np.ndarray],
                                     episodes: int = 3) -> None:
    """``NativeVecEnv`` and ``DummyVecEnv`` over two single envs of ``env_id`` (``gym.make``'s
    ``kwargs``), seeded alike and stepped with the same actions (``choose_actions(rng, masks)``)
    until ``episodes`` episodes ended: the same observations, masks (as MaskablePPO reads them),
    dones, ``step_info`` entries, episode metrics, terminal observations and reset infos; the
    native env's float64 rewards equal DummyVecEnv's once rounded to its float32."""
    native = NativeVecEnv(2, env_id=env_id, **kwargs)
    dummy = DummyVecEnv([lambda: gym.make(env_id, **kwargs) for _ in range(2)])
    native.seed(5)
    dummy.seed(5)
    obs, d_obs = native.reset(), dummy.reset()
    rng = np.random.default_rng(1)
    ended = 0
    while ended < episodes:
        for key in d_obs:
            np.testing.assert_array_equal(obs[key], d_obs[key], strict=True)
        masks = get_action_masks(native)
        np.testing.assert_array_equal(masks, get_action_masks(dummy), strict=True)
        actions = choose_actions(rng, masks)
        obs, rewards, dones, infos = native.step(actions)
        d_obs, d_rewards, d_dones, d_infos = dummy.step(actions)
        assert rewards.dtype == np.float64
        np.testing.assert_array_equal(rewards.astype(np.float32), d_rewards, strict=True)
        np.testing.assert_array_equal(dones, d_dones, strict=True)
        for info, d_info in zip(infos, d_infos, strict=True):
            assert info.keys() == d_info.keys()
            for key in (*step_info, "TimeLimit.truncated"):
                assert info[key] == d_info[key], key
            if "episode_metrics" in d_info:
                ended += 1
                assert info["TimeLimit.truncated"] is True
                assert_same_metrics(info["episode_metrics"], d_info["episode_metrics"])
                assert_same_observation(info["terminal_observation"], d_info["terminal_observation"])
    assert [info.keys() for info in native.reset_infos] == [info.keys() for info in dummy.reset_infos]
