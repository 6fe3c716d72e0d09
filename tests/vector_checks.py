"""Equality checks of the native vector envs' tests (test_vector_env.py, test_tier_vector_env.py):
an env's observation and episode metrics against a single env's, bit for bit."""

from __future__ import annotations

import numpy as np


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
