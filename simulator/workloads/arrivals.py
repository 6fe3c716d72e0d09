"""Arrival processes: sorted arrival times in seconds from t = 0.

Every process exposes ``sample_arrival_times(num_requests, rng) -> np.ndarray`` (float64,
non-decreasing). The processes here also give the same times a block at a time
(``arrival_time_chunks``), drawing what one call would draw in the same order, so a long
workload can be generated lazily (``simulator.workloads.generate.stream_requests``). Time-varying load uses the time-rescaling construction: unit-rate
renewal times U_1 < U_2 < ... are mapped through the inverse cumulative intensity,
t_i = Lambda^-1(U_i), Lambda(t) = integral_0^t rate(s) ds, which for exponential gaps is
exactly the non-homogeneous Poisson process with that rate.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, Sequence

import numpy as np

from simulator.workloads._checks import count, nonnegative_float, positive_float
from simulator.workloads.data_files import SERVEGEN_RATE_WINDOW_S, servegen_rate_series


class ArrivalProcess(Protocol):
    def sample_arrival_times(self, num_requests: int, rng: np.random.Generator) -> np.ndarray: ...


def _unit_mean_gaps(num_requests: int, cv: float, rng: np.random.Generator) -> np.ndarray:
    """i.i.d. gaps of mean 1: exponential for cv = 1, else Gamma(shape 1/cv^2, scale cv^2)."""
    if cv == 1.0:
        return rng.standard_exponential(num_requests)
    return rng.gamma(1.0 / cv**2, cv**2, num_requests)


def _unit_rate_time_chunks(num_requests: int, cv: float, rng: np.random.Generator, chunk: int) -> Iterator[np.ndarray]:
    """``np.cumsum(_unit_mean_gaps(num_requests, cv, rng))`` in blocks of ``chunk``, bit for bit:
    numpy draws one gap after another, and each block's running sum continues from the last
    sum (added left to right, as ``cumsum`` adds)."""
    num_requests = count("num_requests", num_requests)
    chunk = count("chunk", chunk, minimum=1)
    carry = np.zeros(1)
    for start in range(0, num_requests, chunk):
        sums = np.cumsum(np.concatenate((carry, _unit_mean_gaps(min(chunk, num_requests - start), cv, rng))))[1:]
        carry = sums[-1:]
        yield sums


class PoissonArrivals:
    """Homogeneous Poisson arrivals: exponential inter-arrival gaps of mean 1/rate_rps."""

    def __init__(self, rate_rps: float) -> None:
        self.rate_rps = positive_float("rate_rps", rate_rps)

    def sample_arrival_times(self, num_requests: int, rng: np.random.Generator) -> np.ndarray:
        num_requests = count("num_requests", num_requests)
        return np.cumsum(_unit_mean_gaps(num_requests, 1.0, rng)) / self.rate_rps

    def arrival_time_chunks(self, num_requests: int, rng: np.random.Generator, chunk: int) -> Iterator[np.ndarray]:
        """``sample_arrival_times`` in blocks of ``chunk`` (the same draws and values)."""
        for sums in _unit_rate_time_chunks(num_requests, 1.0, rng, chunk):
            yield sums / self.rate_rps


class GammaArrivals:
    """Gamma renewal arrivals: gaps with mean 1/rate_rps and coefficient of variation ``cv``
    (shape 1/cv^2); cv > 1 is burstier than Poisson, cv = 1 is Poisson."""

    def __init__(self, rate_rps: float, cv: float) -> None:
        self.rate_rps = positive_float("rate_rps", rate_rps)
        self.cv = positive_float("cv", cv)

    def sample_arrival_times(self, num_requests: int, rng: np.random.Generator) -> np.ndarray:
        num_requests = count("num_requests", num_requests)
        return np.cumsum(_unit_mean_gaps(num_requests, self.cv, rng)) / self.rate_rps

    def arrival_time_chunks(self, num_requests: int, rng: np.random.Generator, chunk: int) -> Iterator[np.ndarray]:
        """``sample_arrival_times`` in blocks of ``chunk`` (the same draws and values)."""
        for sums in _unit_rate_time_chunks(num_requests, self.cv, rng, chunk):
            yield sums / self.rate_rps


class PiecewiseRateArrivals:
    """Arrivals whose rate is ``rates_rps[j]`` from ``boundaries_s[j]`` to the next boundary.

    ``boundaries_s`` are segment start times: the first is 0, they strictly increase.
    Without ``cycle_s`` the last segment lasts forever (its rate must be > 0); with
    ``cycle_s`` (> last boundary) the last segment ends there and the whole schedule repeats
    with that period. Zero-rate segments are idle periods; negative or NaN rates raise.
    ``cv = 1`` (default) gives the exact piecewise-constant Poisson process; other values
    rescale a Gamma renewal process of that CV through the same intensity.
    """

    def __init__(
        self,
        boundaries_s: Sequence[float],
        rates_rps: Sequence[float],
        *,
        cv: float = 1.0,
        cycle_s: float | None = None,
    ) -> None:
        starts = np.asarray(boundaries_s, dtype=np.float64)
        rates = np.asarray(rates_rps, dtype=np.float64)
        if starts.ndim != 1 or starts.size == 0 or starts.shape != rates.shape:
            raise ValueError(
                f"boundaries_s and rates_rps must be non-empty 1-D and of equal length, got "
                f"{starts.shape} and {rates.shape}"
            )
        if starts[0] != 0.0:
            raise ValueError(f"boundaries_s must start at 0, got {starts[0]!r}")
        if not np.all(np.isfinite(starts)) or np.any(np.diff(starts) <= 0):
            raise ValueError(f"boundaries_s must be finite and strictly increasing, got {starts.tolist()}")
        bad = ~np.isfinite(rates) | (rates < 0)
        if bad.any():
            raise ValueError(f"rates_rps must be finite and >= 0, got {rates[bad][0]!r} at index {int(np.argmax(bad))}")
        if not np.any(rates > 0):
            raise ValueError(f"rates_rps must have a rate > 0, got {rates.tolist()}")
        self.cv = positive_float("cv", cv)
        segment_ends = np.append(starts[1:], np.inf)
        if cycle_s is None:
            if rates[-1] == 0:
                raise ValueError("the last rate lasts forever without cycle_s, so it must be > 0, got 0.0")
            self.cycle_s = None
        else:
            self.cycle_s = positive_float("cycle_s", cycle_s)
            if self.cycle_s <= starts[-1]:
                raise ValueError(f"cycle_s must exceed the last boundary {starts[-1]!r}, got {cycle_s!r}")
            segment_ends[-1] = self.cycle_s
        self.boundaries_s = starts
        self.rates_rps = rates
        segment_mass = rates[:-1] * (segment_ends[:-1] - starts[:-1])
        self._cumulative_at_start = np.concatenate([[0.0], np.cumsum(segment_mass)])
        self._mass_per_cycle = (
            None if self.cycle_s is None else self._cumulative_at_start[-1] + rates[-1] * (self.cycle_s - starts[-1])
        )

    def expected_arrivals(self, horizon_s: float) -> float:
        """Lambda(horizon_s), the expected number of arrivals in [0, horizon_s): use it to pick
        ``num_requests`` for a simulated duration."""
        horizon_s = nonnegative_float("horizon_s", horizon_s)
        whole_cycles = 0.0
        if self.cycle_s is not None:
            whole_cycles, horizon_s = divmod(horizon_s, self.cycle_s)
        segment = int(np.searchsorted(self.boundaries_s, horizon_s, side="right")) - 1
        into_segment_s = horizon_s - self.boundaries_s[segment]
        within_cycle = self._cumulative_at_start[segment] + self.rates_rps[segment] * into_segment_s
        return whole_cycles * (self._mass_per_cycle or 0.0) + within_cycle

    def sample_arrival_times(self, num_requests: int, rng: np.random.Generator) -> np.ndarray:
        num_requests = count("num_requests", num_requests)
        times = self._times(np.cumsum(_unit_mean_gaps(num_requests, self.cv, rng)))
        # Rounding at segment edges may put a time a few ulps before its predecessor.
        return np.maximum.accumulate(times) if num_requests else times

    def arrival_time_chunks(self, num_requests: int, rng: np.random.Generator, chunk: int) -> Iterator[np.ndarray]:
        """``sample_arrival_times`` in blocks of ``chunk`` (the same draws and values; the
        running maximum continues across blocks)."""
        latest = np.full(1, -np.inf)
        for operational in _unit_rate_time_chunks(num_requests, self.cv, rng, chunk):
            times = np.maximum.accumulate(np.concatenate((latest, self._times(operational))))[1:]
            latest = times[-1:]
            yield times

    def _times(self, operational: np.ndarray) -> np.ndarray:
        """Map unit-rate renewal times through the inverse cumulative intensity, one by one."""
        cycles = np.zeros(operational.size)
        if self._mass_per_cycle is not None:
            cycles, operational = np.divmod(operational, self._mass_per_cycle)
        segment = np.searchsorted(self._cumulative_at_start, operational, side="right") - 1
        segment = np.clip(segment, 0, self.rates_rps.size - 1)
        rate = self.rates_rps[segment]
        mass_into_segment = operational - self._cumulative_at_start[segment]
        offset = np.divide(mass_into_segment, rate, out=np.zeros(operational.size), where=rate > 0)
        times = self.boundaries_s[segment] + offset
        if self.cycle_s is not None:
            times += cycles * self.cycle_s
        return times


class ServeGenRateArrivals(PiecewiseRateArrivals):
    """Arrivals following ServeGen's pooled 14-day m-large load curve (Alibaba production,
    162 clients, 196 req/s mean, 10-minute windows), repeated cyclically.

    ``window_s`` is the simulated length of each 10-minute window (600 = real time; smaller
    compresses the day). ``mean_rate_rps`` rescales all rates so the 14-day mean equals it
    (``None`` keeps the real rates). ``start_window`` starts the replay at that window.
    ``cv`` as in ``PiecewiseRateArrivals``.
    """

    def __init__(
        self,
        *,
        window_s: float = SERVEGEN_RATE_WINDOW_S,
        mean_rate_rps: float | None = None,
        start_window: int = 0,
        cv: float = 1.0,
    ) -> None:
        series = servegen_rate_series()
        num_windows = series.rate_rps.size
        window_s = positive_float("window_s", window_s)
        start_window = count("start_window", start_window)
        if start_window >= num_windows:
            raise ValueError(f"start_window must be < {num_windows}, got {start_window}")
        rates = np.roll(series.rate_rps, -start_window)
        if mean_rate_rps is not None:
            rates = rates * (positive_float("mean_rate_rps", mean_rate_rps) / rates.mean())
        super().__init__(np.arange(num_windows) * window_s, rates, cv=cv, cycle_s=num_windows * window_s)

