"""Cascadia's bi-level scheduler (Cascadia Alg. 1, §3.2-§3.3, App. D).

    θ ← θ₀ (proportional routing, model i gets 1/i of the requests)*
    repeat
        (W, Q) ← derived from (θ, profiled subsample)         # rates reaching each model
        (D, L) ← DeploymentSolver(W, N)                        # lookup tables + MILP (§3.2)
        J ← L + μ max(0, (q_min − Q) / (z₁* − z₂*))            # §3.3
        θ ← RoutingSolver(D)                                   # argmin_θ' J(θ'; D fixed), App. D
    until the best-so-far J is unchanged for K iterations

The routing solver evaluates every threshold vector on the grid with the deployment held
fixed (App. D's upper problem): L(θ', D) = max_i l_i^{D_i}(p_i(θ') · λ) from the replica tables,
Q(θ') from the profile. ``exhaustive`` is App. J's reference: every threshold vector, each with
its own optimal allocation (enumerated, not the MILP).

* Where no allocation of the N GPUs carries θ₀'s loads (the paper does not say what Alg. 1 does
then), servegym starts from the grid's threshold vector nearest θ₀ whose loads some allocation
carries (``start``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from baselines.cascadia.milp import Allocation, InfeasibleAllocationError, brute_force_allocation, solve_allocation
from baselines.cascadia.parallelism import ModelLatencyTable, ParallelismStrategy
from baselines.cascadia.thresholds import QualityProfile, Routing, latency_quality_score, threshold_grid
from envs.scenario import InstanceGroup
from simulator.instance import InstanceConfig


@dataclass(frozen=True)
class CascadePlan:
    """A cascade plan (§3.1): thresholds and the deployment (GPUs and parallelism per model)."""

    rate_rps: float
    routing: Routing
    allocation: Allocation
    strategies: tuple[ParallelismStrategy, ...]
    objective: float  # J
    iterations: int
    runtime_s: float
    objective_history: tuple[float, ...] = ()

    @property
    def thresholds(self) -> tuple[float, ...]:
        return self.routing.thresholds

    @property
    def gpus_by_model(self) -> tuple[int, ...]:
        return self.allocation.gpus_by_model

    @property
    def latency_s(self) -> float:
        return self.allocation.latency_s

    def instance_groups(self, gpu: str, tables: Sequence[ModelLatencyTable]) -> tuple[InstanceGroup, ...]:
        """The deployment as scenario instance groups; a model with no GPUs keeps an empty group
        (Cascade-v0 wants every cascade model named)."""
        groups: list[InstanceGroup] = []
        for table, strategy in zip(tables, self.strategies):
            if strategy.num_replicas == 0:
                groups.append(InstanceGroup(
                    InstanceConfig(engine=table.settings.engine, gpu=gpu, model=table.model, dtype=table.dtype), 0))
            else:
                groups.extend(strategy.instance_groups(gpu, table.model, table.dtype, table.settings.engine))
        return tuple(groups)


class CascadiaPlanner:
    """Alg. 1 for one cascade: ``tables[i]`` is model i's replica tables (smallest model first),
    ``profile`` its profiled scores, ``total_gpus`` the budget N."""

    def __init__(
        self,
        tables: Sequence[ModelLatencyTable],
        total_gpus: int,
        profile: QualityProfile,
        quality_min: float,
        *,
        penalty_mu: float = 100.0,
        threshold_levels: int = 101,
        stable_iterations: int = 3,
        max_iterations: int = 50,
    ) -> None:
        if len(tables) != profile.num_models:
            raise ValueError(f"{len(tables)} latency tables for a profile of {profile.num_models} models")
        if len(tables) < 2:
            raise ValueError(f"a cascade needs at least two models, got {[t.model for t in tables]}")
        if isinstance(total_gpus, bool) or not isinstance(total_gpus, int) or total_gpus < 1:
            raise ValueError(f"total_gpus must be a positive integer, got {total_gpus!r}")
        if not (math.isfinite(quality_min) and 0 <= quality_min <= 100):
            raise ValueError(f"quality_min must be in [0, 100], got {quality_min!r}")
        if not (math.isfinite(penalty_mu) and penalty_mu > 0):
            raise ValueError(f"penalty_mu must be positive, got {penalty_mu!r}")
        for name, value in (("stable_iterations", stable_iterations), ("max_iterations", max_iterations)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.tables = tuple(tables)
        self.total_gpus = total_gpus
        self.profile = profile
        self.quality_min = quality_min
        self.penalty_mu = penalty_mu
        self.grid = threshold_grid(threshold_levels)
        self.stable_iterations = stable_iterations
        self.max_iterations = max_iterations
        self.routings = profile.route_all(self.grid)
        self._reach = np.array([r.reach_fractions for r in self.routings])
        self._quality = np.array([r.quality for r in self.routings])

    # ------------------------------------------------------------------ pieces of Alg. 1
    def objective(self, latency_s: float, quality: float) -> float:
        """J (§3.3) with this planner's q_min, μ and the profile's utopia / nadir."""
        return latency_quality_score(latency_s, quality, self.quality_min, self.profile.utopia, self.profile.nadir, self.penalty_mu)

    def latency_table(self, routing: Routing, rate_rps: float) -> tuple[np.ndarray, list[list[ParallelismStrategy]]]:
        """``l_i(f)`` for every model at the rates ``routing`` sends it (Alg. 1 line 3, §3.2)."""
        rows, strategies = [], []
        for table, reach in zip(self.tables, routing.reach_fractions):
            latency, best = table.latency_by_gpus(reach * rate_rps, self.total_gpus)
            rows.append(latency)
            strategies.append(best)
        return np.array(rows), strategies

    def deploy(self, routing: Routing, rate_rps: float, exhaustive: bool = False) -> tuple[Allocation, tuple[ParallelismStrategy, ...]]:
        """The deployment solver (§3.2): lookup tables, then the MILP (or enumeration)."""
        latency, strategies = self.latency_table(routing, rate_rps)
        allocation = (brute_force_allocation if exhaustive else solve_allocation)(latency, self.total_gpus)
        return allocation, tuple(strategies[i][f] for i, f in enumerate(allocation.gpus_by_model))

    def route(self, rate_rps: float, strategies: Sequence[ParallelismStrategy]) -> tuple[Routing, float]:
        """The routing solver (App. D): argmin over the threshold grid of J with the deployment
        ``strategies`` fixed; returns the routing and its J."""
        latency = np.zeros(len(self.routings))
        for i, (table, strategy) in enumerate(zip(self.tables, strategies)):
            latency = np.maximum(latency, table.strategy_latency_s(strategy, self._reach[:, i] * rate_rps))
        shortfall = np.maximum(0.0, (self.quality_min - self._quality) / (self.profile.utopia - self.profile.nadir))
        scores = latency + self.penalty_mu * shortfall
        best = int(np.argmin(scores))
        return self.routings[best], float(scores[best])

    def routing_for(self, thresholds: Sequence[float]) -> Routing:
        return self.profile.route(thresholds)

    def fewest_gpus(self, rate_rps: float) -> np.ndarray:
        """``[routing, model]``: the fewest GPUs whose lookup-table latency is finite at the load
        each grid routing sends each model (0 for no load, ``inf`` when no strategy of N GPUs
        carries it). Table rows never rise with more GPUs, so a routing is deployable on exactly
        N GPUs iff its row sums to at most N."""
        fewest = np.full(self._reach.shape, np.inf)
        for i, table in enumerate(self.tables):
            rates = self._reach[:, i] * rate_rps
            fewest[rates == 0, i] = 0.0
            for strategy in table.strategies(self.total_gpus):
                carried = np.isfinite(table.strategy_latency_s(strategy, rates)) & (rates > 0)
                fewest[carried, i] = np.minimum(fewest[carried, i], strategy.num_gpus)
        return fewest

    def start(self, rate_rps: float) -> tuple[Routing, tuple[Allocation, tuple[ParallelismStrategy, ...]]]:
        """θ₀ and its deployment: proportional routing (§3.3). Where no allocation of the N GPUs
        carries θ₀'s loads, the grid routing nearest θ₀ (L1 distance of the reach fractions, the
        grid's order breaking ties) among those some allocation carries; raises
        ``InfeasibleAllocationError`` when the grid has none."""
        proportional = self.profile.route(self.profile.proportional_thresholds(self.grid))
        try:
            return proportional, self.deploy(proportional, rate_rps)
        except InfeasibleAllocationError as error:
            deployable = np.flatnonzero(self.fewest_gpus(rate_rps).sum(axis=1) <= self.total_gpus)
            if deployable.size == 0:
                raise InfeasibleAllocationError(
                    f"{error}; no threshold vector of the {len(self.grid)}-level grid sends loads that "
                    f"{self.total_gpus} GPUs carry at {rate_rps:g} req/s either") from None
            distance = np.abs(self._reach[deployable] - np.array(proportional.reach_fractions)).sum(axis=1)
            nearest = self.routings[int(deployable[np.argmin(distance)])]
            return nearest, self.deploy(nearest, rate_rps)

    # ------------------------------------------------------------------ Alg. 1
    def plan(self, rate_rps: float) -> CascadePlan:
        """Alg. 1 at total arrival rate ``rate_rps``."""
        _check_rate(rate_rps)
        started = time.perf_counter()
        routing, deployment = self.start(rate_rps)
        best: tuple[float, Routing, Allocation, tuple[ParallelismStrategy, ...]] | None = None
        history: list[float] = []
        deployments = {routing.thresholds: deployment}
        stable, iterations = 0, 0
        while iterations < self.max_iterations:
            iterations += 1
            if routing.thresholds not in deployments:
                deployments[routing.thresholds] = self.deploy(routing, rate_rps)
            allocation, strategies = deployments[routing.thresholds]
            score = self.objective(allocation.latency_s, routing.quality)
            history.append(score)
            if best is None or score < best[0] - 1e-9:
                best, stable = (score, routing, allocation, strategies), 0
            else:
                stable += 1
            if stable >= self.stable_iterations:
                break
            routing, _ = self.route(rate_rps, strategies)
        assert best is not None
        score, routing, allocation, strategies = best
        return CascadePlan(rate_rps, routing, allocation, strategies, score, iterations, time.perf_counter() - started, tuple(history))

    def exhaustive(self, rate_rps: float) -> CascadePlan:
        """App. J: every threshold vector on the grid with its own optimal allocation, by
        enumeration; threshold vectors whose loads no allocation can carry are skipped."""
        _check_rate(rate_rps)
        started = time.perf_counter()
        best: tuple[float, Routing, Allocation, tuple[ParallelismStrategy, ...]] | None = None
        for routing in self.routings:
            try:
                allocation, strategies = self.deploy(routing, rate_rps, exhaustive=True)
            except ValueError:
                continue
            score = self.objective(allocation.latency_s, routing.quality)
            if best is None or score < best[0] - 1e-9:
                best = (score, routing, allocation, strategies)
        if best is None:
            raise ValueError(f"no threshold vector has a feasible deployment at {rate_rps} req/s on {self.total_gpus} GPUs")
        score, routing, allocation, strategies = best
        return CascadePlan(rate_rps, routing, allocation, strategies, score, len(self.routings), time.perf_counter() - started)


def _check_rate(rate_rps: float) -> None:
    if isinstance(rate_rps, bool) or not isinstance(rate_rps, (int, float)) or not (math.isfinite(rate_rps) and rate_rps > 0):
        raise ValueError(f"rate_rps must be a positive finite number, got {rate_rps!r}")
