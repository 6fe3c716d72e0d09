"""``envs.action_space.action_in_space`` answers as ``space.contains`` does, on every kind of input."""

import gymnasium as gym
import numpy as np
import pytest

from envs.action_space import action_in_space

SPACES = [
    gym.spaces.Discrete(8),
    gym.spaces.Discrete(5, start=2),
    gym.spaces.MultiDiscrete([9, 9]),
    gym.spaces.MultiDiscrete([3, 3], start=[1, -1]),
    gym.spaces.MultiDiscrete([[2, 3], [4, 5]]),
    gym.spaces.Box(-1.0, 1.0, (2,)),
]
ACTIONS = [
    -1, 0, 1, 2, 6, 7, 8, 9, True, False, np.int64(3), np.int8(-2), np.uint64(2**63), 3.0, np.float64(2), "a", None,
    np.array(3), np.array([3]), np.array([1, 2]), np.array([8, 9]), np.array([9, 8]), np.array([-1, 0]), np.array([0, -2]),
    np.array([1.0, 2.0]), np.array([1, 2], dtype=np.uint8), np.array([1, 2, 3]), [1, 2], (0, 0),
    np.array([[1, 2], [3, 4]]), np.array([[1, 2], [3, 5]]), np.array([[0, 0], [0, 0]], dtype=np.int32),
    np.array([0.5, -0.5], dtype=np.float32),
]


@pytest.mark.parametrize("space", SPACES, ids=lambda space: " ".join(str(space).split()))
def test_same_answer_as_contains(space: gym.Space) -> None:
    for action in ACTIONS:
        assert action_in_space(space, action) == bool(space.contains(action)), (space, action)


def test_discrete_bounds_are_start_inclusive_end_exclusive() -> None:
    space = gym.spaces.Discrete(5, start=2)
    assert [action_in_space(space, a) for a in range(0, 9)] == [False, False, True, True, True, True, True, False, False]
    space = gym.spaces.MultiDiscrete([3, 3], start=[1, -1])
    assert action_in_space(space, np.array([3, 1])) and not action_in_space(space, np.array([4, 1]))
    assert action_in_space(space, np.array([1, -1])) and not action_in_space(space, np.array([1, -2]))
