"""The gear planner: CascadeServe Alg. 1 (§4.1), the error-driven alternating loop over
SP1 cascade search (§4.2), SP2 workload adaption (§4.3), SP3 hardware mapping (§4.4: greedy
pruning with eq. 4, load balancing with eq. 1-3) and SP4 batch tuning (§4.5), with either SLO of
§3: a latency SLO (maximise accuracy subject to p95 latency <= SLO at every QPS) or an accuracy SLO
(minimise latency subject to the plan's time-weighted accuracy >= SLO, App. C.2; the QPS ranges
weighted by a Zipf law unless measured weights are given; ``accuracy_slo`` has the pieces).

Each module takes the error of the module after it (or None) and returns None ("ok") or an
error naming the QPS range (and, from SP4, the bottleneck model). On an error the previous module
resolves it: SP3 adds a replica of the bottleneck model (a minimum replica count for pruning),
SP2 downgrades the range's cascade, SP1 gives up and ``PlanningInfeasibleError`` reaches the user
(Alg. 1 lines 6-7). When pruning fails (§4.4: "no placement can realize the given cascade") SP3
names the range to downgrade: ranges join the placement in order of their time share (App. C.2:
frequent ranges keep their cascades) and the first that cannot join is named
(``_Planner.unplaceable_range``), so a memory conflict costs the least frequent range involved,
not the range that needs the most GPU time. Convergence: our SP1 samples once and SP2 only changes its assignment on an
error, so once SP4 accepts a plan another cycle would reproduce it; the loop stops there.

With an accuracy SLO, SP2 starts from the least-load assignment meeting the SLO
(``accuracy_slo.assign_for_accuracy``) instead of the most accurate cascade everywhere; an error
at range i caps that range below its cascade and SP2 re-solves (other, lower-QPS ranges may take
costlier cascades to keep the plan's accuracy); when no assignment within the caps meets the SLO
the error reaches SP1. SP4 has no latency target: it picks the queue length with the lowest p95
and never errors (SP3's eq. 1-3 at u <= 100% already refuse loads the placement cannot carry).

Initialisation (§4.1): the placement is every model on every device and batch sizes are 1.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from baselines.cascadeserve.accuracy_slo import (
    assign_for_accuracy,
    fastest_min_queue_length,
    normalized_weights,
    plan_accuracy,
    zipf_weights,
)
from baselines.cascadeserve.batch_tuning import tune_min_queue_length
from baselines.cascadeserve.cascade_search import CascadeStats, pareto_front, search_cascades
from baselines.cascadeserve.load_balancer import LoadBalancingError, balance_load, min_utilization
from baselines.cascadeserve.profiles import Device, ModelProfile, Replica, full_replication
from baselines.cascadeserve.pruning import PlacementError, prune_placement
from baselines.cascadeserve.workload_adaption import downgrade, initial_assignment, qps_ranges

_LP_SLACK = 1e-6  # relative slack when re-solving eq. 1-3 at the minimal u


class PlanningInfeasibleError(ValueError):
    """Alg. 1 line 7: the SLO (latency or accuracy) cannot be met on the given hardware."""


@dataclass(frozen=True)
class PlanningProblem:
    """Inputs of Alg. 1: ordered models (smallest first) with profiles, devices, validation scores
    (samples x models, 0-100), threshold discretisation, the QPS spectrum and one SLO (§3): the
    p95 ``latency_slo_s`` or, with ``latency_slo_s=None``, ``accuracy_slo`` (a mean score, 0-100).
    ``qps_weights``: each range's time share for the plan's accuracy (App. C.2; default Zipf).
    ``fixed_placement`` skips pruning (SP3 then only load-balances on it)."""

    models: tuple[str, ...]
    profiles: tuple[ModelProfile, ...]
    devices: tuple[Device, ...]
    scores: np.ndarray
    threshold_levels: int
    qps_max: float
    n_ranges: int
    latency_slo_s: float | None
    num_cascade_samples: int = 200
    fixed_placement: tuple[Replica, ...] | None = None
    sim_duration_s: float = 20.0
    accuracy_slo: float | None = None
    qps_weights: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if tuple(p.name for p in self.profiles) != tuple(self.models):
            raise ValueError(f"profiles {[p.name for p in self.profiles]} must match models {list(self.models)}")
        if self.scores.ndim != 2 or self.scores.shape[1] != len(self.models) or self.scores.shape[0] == 0:
            raise ValueError(f"scores must be (samples x {len(self.models)}), got shape {self.scores.shape}")
        if isinstance(self.threshold_levels, bool) or not isinstance(self.threshold_levels, int) or self.threshold_levels < 2:
            raise ValueError(f"threshold_levels must be an integer >= 2, got {self.threshold_levels!r}")
        if (self.latency_slo_s is None) == (self.accuracy_slo is None):
            raise ValueError(
                f"give exactly one SLO: latency_slo_s={self.latency_slo_s!r}, accuracy_slo={self.accuracy_slo!r}"
            )
        if self.latency_slo_s is not None and not (
            isinstance(self.latency_slo_s, (int, float)) and math.isfinite(self.latency_slo_s) and self.latency_slo_s > 0
        ):
            raise ValueError(f"latency_slo_s must be a positive finite number, got {self.latency_slo_s!r}")
        if self.accuracy_slo is not None and not (
            isinstance(self.accuracy_slo, (int, float)) and not isinstance(self.accuracy_slo, bool)
            and math.isfinite(self.accuracy_slo) and 0 <= self.accuracy_slo <= 100
        ):
            raise ValueError(f"accuracy_slo must be a number in [0, 100], got {self.accuracy_slo!r}")
        qps_ranges(self.qps_max, self.n_ranges)
        if self.qps_weights is not None:
            normalized_weights(self.qps_weights, self.n_ranges)

    def range_weights(self) -> np.ndarray:
        """Each QPS range's time share (App. C.2): ``qps_weights`` normalised, else Zipf."""
        if self.qps_weights is None:
            return zipf_weights(self.n_ranges)
        return normalized_weights(self.qps_weights, self.n_ranges)


