"""Cascadia's re-scheduling under a shifting workload (Cascadia §4.4 "Re-scheduling",
footnote 5, App. G), driving a running ``simulator.cluster.Cluster`` and its
``simulator.routers.cascade.CascadeRouter`` directly (Cascade-v0 keeps its deployment fixed).

(i) Monitor: every ``window_s`` the workload of the last window is recorded (``WorkloadStats``):
arrival rate and mean prompt / output tokens over every arrival of the window, and, for
complexity, the scores on every model of a random subsample (footnote 5: 5% of the requests,
routed through all model types; the extra load of that subsample is not simulated).
(ii) A shift is significant (``ShiftDetector``) when the rate or a mean length moves by more
than ``relative_shift`` from what the current plan was made for, or the subsample's mean score
on the first model by more than ``complexity_z`` standard errors; quiet windows are pooled into
that reference ("incorporating recent historical data").
(iii) Then Alg. 1 runs again (``CascadiaPlanner.plan``) at the window's measured rate, with the
window's subsample as the quality profile and the latency tables of the cached length
distribution nearest to the window's mean lengths (the tables are precomputed, §3.2); it
re-plans thresholds, GPUs per model and each model's parallelism ("Overall scheduling
process"). With ``thresholds_only`` only the routing half re-runs (App. D's argmin over
thresholds with the initial deployment held), applied at once.

Re-deployment costs (App. G): the algorithm's runtime is modelled as ``planning_delay_s``
during which the current plan keeps serving; then a ``RollingUpdate``: replicas whose
(model, TP, PP, dtype) the new plan keeps are untouched; the others are reconfigured one at a
time (a drained replica's queued requests move to its model's other serving replicas, its
running ones finish where they are; new replicas serve after weight loading plus the cluster's
provisioning time). A replica is never drained while it is the last serving one of a model the
current thresholds still send requests to; the new thresholds apply as soon as every model
they send requests to has a serving replica.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from baselines.cascadia.parallelism import ModelLatencyTable
from baselines.cascadia.planner import CascadePlan, CascadiaPlanner
from baselines.cascadia.thresholds import QualityProfile
from envs.scenario import InstanceGroup
from simulator.routers.cascade import CascadeRouter
from simulator.cluster import Cluster
from simulator.instance import Instance, InstanceConfig, Lifecycle
from simulator.request import Request
from simulator.sequence import Residency
from simulator.workloads import PARAMETRIC_PRESETS


# ----------------------------------------------------------------------------- monitoring (§4.4 (i)-(ii))
@dataclass(frozen=True)
class WorkloadStats:
    """What the monitor records about a window (§4.4 (i)): rate, mean lengths, the subsample's
    scores (subsampled requests x models, footnote 5)."""

    rate_rps: float
    mean_prompt_tokens: float
    mean_output_tokens: float
    scores: np.ndarray

    @staticmethod
    def of(requests: Sequence[Request], duration_s: float, subsampled: Sequence[bool], models: Sequence[str]) -> WorkloadStats:
        """The window's statistics; ``subsampled[k]`` marks the requests whose scores on every
        model of ``models`` are recorded."""
        if not requests:
            return WorkloadStats(0.0, 0.0, 0.0, np.zeros((0, len(models))))
        scores = [[r.quality_by_model[m] for m in models] for r, s in zip(requests, subsampled) if s]
        return WorkloadStats(
            len(requests) / duration_s,
            float(np.mean([r.prompt_tokens for r in requests])),
            float(np.mean([r.output_tokens for r in requests])),
            np.array(scores, dtype=np.float64).reshape(-1, len(models)),
        )


@dataclass
class ShiftDetector:
    """§4.4 (ii): is a window's workload significantly different from the reference (what the
    current plan was made for)? Rate or a mean length off by more than ``relative_shift``, or
    the first model's mean subsample score off by more than ``complexity_z`` standard errors
    (tested when both sides have ``min_subsample`` scores)."""

    reference: WorkloadStats
    relative_shift: float = 0.25
    complexity_z: float = 4.0
    min_subsample: int = 20
    windows_pooled: int = 1

    def reasons(self, window: WorkloadStats) -> list[str]:
        ref = self.reference
        found = [
            name for name, now, before in (
                ("rate", window.rate_rps, ref.rate_rps),
                ("prompt_tokens", window.mean_prompt_tokens, ref.mean_prompt_tokens),
                ("output_tokens", window.mean_output_tokens, ref.mean_output_tokens),
            ) if abs(now - before) > self.relative_shift * before
        ]
        a, b = window.scores[:, 0], ref.scores[:, 0]
        if min(a.size, b.size) >= self.min_subsample:
            se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
            if se > 0 and abs(a.mean() - b.mean()) > self.complexity_z * se:
                found.append("complexity")
        return found

    def observe(self, window: WorkloadStats) -> list[str]:
        """Compare, then make the window the new reference (a shift) or pool it into it."""
        found = self.reasons(window)
        if found:
            self.reference, self.windows_pooled = window, 1
        else:
            n = self.windows_pooled
            ref = self.reference
            self.reference = WorkloadStats((ref.rate_rps * n + window.rate_rps) / (n + 1),
                                           (ref.mean_prompt_tokens * n + window.mean_prompt_tokens) / (n + 1),
                                           (ref.mean_output_tokens * n + window.mean_output_tokens) / (n + 1),
                                           np.vstack([ref.scores, window.scores]))
            self.windows_pooled = n + 1
        return found


def nearest_lengths(stats: WorkloadStats, candidates: Sequence[str]) -> str:
    """The cached length distribution whose (prompt, output) means are closest, relative."""
    def distance(name: str) -> float:
        prompt, output = PARAMETRIC_PRESETS[name]
        return abs(math.log(stats.mean_prompt_tokens / prompt)) + abs(math.log(stats.mean_output_tokens / output))
    return min(candidates, key=distance)


# ----------------------------------------------------------------------------- rolling update (App. G)
def config_key(config: InstanceConfig) -> tuple[str, int, int, str]:
    return (config.model, config.tp, config.pp, config.dtype)


def needed_models(models: Sequence[str], thresholds: Sequence[float]) -> set[str]:
    """Models the thresholds send requests to: the first, and stage i + 1 while h_i > 0."""
    needed = {models[0]}
    for stage, h in enumerate(thresholds):
        if h <= 0:
            break
        needed.add(models[stage + 1])
    return needed


class RollingUpdate:
    """Moves a cluster to ``target`` groups and ``thresholds`` one replica at a time (App. G
    "rolling updates"; rules in the module docstring); ``step`` runs every ``tick_s`` until done."""

    def __init__(self, cluster: Cluster, router: CascadeRouter, target: Sequence[InstanceGroup],
                 thresholds: Sequence[float], tick_s: float = 0.5) -> None:
        self.cluster, self.router, self.tick_s = cluster, router, tick_s
        self.target = Counter({config_key(g.config): g.count for g in target if g.count > 0})
        self.configs = {config_key(g.config): g.config for g in target}
        served = {model for model, *_ in self.target}
        self.thresholds = _clamped(router.models, thresholds, served)
        self.started_s = cluster.events.now_s
        self.finished_s: float | None = None
        self.thresholds_applied_s: float | None = None
        self.draining: Instance | None = None
        self.moved_requests = 0
        self.removed = 0
        self.added = 0
        self.abandoned = False
        self.cancelled = False

    def _live(self) -> list[Instance]:
        return [i for i in self.cluster.instances.values() if i.lifecycle in (Lifecycle.SERVING, Lifecycle.STARTING)]

    def _serving(self, model: str) -> list[Instance]:
        return [i for i in self.cluster.instances.values() if i.lifecycle == Lifecycle.SERVING and i.model.name == model]

    def _free_gpus(self, gpu: str) -> int:
        return self.cluster.gpu_inventory[gpu] - self.cluster.gpus_in_use[gpu]

    def step(self) -> bool:
        """One tick; True once the cluster matches the target and the thresholds are applied."""
        if self.thresholds_applied_s is None and all(self._serving(m) for m in needed_models(self.router.models, self.thresholds)):
            self.router.set_thresholds(self.thresholds)
            self.thresholds_applied_s = self.cluster.events.now_s
        if self.draining is not None and self.draining.lifecycle == Lifecycle.STOPPED:
            self.draining = None
        live = self._live()
        current = Counter(config_key(i.config) for i in live)
        for key in sorted((self.target - current).elements(), key=lambda k: -self.configs[k].num_gpus):
            if self.configs[key].num_gpus <= self._free_gpus(self.configs[key].gpu):
                self.cluster.deploy(self.configs[key])
                self.added += 1
                current[key] += 1
        live = self._live()  # with the replicas deployed just now: they are starting, so nothing is stuck yet
        surplus = current - self.target
        if surplus and self.draining is None:
            victim = self._removable(live, surplus)
            if victim is not None:
                self._drain(victim)
            elif not any(i.lifecycle == Lifecycle.STARTING for i in live):
                self.abandoned = True  # nothing can free GPUs without cutting a needed model off
                self.target = current
                self.thresholds = _clamped(self.router.models, self.thresholds, {model for model, *_ in current})
        done = (not (self.target - current) and not (current - self.target) and self.draining is None
                and self.thresholds_applied_s is not None and not any(i.lifecycle == Lifecycle.STARTING for i in live))
        if done:
            self.finished_s = self.cluster.events.now_s
        return done

    def _removable(self, live: list[Instance], surplus: Counter) -> Instance | None:
        needed = needed_models(self.router.models, self.router.thresholds)
        candidates = []
        for instance in live:
            if surplus[config_key(instance.config)] == 0:
                continue
            peers = [i for i in self._serving(instance.model.name) if i is not instance]
            if instance.lifecycle == Lifecycle.SERVING and instance.model.name in needed and not peers:
                continue
            candidates.append((-len(peers), instance.num_requests, instance.instance_id, instance))
        return min(candidates, key=lambda c: c[:3])[3] if candidates else None

    def _drain(self, instance: Instance) -> None:
        """Move the replica's queued requests to its model's least-loaded other serving replica,
        then drain it (its running requests finish where they are)."""
        peers = [i for i in self._serving(instance.model.name) if i is not instance]
        if peers and instance.lifecycle == Lifecycle.SERVING:
            for seq in [s for s in instance.waiting if s.residency == Residency.QUEUED]:
                target = min(peers, key=lambda i: (i.num_requests, i.instance_id))
                self.cluster.migrate(seq, target.instance_id)
                self.moved_requests += 1
        self.cluster.drain(instance.instance_id)
        self.removed += 1
        if instance.lifecycle != Lifecycle.STOPPED:
            self.draining = instance

    def run(self) -> None:
        """Step now and every ``tick_s`` until done or cancelled."""
        def tick(_: Any) -> None:
            if not self.cancelled and not self.step():
                self.cluster.events.schedule(self.cluster.events.now_s + self.tick_s, tick, None)
        tick(None)


def _clamped(models: Sequence[str], thresholds: Sequence[float], served: set[str]) -> tuple[float, ...]:
    """Thresholds with h_i = 0 where model i + 1 gets no replica (the plan sends it nothing)."""
    return tuple(float(h) if models[stage + 1] in served else 0.0 for stage, h in enumerate(thresholds))


def gpus_by_model(cluster: Cluster, models: Sequence[str]) -> tuple[int, ...]:
    """GPUs of the serving and starting replicas of each of ``models``."""
    live = [i for i in cluster.instances.values() if i.lifecycle in (Lifecycle.SERVING, Lifecycle.STARTING)]
    return tuple(sum(i.config.num_gpus for i in live if i.model.name == m) for m in models)


# ----------------------------------------------------------------------------- the loop (§4.4 (iii))
@dataclass
class Reschedule:
    """One §4.4 re-scheduling: when it triggered, why, the plan, and what the rollout did."""

    detected_s: float
    reasons: list[str]
    measured_rate_rps: float
    lengths: str
    thresholds: tuple[float, ...]
    gpus_by_model: tuple[int, ...]
    strategies: tuple[str, ...]
    target_gpus: tuple[int, ...]  # GPUs the plan's replicas use per model (<= gpus_by_model)
    algorithm_runtime_s: float
    applied_s: float | None = None
    thresholds_applied_s: float | None = None
    rollout_done_s: float | None = None
    replicas_removed: int = 0
    replicas_added: int = 0
    requests_moved: int = 0
    abandoned: bool = False
    error: str = ""


@dataclass(frozen=True)
class ReschedulingSettings:
    """The monitor window (s), the complexity subsample's share (footnote 5), the Alg. 1 grid,
    the modelled algorithm runtime (App. G), the subsample's seed, and whether only the
    thresholds are re-planned."""

    window_s: float
    subsample_fraction: float
    threshold_levels: int
    planning_delay_s: float
    seed: int
    thresholds_only: bool = False

    def __post_init__(self) -> None:
        if not (math.isfinite(self.window_s) and self.window_s > 0):
            raise ValueError(f"window_s must be positive, got {self.window_s!r}")
        if not 0 < self.subsample_fraction <= 1:
            raise ValueError(f"subsample_fraction must be in (0, 1], got {self.subsample_fraction!r}")
        if not (math.isfinite(self.planning_delay_s) and self.planning_delay_s >= 0):
            raise ValueError(f"planning_delay_s must be finite and >= 0, got {self.planning_delay_s!r}")


class Rescheduler:
    """§4.4's loop on ``cluster``, which serves ``requests`` (arriving until ``stream_end_s``)
    through ``router`` with ``initial_plan`` (made for ``initial_stats``) deployed on
    ``total_gpus`` GPUs of type ``gpu``. ``tables`` maps each cached length distribution to
    the cascade's latency tables. Records every re-schedule and, at each monitor tick, the GPUs
    per model and the thresholds."""

    def __init__(self, cluster: Cluster, router: CascadeRouter, requests: Sequence[Request], *,
                 tables: Mapping[str, Sequence[ModelLatencyTable]], gpu: str, total_gpus: int, quality_min: float,
                 initial_plan: CascadePlan, initial_stats: WorkloadStats, settings: ReschedulingSettings,
                 stream_end_s: float) -> None:
        self.cluster, self.router, self.requests = cluster, router, requests
        self.tables, self.gpu, self.total_gpus, self.quality_min = tables, gpu, total_gpus, quality_min
        self.initial_plan, self.settings, self.stream_end_s = initial_plan, settings, stream_end_s
        self.reschedules: list[Reschedule] = []
        self.rollouts: list[tuple[Reschedule, RollingUpdate]] = []
        self.gpus_timeline: list[tuple[float, tuple[int, ...]]] = []
        self.thresholds_timeline: list[tuple[float, tuple[float, ...]]] = []
        self._arrivals = np.array([r.arrival_s for r in requests])
        self._subsampled = np.random.default_rng(settings.seed + 7).random(len(requests)) < settings.subsample_fraction
        self._detector = ShiftDetector(initial_stats)
        cluster.every(settings.window_s, self._monitor)

    def _monitor(self, c: Cluster) -> None:
        """(i)-(ii) on the last window; on a shift (iii): re-plan, apply after the delay."""
        s = self.settings
        now = c.events.now_s
        lo, hi = np.searchsorted(self._arrivals, [now - s.window_s, now])
        models = self.router.models
        self.gpus_timeline.append((now, gpus_by_model(c, models)))
        self.thresholds_timeline.append((now, self.router.thresholds))
        if now > self.stream_end_s + 1e-9:
            return  # the window reaches past the stream's end: nothing left to measure
        window = WorkloadStats.of(self.requests[lo:hi], s.window_s, self._subsampled[lo:hi].tolist(), models)
        reasons = self._detector.observe(window)
        if not reasons:
            return
        lengths = nearest_lengths(window, list(self.tables))
        tables = self.tables[lengths]
        planner = CascadiaPlanner(tables, self.total_gpus, QualityProfile(window.scores), self.quality_min,
                                  threshold_levels=s.threshold_levels)
        timer = time.perf_counter()
        fixed = self.initial_plan.strategies
        try:
            if s.thresholds_only:
                routing, _ = planner.route(window.rate_rps, fixed)
                event = Reschedule(now, reasons, window.rate_rps, lengths, routing.thresholds, self.initial_plan.gpus_by_model,
                                   tuple(x.describe() for x in fixed), tuple(x.num_gpus for x in fixed),
                                   time.perf_counter() - timer)
            else:
                plan = planner.plan(window.rate_rps)
                event = Reschedule(now, reasons, window.rate_rps, lengths, plan.thresholds, plan.gpus_by_model,
                                   tuple(x.describe() for x in plan.strategies), tuple(x.num_gpus for x in plan.strategies),
                                   time.perf_counter() - timer)
                target = plan.instance_groups(self.gpu, tables)
        except ValueError as error:  # no feasible plan at the measured load: keep the current one
            current = gpus_by_model(c, models)
            self.reschedules.append(Reschedule(now, reasons, window.rate_rps, lengths, self.router.thresholds, current,
                                               (), current, time.perf_counter() - timer, error=str(error)))
            return
        self.reschedules.append(event)
        if s.thresholds_only:
            self.router.set_thresholds(event.thresholds)
            event.applied_s = event.thresholds_applied_s = event.rollout_done_s = now
            return
        c.events.schedule(now + s.planning_delay_s, lambda _: self._apply(event, target), None)

    def _apply(self, event: Reschedule, target: tuple[InstanceGroup, ...]) -> None:
        """Start the rolling update; an unfinished earlier one stops (its drain carries over)."""
        event.applied_s = self.cluster.events.now_s
        rollout = RollingUpdate(self.cluster, self.router, target, event.thresholds)
        if self.rollouts and self.rollouts[-1][1].finished_s is None:
            previous = self.rollouts[-1][1]
            previous.cancelled = True
            rollout.draining = previous.draining
        self.rollouts.append((event, rollout))
        rollout.run()

    def record_rollouts(self) -> None:
        """After the run: copy what each rolling update did into its re-schedule record, and
        close the timelines with the deployment at the run's end (a rollout may finish after
        the last monitor tick)."""
        now = self.cluster.events.now_s
        self.gpus_timeline.append((now, gpus_by_model(self.cluster, self.router.models)))
        self.thresholds_timeline.append((now, self.router.thresholds))
        for event, rollout in self.rollouts:
            event.thresholds_applied_s, event.rollout_done_s = rollout.thresholds_applied_s, rollout.finished_s
            event.replicas_removed, event.replicas_added = rollout.removed, rollout.added
            event.requests_moved, event.abandoned = rollout.moved_requests, rollout.abandoned
