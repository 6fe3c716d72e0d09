"""Goodput by simulation: the largest request rate at which a deployment still meets its SLO.

Cauchy profiles each combo's goodput "under given SLA" (Cauchy §3.3.1, SLOs of §3.3.3).
Here goodput is the largest Poisson rate at which at least ``attainment`` (default 90%) of
the requests of a run meet the SLO (TTFT, and the TBT target checked against TPOT as
``simulator.metrics`` does). The run lasts ``duration_s`` seconds of arrivals (at least
``min_requests`` requests), and longer when the SLO has a TTFT target T: a rate ``rel_tol``
above the deployment's capacity grows its queue by about ``rel_tol`` seconds of work per
second, so its requests start missing T only after about T / ``rel_tol`` seconds. A run
shorter than that passes an overloaded rate (the DailyMail combo <1xH800-SXM,1xA800-PCIe>,
T = 10 s, passed 51.5 req/s in 120 s although it completes at most 47.8 req/s); so a run lasts
at least ``backlog_horizons`` x T / ``rel_tol`` seconds, and a rate above capacity fails. The
search brackets the rate by doubling (or halving) from ``start_rps`` and then bisects until the
bracket is within ``rel_tol``; the answer is the bracket's lower end (a rate that passed). A
deployment failing even at ``floor_rps`` has goodput 0. Every run uses the same seed, so
neighbouring rates see the same length draws.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from simulator.cluster import Cluster
from simulator.metrics import MetricsSummary, summarize
from simulator.request import SLO
from simulator.workloads import LengthSampler, PoissonArrivals, generate_requests


@dataclass(frozen=True)
class GoodputSearch:
    """How goodput is measured (see the module docstring)."""

    attainment: float = 0.9
    duration_s: float = 120.0
    min_requests: int = 300
    start_rps: float = 1.0
    floor_rps: float = 1.0 / 16.0
    ceiling_rps: float = 1024.0
    rel_tol: float = 0.05
    seed: int = 0
    backlog_horizons: float = 3.0  # run length, in units of T / rel_tol (module docstring); 0: duration_s only

    def __post_init__(self) -> None:
        if not 0.0 < self.attainment <= 1.0:
            raise ValueError(f"attainment must be in (0, 1], got {self.attainment!r}")
        for name in ("duration_s", "start_rps", "floor_rps", "ceiling_rps", "rel_tol"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive finite number, got {value!r}")
        if not (isinstance(self.backlog_horizons, (int, float)) and math.isfinite(self.backlog_horizons)
                and self.backlog_horizons >= 0):
            raise ValueError(f"backlog_horizons must be a finite number >= 0, got {self.backlog_horizons!r}")
        if not self.floor_rps <= self.start_rps <= self.ceiling_rps:
            raise ValueError(
                f"need floor_rps <= start_rps <= ceiling_rps, got {self.floor_rps}, {self.start_rps}, {self.ceiling_rps}"
            )
        for name, lowest, kind in (("min_requests", 1, "positive"), ("seed", 0, "non-negative")):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
                raise ValueError(f"{name} must be a {kind} integer, got {value!r}")

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    def run_duration_s(self, slo: SLO) -> float:
        """Seconds of arrivals in one run under ``slo`` (the module docstring says why a TTFT
        target lengthens it)."""
        if slo.ttft_s is None:
            return self.duration_s
        return max(self.duration_s, self.backlog_horizons * slo.ttft_s / self.rel_tol)

    def num_requests(self, rate_rps: float, slo: SLO) -> int:
        return max(self.min_requests, math.ceil(rate_rps * self.run_duration_s(slo)))


def max_goodput_rps(attainment_at: Callable[[float], float], search: GoodputSearch) -> float:
    """Largest rate (to ``search.rel_tol``) with ``attainment_at(rate) >= search.attainment``;
    0.0 when ``floor_rps`` already fails. Raises when even ``ceiling_rps`` passes (the
    ceiling is too low to bracket the goodput)."""

    def passes(rate: float) -> bool:
        return attainment_at(rate) >= search.attainment

    rate = search.start_rps
    if passes(rate):
        low = rate
        while True:
            high = low * 2.0
            if high > search.ceiling_rps:
                raise ValueError(f"SLO still met at {low:g} req/s; raise ceiling_rps={search.ceiling_rps:g}")
            if not passes(high):
                break
            low = high
    else:
        high = rate
        while True:
            low = high / 2.0
            if low < search.floor_rps:
                return 0.0
            if passes(low):
                break
            high = low
    while high > low * (1.0 + search.rel_tol):
        middle = math.sqrt(low * high)
        if passes(middle):
            low = middle
        else:
            high = middle
    return low


def run_poisson(
    build_cluster: Callable[[], Cluster],
    lengths: LengthSampler,
    slo: SLO,
    rate_rps: float,
    search: GoodputSearch,
) -> MetricsSummary:
    """A fresh cluster serving Poisson arrivals at ``rate_rps`` for ``search.run_duration_s(slo)``
    seconds (at least ``search.min_requests``), summarised with its cost over the whole run."""
    rng = np.random.default_rng(search.seed)
    requests = generate_requests(PoissonArrivals(rate_rps), lengths, search.num_requests(rate_rps, slo), rng, slo=slo)
    cluster = build_cluster()
    outcomes = cluster.run(requests)
    return summarize(outcomes, duration_s=cluster.events.now_s, cost_usd=cluster.cost_usd())


def slo_attainment(
    build_cluster: Callable[[], Cluster],
    lengths: LengthSampler,
    slo: SLO,
    rate_rps: float,
    search: GoodputSearch,
) -> float:
    """Share of requests meeting ``slo`` in ``run_poisson``."""
    return run_poisson(build_cluster, lengths, slo, rate_rps, search).slo_attainment