@dataclass(frozen=True)
class Gear:
    """The gear of QPS range (qps_low, qps_high]: its cascade, the first model's minimum queue
    length, the load balancer's minimal utilisation and the simulated p95 at qps_high."""

    qps_low: float
    qps_high: float
    cascade: CascadeStats
    min_queue_length: int
    utilization: float
    latency_p95_s: float


@dataclass(frozen=True)
class GearPlan:
    """A gear per QPS range plus the placement every gear shares (§4)."""

    models: tuple[str, ...]
    threshold_levels: int
    gears: tuple[Gear, ...]
    placement: tuple[Replica, ...]
    planning_time_s: float
    submodule_calls: int
    qps_weights: tuple[float, ...] = ()

    def accuracy(self) -> float:
        """App. C.2: the gears' accuracies weighted by their ranges' time shares."""
        if len(self.qps_weights) != len(self.gears):
            raise ValueError(f"the plan has {len(self.gears)} gears but {len(self.qps_weights)} QPS weights")
        return plan_accuracy([g.cascade.quality for g in self.gears], self.qps_weights)

    def gear_index(self, qps: float) -> int:
        """The range holding ``qps``; QPS above qps_max use the last gear."""
        if not (math.isfinite(qps) and qps >= 0):
            raise ValueError(f"qps must be a finite number >= 0, got {qps!r}")
        width = self.gears[0].qps_high - self.gears[0].qps_low
        return min(int(qps // width), len(self.gears) - 1)

    def replica_counts(self) -> dict[str, int]:
        return {m: sum(r.model == m for r in self.placement) for m in self.models}


@dataclass
class _Error:
    range_index: int
    model: str | None = None


@dataclass
class _State:
    front: list[CascadeStats] = field(default_factory=list)
    assignment: list[int] = field(default_factory=list)
    caps: list[int] = field(default_factory=list)
    min_replicas: dict[str, int] = field(default_factory=dict)
    placement: tuple[Replica, ...] = ()
    utilizations: list[float] = field(default_factory=list)
    gears: list[Gear] = field(default_factory=list)


class _Planner:
    def __init__(self, problem: PlanningProblem, rng: np.random.Generator,
                 candidates: Sequence[CascadeStats] | None) -> None:
        self.p = problem
        self.rng = rng
        self.candidates = None if candidates is None else _checked_candidates(problem, candidates)
        self.ranges = qps_ranges(problem.qps_max, problem.n_ranges)
        self.weights = problem.range_weights()
        self.priority = sorted(range(problem.n_ranges), key=lambda i: (-float(self.weights[i]), i))
        self.state = _State()
        self.u_cache: dict[tuple, float] = {}
        """The pruning's minimal utilisations, shared by every ``prune`` of this plan."""

    def demands(self) -> list[dict[str, float]]:
        s = self.state
        return [s.front[a].demand_qps(self.p.models, high) for a, (_, high) in zip(s.assignment, self.ranges)]

    def prune(self, ranges: Sequence[int], demands: Sequence[dict[str, float]],
              min_replicas: dict[str, int]) -> tuple[Replica, ...] | None:
        """§4.4's greedy pruning of the full placement for the cascades of ``ranges``; None when
        no placement realises them (with at least ``min_replicas`` replicas per model)."""
        p = self.p
        full = full_replication(p.profiles, p.devices)
        if any(n > sum(r.model == m for r in full) for m, n in min_replicas.items()):
            return None
        try:
            return prune_placement(full, p.profiles, p.devices, [demands[i] for i in ranges], min_replicas,
                                   self.u_cache)
        except PlacementError:
            return None

    def unplaceable_range(self, demands: Sequence[dict[str, float]], error: _Error | None) -> _Error:
        """The range SP3 names when pruning fails (§4.4: "no placement can realize the given
        cascade"). Ranges join the placement in order of their time share (App. C.2: a downgrade
        is weighed by how often its range occurs; the lower QPS first on ties), the extra
        replicas an SP4 ``error`` asked for from when its range joins; the first range whose
        cascade cannot join is named. When it already has the cheapest cascade, the latest
        joined range before it that SP2 can still downgrade is named instead (none: it, and
        SP2 passes the error on)."""
        s = self.state
        owner = None if error is None else error.range_index
        joined: list[int] = []
        for i in self.priority[:-1]:
            joined.append(i)
            constraint = s.min_replicas if owner is None or owner in joined else {}
            if self.prune(joined, demands, constraint) is None:
                break
        else:
            joined.append(self.priority[-1])
        downgradable = [j for j in reversed(joined) if s.assignment[j] > 0]
        return _Error(downgradable[0] if downgradable else joined[-1])

    def search_cascades(self, error: _Error | None) -> _Error | None:
        """SP1 (§4.2): sampled cascades, or the given candidates, cut to their Pareto front; an
        error here means even the cheapest cascade misses the latency SLO, or no
        assignment of cascades reaches the accuracy SLO."""
        if error is not None:
            if self.p.accuracy_slo is not None:
                raise PlanningInfeasibleError(self.accuracy_error(error))
            raise PlanningInfeasibleError(
                f"latency SLO {self.p.latency_slo_s:g} s unattainable at {self.ranges[error.range_index][1]:g} QPS "
                f"even with the cheapest cascade on {len(self.p.devices)} GPUs"
            )
        if not self.state.front:
            p = self.p
            self.state.front = (
                search_cascades(p.scores, p.threshold_levels, p.profiles, p.num_cascade_samples, self.rng)
                if self.candidates is None else pareto_front(self.candidates)
            )
        return None

    def accuracy_error(self, error: _Error) -> str:
        s, p = self.state, self.p
        best = s.front[-1].quality
        if best < p.accuracy_slo - 1e-9:
            return (f"accuracy SLO {p.accuracy_slo:g} unattainable: the most accurate cascade reaches {best:.2f} "
                    f"on the validation samples")
        return (f"accuracy SLO {p.accuracy_slo:g} unattainable on {len(p.devices)} GPUs: the QPS range "
                f"({self.ranges[error.range_index][0]:g}, {self.ranges[error.range_index][1]:g}] cannot carry a "
                f"cascade accurate enough (cascade index caps {s.caps})")

    def assign_for_accuracy(self, error: _Error | None) -> _Error | None:
        """SP2 with an accuracy SLO (``accuracy_slo``): the least-load assignment meeting the SLO;
        an error at range i caps range i below its current cascade, then SP2 solves again."""
        s = self.state
        if not s.caps:
            s.caps = [len(s.front) - 1] * self.p.n_ranges
        elif error is None:
            return None
        if error is not None:
            if s.assignment[error.range_index] == 0:
                return error
            s.caps[error.range_index] = s.assignment[error.range_index] - 1
        assignment = assign_for_accuracy(s.front, self.weights, self.ranges, self.p.accuracy_slo, s.caps)
        if assignment is None:
            return error or _Error(0)
        s.assignment = assignment
        return None

    def assign_cascades(self, error: _Error | None) -> _Error | None:
        """SP2 (§4.3): start from the most accurate cascade, downgrade the erroring range."""
        if self.p.accuracy_slo is not None:
            return self.assign_for_accuracy(error)
        s = self.state
        if not s.assignment:
            s.assignment = initial_assignment(len(s.front), self.p.n_ranges)
        if error is None:
            return None
        lowered = downgrade(s.assignment, error.range_index)
        if lowered is None:
            return error
        s.assignment, s.min_replicas = lowered, {}
        return None

    def place_models(self, error: _Error | None) -> _Error | None:
        """SP3 (§4.4): prune the full placement (eq. 4), then check eq. 1-3 for every range."""
        s, p = self.state, self.p
        if error is not None:
            if p.fixed_placement is not None or error.model is None:
                return error
            s.min_replicas[error.model] = sum(r.model == error.model for r in s.placement) + 1
        demands = self.demands()
        if p.fixed_placement is not None:
            s.placement = tuple(p.fixed_placement)
        else:
            placement = self.prune(range(p.n_ranges), demands, s.min_replicas)
            if placement is None:
                return self.unplaceable_range(demands, error)
            s.placement = placement
        s.utilizations = []
        for i, demand in enumerate(demands):
            try:
                s.utilizations.append(min_utilization(s.placement, demand, p.profiles))
            except LoadBalancingError:
                return _Error(i)
        return None

    def tune_batch_sizes(self, error: _Error | None) -> _Error | None:
        """SP4 (§4.5): minimum queue length per range by simulation."""
        s, p = self.state, self.p
        gears = []
        for i, (demand, (low, high)) in enumerate(zip(self.demands(), self.ranges)):
            cascade = s.front[s.assignment[i]]
            bound = max(s.utilizations[i] * (1 + _LP_SLACK), 1e-9)
            loads = balance_load(s.placement, demand, p.profiles, bound)
            if loads is None:
                return _Error(i)
            if p.latency_slo_s is None:
                length, sim = fastest_min_queue_length(
                    cascade, p.models, p.profiles, loads, high, p.scores, p.threshold_levels, p.sim_duration_s
                )
            else:
                tuned, sim = tune_min_queue_length(
                    cascade, p.models, p.profiles, loads, high, p.latency_slo_s, p.scores, p.threshold_levels, p.sim_duration_s
                )
                if tuned is None:
                    return _Error(i, sim.bottleneck())
                length = tuned
            gears.append(Gear(low, high, cascade, length, s.utilizations[i], sim.latency_p95_s))
        s.gears = gears
        return None


def _checked_candidates(problem: PlanningProblem, candidates: Sequence[CascadeStats]) -> list[CascadeStats]:
    stages = len(problem.models)
    bad = [c for c in candidates if len(c.levels) != stages - 1 or len(c.stage_shares) != stages]
    if not candidates or bad:
        raise ValueError(
            f"candidates must be a non-empty list of cascades over the {stages} models {list(problem.models)}, "
            f"got {len(candidates)} with mismatched ones {[c.levels for c in bad]}"
        )
    return list(candidates)


def plan_gears(problem: PlanningProblem, rng: np.random.Generator,
               candidates: Sequence[CascadeStats] | None = None) -> GearPlan:
    """Alg. 1: alternate the four submodules, backtracking on errors, until a plan is accepted.
    ``candidates`` replaces SP1's random sampling (§4.2) by a fixed set of cascades (model
    switching's single models, §6.6 "No cascade"); their Pareto front is used."""
    planner = _Planner(problem, rng, candidates)
    modules = [planner.search_cascades, planner.assign_cascades, planner.place_models, planner.tune_batch_sizes]
    start = time.perf_counter()
    current, error, calls = 0, None, 0
    while True:
        error = modules[current](error)
        calls += 1
        if error is None and current == len(modules) - 1:
            break
        current = current + 1 if error is None else current - 1
    s = planner.state
    return GearPlan(
        problem.models, problem.threshold_levels, tuple(s.gears), s.placement, time.perf_counter() - start, calls,
        tuple(float(w) for w in planner.weights),
    )
