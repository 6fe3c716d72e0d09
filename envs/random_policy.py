"""A uniformly random valid action, the baseline behaviour of benchmarks and recorded trajectories."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


def random_masked_action(space: gym.Space, mask: np.ndarray, rng: np.random.Generator) -> Any:
    """A uniformly random valid action under ``mask`` (per dimension for MultiDiscrete; uniform
    in a Box, which has no mask), drawn from ``rng`` so a seed fixes the whole trajectory."""
    if isinstance(space, gym.spaces.Discrete):
        return _uniform_index(mask, rng)
    if isinstance(space, gym.spaces.MultiDiscrete):
        action, start = [], 0
        for n in space.nvec:
            action.append(_uniform_index(mask[start:start + n], rng))
            start += n
        return np.array(action, dtype=np.int64)
    return rng.uniform(space.low, space.high).astype(space.dtype)


def _uniform_index(mask: np.ndarray, rng: np.random.Generator) -> int:
    """A uniformly random True index of ``mask``: the draw of ``rng.choice(np.flatnonzero(mask))``
    (the same integer from the same stream) at a quarter of its cost."""
    valid = np.flatnonzero(mask)
    if valid.size == 0:
        raise ValueError("no valid action: every entry of the mask is False")
    return int(valid[rng.integers(valid.size)])
