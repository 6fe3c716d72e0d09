"""``space.contains(action)`` for the action spaces of the envs, with the common cases checked
without gymnasium's numpy conversions (a few microseconds at every step)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


def action_in_space(space: gym.Space, action: Any) -> bool:
    """Whether ``action`` is in ``space``: the answer of ``space.contains``. An integer (Python
    or numpy) for a ``Discrete`` and an integer array of the space's shape for a
    ``MultiDiscrete`` are compared directly; anything else goes to ``space.contains``."""
    if isinstance(space, gym.spaces.Discrete):
        if type(action) is int or isinstance(action, np.integer):
            return int(space.start) <= action < int(space.start) + int(space.n)
    elif isinstance(space, gym.spaces.MultiDiscrete):
        if isinstance(action, np.ndarray) and action.dtype.kind in "iu" and action.shape == space.shape:
            return all(
                low <= value < low + n
                for value, low, n in zip(action.ravel().tolist(), space.start.ravel().tolist(), space.nvec.ravel().tolist())
            )
    return bool(space.contains(action))
