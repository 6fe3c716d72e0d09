"""A uniformly random valid action, the baseline behaviour of benchmarks and recorded trajectories."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


def random_masked_action(space: gym.Space, mask: np.ndarray, rng: np.random.Generator) -> Any:
    """A uniformly random valid action under ``mask`` (per dimension for MultiDiscrete; uniform
    in a Box, which has no mask), drawn from ``rng`` so a seed fixes the whole trajectory."""
    if isinstance(space, gym.spaces.Discrete):
        return int(rng.choice(np.flatnonzero(mask)))
    if isinstance(space, gym.spaces.MultiDiscrete):
        action, start = [], 0
        for n in space.nvec:
            action.append(int(rng.choice(np.flatnonzero(mask[start:start + n]))))
            start += n
        return np.array(action, dtype=np.int64)
    return rng.uniform(space.low, space.high).astype(space.dtype)
