"""Distribution statistics of one per-request latency: mean and tail percentiles."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PERCENTILES = (50, 90, 95, 99)
NAN = float("nan")


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """Mean and p50/p90/p95/p99 of a latency in seconds; all NaN when there is no sample.

    Percentiles use ``numpy.percentile(method="linear")`` (linear interpolation between the two
    closest ranks, NumPy's default), so the p50 of ``[1, 2, 3, 4]`` is 2.5.
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
        p50, p90, p95, p99 = np.percentile(samples, PERCENTILES, method="linear")
        return cls(float(samples.mean()), float(p50), float(p90), float(p95), float(p99))


def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``, NaN when the denominator is 0 or NaN (never inf)."""
    if denominator == 0 or denominator != denominator:
        return NAN
    return float(numerator / denominator)
