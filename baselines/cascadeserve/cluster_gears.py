"""CascadeServe's online gear switching (CascadeServe §3 "Gear plan operation", §5) driving a
simulator cluster directly, for experiments that serve a request list through
``simulator.routers.cascade.CascadeRouter`` rather than through servegym/Cascade-v0.

Every ``interval_s`` (100 ms, §3) the producer counts the arrivals of the last interval, looks
up the gear of that QPS and sets its thresholds (and the stage requests enter, its cascade's
first: 0 except for model switching's single models) on the router, unless §5's hysteresis keeps the
current gear (qps < α·Q₀, Q₀ the requests waiting at the cascade's first model). Ticks stop at
the last arrival; the last gear then stays. The gear's minimum queue length (§4.5) is not
applied: servegym instances batch continuously (as in the ``cascadeserve`` policy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from baselines.cascadeserve.cascade_search import thresholds
from baselines.cascadeserve.planner import GearPlan
from baselines.cascadeserve.policy import ALPHA, keep_gear
from simulator.routers.cascade import CascadeRouter
from simulator.cluster import Cluster

MEASUREMENT_INTERVAL_S = 0.1  # §3: "counting the number of queries arriving over a fixed interval (e.g., 100ms)"


def gear_thresholds(plan: GearPlan, gear: int) -> tuple[float, ...]:
    """The router thresholds (0-100) of gear ``gear``'s cascade."""
    return tuple(thresholds(plan.gears[gear].cascade.levels, plan.threshold_levels))


def single_measurement_gear(plan: GearPlan, accuracy_slo: float) -> int:
    """App. C.2's online mapping for one measured QPS value (a burst): a linear factor can map it
    onto any range, and the accuracy SLO then rests on that range's gear alone; the cheapest
    such gear is the highest-QPS one whose validation accuracy meets the SLO."""
    meeting = [i for i, g in enumerate(plan.gears) if g.cascade.quality >= accuracy_slo - 1e-9]
    if not meeting:
        raise ValueError(f"no gear of the plan reaches the accuracy SLO {accuracy_slo!r}")
    return max(meeting)


def interval_qps(arrivals_s: Sequence[float], interval_s: float = MEASUREMENT_INTERVAL_S) -> np.ndarray:
    """The QPS the producer measures in each interval (k·Δ, (k+1)·Δ] up to the last arrival."""
    times = np.asarray(arrivals_s, dtype=np.float64)
    if times.ndim != 1 or times.size == 0 or not np.all(np.isfinite(times)) or np.any(times < 0):
        raise ValueError(f"arrivals_s must be a non-empty list of finite times >= 0, got {list(arrivals_s)[:8]}")
    if not (math.isfinite(interval_s) and interval_s > 0):
        raise ValueError(f"interval_s must be positive and finite, got {interval_s!r}")
    bins = np.maximum(np.ceil(times / interval_s).astype(np.int64) - 1, 0)
    return np.bincount(bins, minlength=int(bins.max()) + 1) / interval_s


class GearSwitcher:
    """Schedules the producer's measurements on ``cluster``'s event queue; ``gear_trace`` holds
    the gear chosen at each tick (the first entry is the gear at t = 0, for 0 QPS)."""

    def __init__(
        self,
        cluster: Cluster,
        router: CascadeRouter,
        plan: GearPlan,
        arrivals_s: Sequence[float],
        interval_s: float = MEASUREMENT_INTERVAL_S,
        alpha: float = ALPHA,
    ) -> None:
        if tuple(router.models) != tuple(plan.models):
            raise ValueError(f"the router serves {list(router.models)}, the plan is for {list(plan.models)}")
        if not (math.isfinite(alpha) and alpha >= 0):
            raise ValueError(f"alpha must be a finite number >= 0, got {alpha!r}")
        self.cluster, self.router, self.plan, self.alpha = cluster, router, plan, float(alpha)
        self.interval_s = interval_s
        self.qps = interval_qps(arrivals_s, interval_s)
        self.gear = plan.gear_index(0.0)
        self.gear_trace = [self.gear]
        self.set_gear(self.gear)
        cluster.events.schedule(interval_s, self._tick, 0)

    def set_gear(self, gear: int) -> None:
        self.gear = gear
        self.router.set_thresholds(gear_thresholds(self.plan, gear))
        self.router.set_entry_stage(self.plan.gears[gear].cascade.entry_stage)

    def first_queue_length(self) -> int:
        """Q₀: requests waiting at the instances of the cascade's first model."""
        first = self.plan.models[self.plan.gears[self.gear].cascade.entry_stage]
        return sum(len(i.waiting) for i in self.cluster.instances.values() if i.model.name == first)

    def _tick(self, index: int) -> None:
        qps = float(self.qps[index])
        if not keep_gear(qps, self.first_queue_length(), self.alpha):
            self.set_gear(self.plan.gear_index(qps))
        self.gear_trace.append(self.gear)
        if index + 1 < len(self.qps):
            self.cluster.events.schedule((index + 2) * self.interval_s, self._tick, index + 1)
