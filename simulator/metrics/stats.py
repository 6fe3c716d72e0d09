"""Distribution statistics of one per-request latency: mean and tail percentiles."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

PERCENTILES = (50, 90, 95, 99)
NAN = float("nan")


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """Mean and p50/p90/p95/p99 of a latency in seconds; all NaN when there is no sample.

    Percentiles are ``numpy.percentile(method="linear")``'s, bit for bit (linear interpolation
    between the two closest ranks, NumPy's default; one sort, then NumPy's float operations),
    so the p50 of ``[1, 2, 3, 4]`` is 2.5.
    """

    mean_s: float
    p50_s: float
    p90_s: float
    p95_s: float
    p99_s: float

    @classmethod
    def of(cls, values_s: np.ndarray) -> LatencyStats:
        """Statistics over the non-NaN entries of ``values_s`` (NaN marks "does not apply")."""
        samples = values_s[~np.isnan(values_s)]
        if samples.size == 0:
            return cls(NAN, NAN, NAN, NAN, NAN)
        ordered = np.sort(samples)  # one sort for the four (faster than a partition at their ranks)
        p50, p90, p95, p99 = (_percentile_of_sorted(ordered, q) for q in PERCENTILES)
        return cls(float(samples.mean()), p50, p90, p95, p99)


def percentile_linear(values: Sequence[float], q: float) -> float:
    """``float(numpy.percentile(values, q))`` (method "linear") of a short list of finite
    floats by the same float operations (index (n − 1)·q/100, NumPy's ``_lerp``), for callers
    that take one percentile of a few dozen values every env step, where NumPy's generic
    machinery costs ~20 us. ``tests/test_metrics.py`` checks it against NumPy bit for bit."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q!r}")
    return _percentile_of_sorted(sorted(values), q)


def _percentile_of_sorted(data: Sequence[float] | np.ndarray, q: float) -> float:
    """The q-th percentile (method "linear") of finite ``data`` sorted ascending, by NumPy's
    float operations: the virtual index (n − 1)·(q/100), then ``_lerp`` between its neighbours."""
    last = len(data) - 1
    virtual = last * (q / 100)
    if virtual >= last:
        return float(data[last])
    below = math.floor(virtual)
    gamma = virtual - below
    low, high = float(data[below]), float(data[below + 1])
    diff = high - low
    return float(high - diff * (1 - gamma) if gamma >= 0.5 else low + diff * gamma)



def mean_float64(values: Sequence[float]) -> float:
    """``float(numpy.mean(values))`` of a list of floats by the same float operations (NumPy's
    pairwise sum, then one division by the count), without ``numpy.mean``'s generic wrapper,
    which costs ~2 us more on the few dozen values an env step averages."""
    if not values:
        raise ValueError("mean of no values")
    return float(np.add.reduce(np.array(values, dtype=np.float64))) / len(values)

def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``, NaN when the denominator is 0 or NaN (never inf)."""
    if denominator == 0 or denominator != denominator:
        return NAN
    return float(numerator / denominator)
