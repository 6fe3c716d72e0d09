"""Load profiles: a load curve as rates relative to its mean, one per ``bin_s`` real seconds,
to drive ``piecewise`` arrivals at any mean rate and on a compressed clock.

* ``azure_profile``: the Azure 2023 trace's arrival counts per minute (the "traffic patterns
  scaled from Azure LLM Inference Trace" of Cauchy §4.6);
* ``servegen_day_profile``: one day of ServeGen's pooled m-large rate series (10-minute windows).

Compressing the clock k times makes ``bin_s`` real seconds last ``bin_s / k`` simulated
seconds. The Azure conv trace is near-Poisson within a minute (inter-arrival CV 1.09), so a
piecewise-constant Poisson process at the profile's rates stands in for replaying its 5.5 req/s
request by request at 50-200 req/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from simulator.workloads._checks import positive_float
from simulator.workloads.data_files import SERVEGEN_RATE_WINDOW_S, servegen_rate_series
from simulator.workloads.traces import AZURE_TRACE_FILES, read_azure_columns

SERVEGEN_WINDOWS_PER_DAY = 144


@dataclass(frozen=True)
class LoadProfile:
    """``relative_rates[j]`` (mean 1) holds for ``bin_s`` real seconds each."""

    name: str
    bin_s: float
    relative_rates: tuple[float, ...]

    def __post_init__(self) -> None:
        positive_float("bin_s", self.bin_s)
        rates = np.asarray(self.relative_rates, dtype=np.float64)
        if rates.ndim != 1 or rates.size == 0 or not np.all(np.isfinite(rates)) or np.any(rates < 0):
            raise ValueError(f"relative_rates must be a non-empty list of finite rates >= 0, got {self.relative_rates!r}")
        if not math.isclose(float(rates.mean()), 1.0, rel_tol=1e-9):
            raise ValueError(f"relative_rates must have mean 1, got {rates.mean()!r}")

    def duration_s(self, compression: float) -> float:
        """Simulated seconds the whole profile lasts."""
        return len(self.relative_rates) * self.bin_s / positive_float("compression", compression)

    def rates_rps(self, mean_rate_rps: float) -> np.ndarray:
        return np.asarray(self.relative_rates) * positive_float("mean_rate_rps", mean_rate_rps)

    def boundaries_s(self, compression: float) -> np.ndarray:
        return np.arange(len(self.relative_rates)) * self.bin_s / positive_float("compression", compression)

    def expected_requests(self, mean_rate_rps: float, compression: float) -> int:
        """Arrivals the profile holds at ``mean_rate_rps``: the mean rate times its duration."""
        return round(positive_float("mean_rate_rps", mean_rate_rps) * self.duration_s(compression))

    def arrival_options(self, mean_rate_rps: float, compression: float) -> dict[str, tuple[float, ...]]:
        """Options of the ``piecewise`` arrival process for this profile at ``mean_rate_rps``."""
        return {"boundaries_s": tuple(self.boundaries_s(compression).tolist()),
                "rates_rps": tuple(self.rates_rps(mean_rate_rps).tolist())}


def _relative(name: str, bin_s: float, rates: np.ndarray) -> LoadProfile:
    return LoadProfile(name, bin_s, tuple((rates / rates.mean()).tolist()))


@lru_cache(maxsize=8)
def azure_profile(source: str = "azure_conv", bin_s: float = 60.0) -> LoadProfile:
    """Arrivals per ``bin_s`` of the shipped Azure 2023 trace (whole bins only), relative to
    their mean. ``azure_conv``: 58 one-minute bins between 0.57 and 1.52 x the mean. Kept once
    read (the profile is immutable; reading the trace takes about half a second)."""
    if source not in AZURE_TRACE_FILES:
        raise ValueError(f"unknown Azure trace {source!r}; known: {sorted(AZURE_TRACE_FILES)}")
    bin_s = positive_float("bin_s", bin_s)
    arrival_s = read_azure_columns(AZURE_TRACE_FILES[source])[0]
    whole_bins = int(arrival_s[-1] // bin_s)
    if whole_bins < 1:
        raise ValueError(f"{source} spans {arrival_s[-1]:.0f} s, less than one {bin_s:g} s bin")
    counts = np.bincount((arrival_s // bin_s).astype(np.int64), minlength=whole_bins)[:whole_bins]
    return _relative(f"{source} per {bin_s:g} s", bin_s, counts.astype(np.float64))


def servegen_day_profile(day: int = 0) -> LoadProfile:
    """Day ``day`` (0-13) of ServeGen's pooled m-large rate series: 144 ten-minute windows."""
    rates = servegen_rate_series().rate_rps
    days = rates.size // SERVEGEN_WINDOWS_PER_DAY
    if isinstance(day, bool) or not isinstance(day, int) or not 0 <= day < days:
        raise ValueError(f"day must be an integer in [0, {days}), got {day!r}")
    window = rates[day * SERVEGEN_WINDOWS_PER_DAY:(day + 1) * SERVEGEN_WINDOWS_PER_DAY]
    return _relative(f"servegen m-large day {day}", SERVEGEN_RATE_WINDOW_S, np.asarray(window, dtype=np.float64))
