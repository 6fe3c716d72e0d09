"""Observation wrappers for policies that take a flat vector."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


def flatten_serving_observation(observation: dict[str, Any], batch_dims: int = 0) -> np.ndarray:
    """``instances`` (row-major), ``context`` and ``action_mask`` as one float32 vector, the first
    ``batch_dims`` dimensions kept (1: a vector env's stacked observations, one row per env)."""
    keys = FlattenServingObservation.KEYS
    batch = np.shape(observation[keys[0]])[:batch_dims]
    return np.concatenate([np.asarray(observation[k], dtype=np.float32).reshape(*batch, -1) for k in keys],
                          axis=batch_dims)


class FlattenServingObservation(gym.ObservationWrapper):
    """Concatenate ``instances`` (row-major), ``context`` and ``action_mask`` into one float32
    ``Box`` for plain MLP policies. ``action_masks()`` still reaches the wrapped env."""

    KEYS = ("instances", "context", "action_mask")

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        spaces_by_key = env.observation_space.spaces
        low = np.concatenate([spaces_by_key[k].low.reshape(-1) for k in self.KEYS]).astype(np.float32)
        high = np.concatenate([spaces_by_key[k].high.reshape(-1) for k in self.KEYS]).astype(np.float32)
        self.observation_space = spaces.Box(low, high, dtype=np.float32)

    def observation(self, observation: dict[str, Any]) -> np.ndarray:
        return flatten_serving_observation(observation)

    def action_masks(self) -> np.ndarray:
        return self.env.unwrapped.action_masks()
