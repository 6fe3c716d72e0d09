"""Equality checks of the native vector envs' tests (test_vector_env.py, test_tier_vector_env.py):
an env's observation, episode metrics and outcomes against a single env's, bit for bit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields

import numpy as np

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
