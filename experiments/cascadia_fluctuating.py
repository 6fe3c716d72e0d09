"""Cascadia under a fluctuating workload (cascadia.txt §4.4 "Re-scheduling", Fig. 11, App. G /
Table 5) on its testbed: 32 H100-80GB, the DeepSeek cascade 7B -> 70B -> 671B (int4).

Stream: trace 1 -> trace 2 -> trace 3 for 8, 16 and 10 minutes (§4.4), each segment Poisson
arrivals with that trace's rate, lengths and difficulty mean exactly as
``experiments.cascadia_reproduction.TRACES`` defines them (imported, not copied).

Systems (all on exactly 32 GPUs, same requests). Cascade-v0 keeps its deployment fixed, so the
systems drive ``simulator.cluster.Cluster`` directly (deploy / drain / migrate) with
``simulator.cascade.CascadeRouter``, as the reproduction's ``serve`` does:

- ``Cascadia (re-scheduling)``: starts with Alg. 1's plan for trace 1 and re-schedules as
  §4.4 says. (i) A monitor records the workload every ``window_s`` (the paper's example: a
  subsample every 5 minutes; here 60 s windows aligned with the segments, so a shift is seen
  one window after it happens and no window mixes two traces): arrival rate and mean
  prompt / output tokens over every arrival of the window (output lengths as recorded once the
  requests finish; a 50-request subsample's mean length would vary by ~15% under these
  exponential lengths), and, for complexity, the scores of a 5% subsample on every model
  (footnote 5; the extra load of running that subsample on every model is not simulated). (ii) A shift is significant when the rate or
  a mean length moves by more than 25% from the characteristics the current plan was made
  for, or the subsample's mean score on the first model moves by more than 4 standard
  errors; windows without a shift are pooled into that reference. (iii) Then Alg. 1 runs
  again (``CascadiaPlanner.plan``) at the window's measured rate, with the window's
  subsample as the quality profile and the latency tables of the cached length
  distribution nearest to the window's mean lengths (the tables are precomputed, §3.2). It
  re-plans everything the paper's plan holds: thresholds, GPUs per model and the
  parallelism of each model (§4.4, "Overall scheduling process").
  Re-deployment costs, per App. G: the algorithm's runtime (~10-20 s at 32 GPUs, Fig. 10),
  modelled as ``planning_delay_s`` = 20 s during which the current plan keeps serving; then
  a rolling update: replicas whose (model, TP, PP) the new plan keeps are untouched and keep
  serving; the others are reconfigured one at a time: one old replica at a time is drained
  (stops taking requests, its queued requests move to its model's other replicas, its
  running ones finish there) and new replicas are deployed as soon as enough GPUs are free,
  each serving after ``hardware.latency.weight_load_time_s`` plus ``provisioning_s`` = 2 s
  (App. G's reconfiguration overhead is 2-20 s). A replica is never drained while it is
  the last serving one of a model the current thresholds still send requests to; the new
  thresholds apply as soon as every model they send requests to has a serving replica.
- ``Cascadia (thresholds only)``: the same monitor and trigger, but only the routing half of
  Alg. 1 re-runs (App. D's argmin over thresholds with trace 1's deployment held), which is
  what the ``cascadia`` policy does on Cascade-v0, whose deployment is fixed; applied at once.
- ``Cascadia (static)``: trace 1's plan, never changed.
- ``Stand-alone``: the smallest model meeting the quality requirement on trace 1, on all 32
  GPUs with the parallelism the lookup tables choose for trace 1 (§4.1), never changed.

Metrics per ``window_s`` window of arrivals and over the run: p95 E2E, SLO attainment with
each request's SLO = ``slo_scale`` x its trace's base latency (the reproduction's
``base_latency_s``; scale 5 as in the ``cascadia`` scenario), mean accepted score, and SLO
goodput (requests meeting their SLO per second); over the run also the minimum SLO scale at
95% attainment (Table 5). The paper's Fig. 11 measures throughput; with a fixed request
stream the served throughput equals the arrival rate unless a system falls behind, so the
goodput stands in for it.

Outputs under ``--out`` (default ``results/cascadia_fluctuating``): ``report.md`` (paper's
numbers next to ours), ``results.json``, ``fig11_fluctuating.png`` (metrics over time) and
``tensorboard/<system>/`` runs with the same tags.

    python -m experiments.cascadia_fluctuating [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from torch.utils.tensorboard import SummaryWriter  # noqa: E402

from baselines.cascadia.parallelism import ModelLatencyTable, load_cached_tables  # noqa: E402
from baselines.cascadia.planner import CascadePlan, CascadiaPlanner  # noqa: E402
from baselines.cascadia.thresholds import QualityProfile  # noqa: E402
from envs.scenario import InstanceGroup  # noqa: E402
from experiments.cascadia_reproduction import (  # noqa: E402
    GPU,
    TOTAL_GPUS,
    TRACES,
    Trace,
    base_latency_s,
    deepseek_tables,
    standalone,
    trace_requests,
)
from envs.scenarios.cascadia import CASCADIA_MODELS  # noqa: E402
from simulator.cascade import CascadeRouter  # noqa: E402
from simulator.cluster import Cluster  # noqa: E402
from simulator.instance import Instance, InstanceConfig, Lifecycle  # noqa: E402
from simulator.outcome import RequestOutcome  # noqa: E402
from simulator.request import Request  # noqa: E402
from simulator.sequence import Residency  # noqa: E402
from simulator.workloads import PARAMETRIC_PRESETS  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
SEGMENT_MINUTES = (8.0, 16.0, 10.0)  # §4.4: trace 1 -> trace 2 -> trace 3
SYSTEMS = ("Cascadia (re-scheduling)", "Cascadia (thresholds only)", "Cascadia (static)", "Stand-alone")
RESCHEDULING, THRESHOLDS_ONLY, STATIC, STANDALONE = SYSTEMS
ATTAINMENT = 0.95

PAPER: dict[str, tuple[float, str]] = {
    "goodput_gain_mean": (2.2, "Fig. 11: 2.2x better throughput than the baselines on average (§4.4)"),
    "goodput_gain_max": (4.4, "Fig. 11: up to 4.4x (§4.4)"),
    "slo_scale_q90_cascadia": (8.99, "Table 5: Cascadia's SLO scale at 95% attainment, q >= 90"),
    "slo_scale_q90_standalone": (16.37, "Table 5: single-model deployment"),
    "slo_scale_reduction_vs_standalone_q90": (0.45, "Table 5 / App. G: 45% lower SLO scale than single-model"),
    "planning_time_s": (20.0, "App. G: algorithm runtime ~10-20 s"),
    "reconfiguration_s": (20.0, "App. G: model reconfiguration ~2-20 s"),
}


@dataclass(frozen=True)
class Settings:
    """Run sizes: segment lengths (s), monitor window (s), subsample share, profile size,
    threshold grid, quality requirements, and the re-scheduling costs of App. G."""

    segment_s: tuple[float, ...]
    window_s: float
    subsample_fraction: float
    profile_requests: int
    threshold_levels: int
    quality_requirements: tuple[float, ...]
    slo_scale: float = 5.0
    planning_delay_s: float = 20.0
    provisioning_s: float = 2.0
    seed: int = 0

    def __post_init__(self) -> None:
        if len(self.segment_s) != len(TRACES) or not all(math.isfinite(s) and s > 0 for s in self.segment_s):
            raise ValueError(f"segment_s needs {len(TRACES)} positive durations, got {self.segment_s!r}")
        if not (math.isfinite(self.window_s) and self.window_s > 0):
            raise ValueError(f"window_s must be positive, got {self.window_s!r}")
        boundaries = np.cumsum(self.segment_s)
        if not np.allclose(boundaries / self.window_s, np.round(boundaries / self.window_s)):
            raise ValueError(f"segment boundaries {boundaries.tolist()} must be multiples of window_s={self.window_s!r} "
                             "(a window must not mix two traces)")
        if not 0 < self.subsample_fraction <= 1:
            raise ValueError(f"subsample_fraction must be in (0, 1], got {self.subsample_fraction!r}")
        for name in ("slo_scale", "planning_delay_s", "provisioning_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be finite and >= 0, got {value!r}")


FULL = Settings(tuple(60.0 * m for m in SEGMENT_MINUTES), 60.0, 0.05, 1000, 101, (90.0, 80.0))
# --quick: 40 s segments, 20 s windows; a 25% subsample keeps the 20 s windows' profiles usable.
QUICK = Settings((40.0, 40.0, 40.0), 20.0, 0.25, 300, 21, (90.0,))


# ----------------------------------------------------------------------------- the stream
@dataclass(frozen=True)
class Phase:
    """One segment of the stream: ``trace`` from ``start_s`` to ``end_s``."""

    trace: Trace
    start_s: float
    end_s: float


def fluctuating_stream(segment_s: Sequence[float], seed: int, traces: Sequence[Trace] = TRACES) -> tuple[list[Request], list[Phase]]:
    """Trace i's Poisson arrivals (its rate, lengths and difficulty mean, scored on every
    cascade model) for ``segment_s[i]`` seconds, one trace after the other (§4.4)."""
    if len(segment_s) != len(traces):
        raise ValueError(f"{len(traces)} traces need {len(traces)} segment lengths, got {list(segment_s)}")
    requests: list[Request] = []
    phases: list[Phase] = []
    start_s = 0.0
    for index, (trace, duration_s) in enumerate(zip(traces, segment_s)):
        if not (math.isfinite(duration_s) and duration_s > 0):
            raise ValueError(f"segment lengths must be positive, got {duration_s!r}")
        expected = trace.rate_rps * duration_s
        drawn = trace_requests(trace, CASCADIA_MODELS, int(expected + 8 * math.sqrt(expected) + 20), seed=seed + 101 * index)
        for request in drawn:
            if request.arrival_s >= duration_s:
                break
            request.arrival_s += start_s
            request.request_id = len(requests)
            requests.append(request)
        phases.append(Phase(trace, start_s, start_s + duration_s))
        start_s += duration_s
    return requests, phases


def phase_index(phases: Sequence[Phase], arrival_s: float) -> int:
    return next((i for i, p in enumerate(phases) if arrival_s < p.end_s), len(phases) - 1)


# ----------------------------------------------------------------------------- monitoring (§4.4 (i)-(ii))
@dataclass(frozen=True)
class WorkloadStats:
    """What the monitor records about a window: rate, mean lengths, the subsample's scores."""

    rate_rps: float
    mean_prompt_tokens: float
    mean_output_tokens: float
    scores: np.ndarray  # (subsampled requests x models)

    @staticmethod
    def of(requests: Sequence[Request], duration_s: float, subsampled: Sequence[bool]) -> WorkloadStats:
        if not requests:
            return WorkloadStats(0.0, 0.0, 0.0, np.zeros((0, len(CASCADIA_MODELS))))
        scores = [[r.quality_by_model[m] for m in CASCADIA_MODELS] for r, s in zip(requests, subsampled) if s]
        return WorkloadStats(
            len(requests) / duration_s,
            float(np.mean([r.prompt_tokens for r in requests])),
            float(np.mean([r.output_tokens for r in requests])),
            np.array(scores, dtype=np.float64).reshape(-1, len(CASCADIA_MODELS)),
        )

    def pooled(self, other: WorkloadStats) -> WorkloadStats:
        """Both windows together (equal durations): rates and lengths averaged, scores stacked."""
        return WorkloadStats((self.rate_rps + other.rate_rps) / 2, (self.mean_prompt_tokens + other.mean_prompt_tokens) / 2,
                             (self.mean_output_tokens + other.mean_output_tokens) / 2, np.vstack([self.scores, other.scores]))


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
    """Moves a cluster to ``target`` groups and ``thresholds`` one replica at a time (App. G);
    ``step`` runs every ``tick_s`` until done. See the module docstring for the rules."""

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

    def _free_gpus(self) -> int:
        return self.cluster.gpu_inventory[GPU] - self.cluster.gpus_in_use[GPU]

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
            if self.configs[key].num_gpus <= self._free_gpus():
                self.cluster.deploy(self.configs[key])
                self.added += 1
                current[key] += 1
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


# ----------------------------------------------------------------------------- one system, one run
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


@dataclass
class Context:
    """Everything the systems share for one quality requirement."""

    quality_min: float
    settings: Settings
    tables: dict[str, list[ModelLatencyTable]]  # by length distribution
    initial_plan: CascadePlan
    initial_stats: WorkloadStats
    standalone_model: str
    standalone_groups: tuple[InstanceGroup, ...]


@dataclass
class SystemRun:
    outcomes: list[RequestOutcome]
    reschedules: list[Reschedule] = field(default_factory=list)
    gpus_timeline: list[tuple[float, tuple[int, ...]]] = field(default_factory=list)
    thresholds_timeline: list[tuple[float, tuple[float, ...]]] = field(default_factory=list)
    rollouts: list[tuple[Reschedule, RollingUpdate]] = field(default_factory=list)
    wall_s: float = 0.0

    def record_rollouts(self) -> None:
        """Copy what each rolling update did into its re-schedule record."""
        for event, rollout in self.rollouts:
            event.thresholds_applied_s, event.rollout_done_s = rollout.thresholds_applied_s, rollout.finished_s
            event.replicas_removed, event.replicas_added = rollout.removed, rollout.added
            event.requests_moved, event.abandoned = rollout.moved_requests, rollout.abandoned


def gpus_by_model(cluster: Cluster) -> tuple[int, ...]:
    live = [i for i in cluster.instances.values() if i.lifecycle in (Lifecycle.SERVING, Lifecycle.STARTING)]
    return tuple(sum(i.config.num_gpus for i in live if i.model.name == m) for m in CASCADIA_MODELS)


def run_system(system: str, requests: list[Request], ctx: Context, stream_end_s: float) -> SystemRun:
    """Serve ``requests`` (arriving until ``stream_end_s``) with ``system`` (one of ``SYSTEMS``)
    on 32 GPUs."""
    if system not in SYSTEMS:
        raise ValueError(f"unknown system {system!r}; known: {list(SYSTEMS)}")
    started = time.perf_counter()
    s = ctx.settings
    if system == STANDALONE:
        models: tuple[str, ...] = (ctx.standalone_model,)
        groups, thresholds = ctx.standalone_groups, ()
    else:
        models = CASCADIA_MODELS
        groups, thresholds = ctx.initial_plan.instance_groups(GPU, ctx.tables[TRACES[0].lengths]), ctx.initial_plan.thresholds
    router = CascadeRouter(models, thresholds)
    cluster = Cluster({GPU: TOTAL_GPUS}, provisioning_s=s.provisioning_s, **router.cluster_options())
    for group in groups:
        for _ in range(group.count):
            cluster.deploy(group.config, ready_now=True)
    run = SystemRun([])
    if system in (RESCHEDULING, THRESHOLDS_ONLY):
        _attach_monitor(system, cluster, router, requests, ctx, run, stream_end_s)
    cluster.run(requests)
    run.record_rollouts()
    run.outcomes = sorted(cluster.outcomes, key=lambda o: o.request_id)
    run.wall_s = time.perf_counter() - started
    return run


def _attach_monitor(system: str, cluster: Cluster, router: CascadeRouter, requests: list[Request], ctx: Context,
                    run: SystemRun, stream_end_s: float) -> None:
    """§4.4's monitor every ``window_s``; on a shift, re-plan (whole Alg. 1, or thresholds only)."""
    s = ctx.settings
    arrivals = np.array([r.arrival_s for r in requests])
    subsampled = np.random.default_rng(s.seed + 7).random(len(requests)) < s.subsample_fraction
    detector = ShiftDetector(ctx.initial_stats)
    fixed_strategies = ctx.initial_plan.strategies

    def monitor(c: Cluster) -> None:
        now = c.events.now_s
        lo, hi = np.searchsorted(arrivals, [now - s.window_s, now])
        run.gpus_timeline.append((now, gpus_by_model(c)))
        run.thresholds_timeline.append((now, router.thresholds))
        if now > stream_end_s + 1e-9:
            return  # the window reaches past the stream's end: nothing left to measure
        window = WorkloadStats.of(requests[lo:hi], s.window_s, subsampled[lo:hi].tolist())
        reasons = detector.observe(window)
        if not reasons:
            return
        lengths = nearest_lengths(window, list(ctx.tables))
        tables = ctx.tables[lengths]
        planner = CascadiaPlanner(tables, TOTAL_GPUS, QualityProfile(window.scores), ctx.quality_min,
                                  threshold_levels=s.threshold_levels)
        timer = time.perf_counter()
        try:
            if system == RESCHEDULING:
                plan = planner.plan(window.rate_rps)
                event = Reschedule(now, reasons, window.rate_rps, lengths, plan.thresholds, plan.gpus_by_model,
                                   tuple(x.describe() for x in plan.strategies), tuple(x.num_gpus for x in plan.strategies),
                                   time.perf_counter() - timer)
                target = plan.instance_groups(GPU, tables)
            else:
                routing, _ = planner.route(window.rate_rps, fixed_strategies)
                event = Reschedule(now, reasons, window.rate_rps, lengths, routing.thresholds, ctx.initial_plan.gpus_by_model,
                                   tuple(x.describe() for x in fixed_strategies), tuple(x.num_gpus for x in fixed_strategies),
                                   time.perf_counter() - timer)
        except ValueError as error:  # no feasible plan at the measured load: keep the current one
            run.reschedules.append(Reschedule(now, reasons, window.rate_rps, lengths, router.thresholds, gpus_by_model(c),
                                              (), gpus_by_model(c), time.perf_counter() - timer, error=str(error)))
            return
        run.reschedules.append(event)
        if system == THRESHOLDS_ONLY:
            router.set_thresholds(event.thresholds)
            event.applied_s = event.thresholds_applied_s = event.rollout_done_s = now
            return
        c.events.schedule(now + s.planning_delay_s, lambda _: apply(event, target), None)

    def apply(event: Reschedule, target: tuple[InstanceGroup, ...]) -> None:
        event.applied_s = cluster.events.now_s
        rollout = RollingUpdate(cluster, router, target, event.thresholds)
        if run.rollouts and run.rollouts[-1][1].finished_s is None:
            previous = run.rollouts[-1][1]
            previous.cancelled = True
            rollout.draining = previous.draining
        run.rollouts.append((event, rollout))
        rollout.run()

    cluster.every(s.window_s, monitor)


# ----------------------------------------------------------------------------- metrics
def slo_of(requests: Sequence[Request], phases: Sequence[Phase], base_s: Sequence[float], scale: float) -> np.ndarray:
    """Each request's E2E SLO: ``scale`` x its trace's base latency (§4.1)."""
    return np.array([scale * base_s[phase_index(phases, r.arrival_s)] for r in requests])


def window_metrics(outcomes: Sequence[RequestOutcome], slo_s: np.ndarray, edges_s: np.ndarray) -> dict[str, list[float]]:
    """Per window of arrivals [edges[k], edges[k+1]): p95 E2E, SLO attainment (a request lost
    counts as missed), mean accepted score, goodput (requests meeting their SLO per second)."""
    arrival = np.array([o.arrival_s for o in outcomes])
    e2e = np.array([o.e2e_s if o.completed else np.inf for o in outcomes])
    quality = np.array([o.quality if o.completed else np.nan for o in outcomes])
    met = e2e <= slo_s
    rows: dict[str, list[float]] = {"p95_e2e_s": [], "slo_attainment": [], "quality": [], "goodput_rps": []}
    for lo, hi in zip(edges_s[:-1], edges_s[1:]):
        inside = (arrival >= lo) & (arrival < hi)
        if not inside.any():
            for values in rows.values():
                values.append(float("nan"))
            continue
        rows["p95_e2e_s"].append(float(np.percentile(e2e[inside], 95)))
        rows["slo_attainment"].append(float(met[inside].mean()))
        rows["quality"].append(float(np.nanmean(quality[inside])))
        rows["goodput_rps"].append(float(met[inside].sum() / (hi - lo)))
    return rows


def totals(outcomes: Sequence[RequestOutcome], slo_s: np.ndarray, scale: float, duration_s: float) -> dict[str, float]:
    e2e = np.array([o.e2e_s if o.completed else np.inf for o in outcomes])
    met = e2e <= slo_s
    return {
        "p95_e2e_s": float(np.percentile(e2e, 95)),
        "slo_attainment": float(met.mean()),
        "min_slo_scale": float(np.percentile(e2e / (slo_s / scale), 100 * ATTAINMENT)),
        "quality": float(np.mean([o.quality for o in outcomes if o.completed])),
        "goodput_rps": float(met.sum() / duration_s),
        "lost": float(sum(not o.completed for o in outcomes)),
    }


# ----------------------------------------------------------------------------- the experiment
def build_context(quality_min: float, settings: Settings, cache: dict[str, ModelLatencyTable]) -> Context:
    """Trace 1's Alg. 1 plan and stand-alone choice (profile: the reproduction's trace-1 profile
    requests), and the latency tables of every trace's length distribution."""
    trace = TRACES[0]
    tables = {t.lengths: deepseek_tables(t, cache) for t in TRACES}
    profiled = trace_requests(trace, CASCADIA_MODELS, settings.profile_requests, seed=7)
    profile = QualityProfile.from_requests(profiled, CASCADIA_MODELS)
    plan = CascadiaPlanner(tables[trace.lengths], TOTAL_GPUS, profile, quality_min,
                           threshold_levels=settings.threshold_levels).plan(trace.rate_rps)
    stats = replace(WorkloadStats.of(profiled, 1.0, [True] * len(profiled)), rate_rps=trace.rate_rps)
    index, groups = standalone(trace, quality_min, tables[trace.lengths], profile)
    return Context(quality_min, settings, tables, plan, stats, CASCADIA_MODELS[index], groups)


@dataclass(frozen=True)
class Stream:
    """The requests, their phases, each request's SLO and the metric windows' edges."""

    requests: list[Request]
    phases: list[Phase]
    base_latency_s: list[float]
    slo_s: np.ndarray
    edges_s: np.ndarray

    @staticmethod
    def build(settings: Settings) -> Stream:
        requests, phases = fluctuating_stream(settings.segment_s, settings.seed)
        base_s = [base_latency_s(p.trace) for p in phases]
        edges = np.arange(0.0, phases[-1].end_s + settings.window_s / 2, settings.window_s)
        return Stream(requests, phases, base_s, slo_of(requests, phases, base_s, settings.slo_scale), edges)


def run_cell(settings: Settings, quality_min: float, system: str) -> dict[str, Any]:
    """One system at one quality requirement: per-window, per-phase and total metrics, the
    re-schedules and the deployment over time (rebuilds the deterministic stream, so it can
    run in a worker process)."""
    stream = Stream.build(settings)
    ctx = build_context(quality_min, settings, load_cached_tables())
    duration_s = stream.phases[-1].end_s
    run = run_system(system, stream.requests, ctx, duration_s)
    in_phase = [np.array([p.start_s <= r.arrival_s < p.end_s for r in stream.requests]) for p in stream.phases]
    return {
        "windows": window_metrics(run.outcomes, stream.slo_s, stream.edges_s),
        "total": totals(run.outcomes, stream.slo_s, settings.slo_scale, duration_s),
        "phases": [totals([o for o, keep in zip(run.outcomes, mask) if keep], stream.slo_s[mask], settings.slo_scale,
                          p.end_s - p.start_s) for p, mask in zip(stream.phases, in_phase)],
        "reschedules": [vars(e) for e in run.reschedules],
        "gpus_timeline": run.gpus_timeline, "thresholds_timeline": run.thresholds_timeline,
        "initial_plan": {"thresholds": list(ctx.initial_plan.thresholds), "gpus": list(ctx.initial_plan.gpus_by_model),
                         "strategies": [x.describe() for x in ctx.initial_plan.strategies]},
        "standalone_model": ctx.standalone_model, "wall_s": run.wall_s,
    }


def run_experiment(settings: Settings, workers: int = 2, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every (quality requirement, system) cell, ``workers`` processes at a time."""
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 2:
        raise ValueError(f"workers must be 1 or 2 (the machine has 2 cores), got {workers!r}")
    started = time.perf_counter()
    stream = Stream.build(settings)
    results: dict[str, Any] = {
        "phases": [{"trace": p.trace.name, "lengths": p.trace.lengths, "rate_rps": p.trace.rate_rps,
                    "difficulty_mean": p.trace.difficulty_mean, "start_s": p.start_s, "end_s": p.end_s,
                    "requests": sum(p.start_s <= r.arrival_s < p.end_s for r in stream.requests), "base_latency_s": b}
                   for p, b in zip(stream.phases, stream.base_latency_s)],
        "window_edges_s": stream.edges_s.tolist(), "requests": len(stream.requests), "runs": {},
    }
    jobs = [(q, system) for q in settings.quality_requirements for system in SYSTEMS]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {job: pool.submit(run_cell, settings, *job) for job in jobs}
        for (q, system), future in futures.items():
            cell = future.result()
            run = results["runs"].setdefault(f"q{q:g}", {"initial_plan": cell.pop("initial_plan"),
                                                         "standalone_model": cell.pop("standalone_model")})
            run[system] = cell
            log(f"q{q:g} {system}: {cell['wall_s']:.0f} s simulating, {len(cell['reschedules'])} re-schedules "
                f"({time.perf_counter() - started:.0f} s)")
    results["headline"] = headline(results["runs"])
    results["wall_s"] = time.perf_counter() - started
    return results


def headline(runs: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Goodput of re-scheduling Cascadia over each baseline (Fig. 11's ratio, mean and max over
    quality requirements and baselines), Table 5's SLO scales at q = 90, re-scheduling costs."""
    gains = [cell[RESCHEDULING]["total"]["goodput_rps"] / max(cell[b]["total"]["goodput_rps"], 1e-9)
             for cell in runs.values() for b in (STATIC, STANDALONE)]
    events = [e for cell in runs.values() for e in cell[RESCHEDULING]["reschedules"] if not e["error"]]
    rollouts = [e["rollout_done_s"] - e["applied_s"] for e in events if e["rollout_done_s"] is not None]
    values = {
        "goodput_gain_mean": float(np.mean(gains)), "goodput_gain_max": float(np.max(gains)),
        "planning_time_s": float(max((e["algorithm_runtime_s"] for e in events), default=float("nan"))),
        "reconfiguration_s": float(max(rollouts, default=float("nan"))),
    }
    if "q90" in runs:
        ours, alone = runs["q90"][RESCHEDULING]["total"]["min_slo_scale"], runs["q90"][STANDALONE]["total"]["min_slo_scale"]
        values.update({"slo_scale_q90_cascadia": ours, "slo_scale_q90_standalone": alone,
                       "slo_scale_reduction_vs_standalone_q90": 1.0 - ours / alone})
    return values


# ----------------------------------------------------------------------------- outputs
def write_report(path: Path, results: dict[str, Any], settings: Settings) -> None:
    ours = results["headline"]
    phases = "; ".join(f"{p['trace']} ({p['lengths']}, Poisson {p['rate_rps']:g} req/s, difficulty mean {p['difficulty_mean']:g}) "
                       f"{p['start_s']:.0f}-{p['end_s']:.0f} s, {p['requests']} requests, base latency {p['base_latency_s']:.1f} s"
                       for p in results["phases"])
    lines = ["# Cascadia under a fluctuating workload (cascadia.txt §4.4, Fig. 11, App. G / Table 5)", "",
             f"32 x {GPU}; cascade {' -> '.join(CASCADIA_MODELS)} (671B int4). Stream: {phases}. Monitor window "
             f"{settings.window_s:g} s, {100 * settings.subsample_fraction:g}% complexity subsample; re-scheduling delay "
             f"{settings.planning_delay_s:g} s (Alg. 1 runtime, App. G), replica start = weight load + {settings.provisioning_s:g} s; "
             f"SLO = {settings.slo_scale:g} x the trace's base latency; threshold grid {settings.threshold_levels} levels. "
             f"Wall time {results['wall_s']:.0f} s.", "", "## Headline numbers", "", "| metric | paper | ours |", "|---|---|---|"]
    for key, (value, text) in PAPER.items():
        lines.append(f"| {key} | {text} ({value:g}) | {ours.get(key, float('nan')):.3g} |")
    lines += ["", "goodput_gain: SLO goodput of Cascadia (re-scheduling) over Cascadia (static) and over Stand-alone, "
              "mean / max over those two baselines and the quality requirements (the paper's baselines are CascadeServe "
              "and stand-alone models; CascadeServe is not run here). planning_time_s is our Alg. 1 wall time (the "
              "simulation charges the modelled delay instead); reconfiguration_s is the longest rolling update, from applying a "
              "plan to its last replica drained or started (requests keep being served meanwhile; drains wait for running "
              "requests).", ""]
    for key, cell in results["runs"].items():
        plan = cell["initial_plan"]
        lines += [f"## {key}: totals over the run", "",
                  f"Trace-1 plan: thresholds {plan['thresholds']}, GPUs {plan['gpus']}, {'; '.join(plan['strategies'])}. "
                  f"Stand-alone: {cell['standalone_model']}.", "",
                  "| system | p95 E2E (s) | SLO attainment | min SLO scale @95% | mean score | goodput (req/s) | lost | "
                  + " | ".join(f"{p['trace']} p95 / att. / score / goodput" for p in results["phases"]) + " |",
                  "|---|---|---|---|---|---|---|" + "---|" * len(results["phases"])]
        for system in SYSTEMS:
            t = cell[system]["total"]
            per_phase = " | ".join(f"{x['p95_e2e_s']:.1f} / {x['slo_attainment']:.2f} / {x['quality']:.1f} / {x['goodput_rps']:.1f}"
                                   for x in cell[system]["phases"])
            lines.append(f"| {system} | {t['p95_e2e_s']:.1f} | {t['slo_attainment']:.3f} | {t['min_slo_scale']:.2f} | {t['quality']:.1f} | "
                         f"{t['goodput_rps']:.2f} | {t['lost']:.0f} | {per_phase} |")
        lines += ["", f"### {key}: re-schedules", "",
                  "| system | detected (s) | reasons | measured rate | lengths | thresholds | GPUs | parallelism | Alg. 1 (s) | "
                  "applied (s) | thresholds applied (s) | rollout done (s) | removed / added / moved | note |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for system in (RESCHEDULING, THRESHOLDS_ONLY):
            for e in cell[system]["reschedules"]:
                lines.append(
                    f"| {system} | {e['detected_s']:.0f} | {', '.join(e['reasons'])} | {e['measured_rate_rps']:.1f} | {e['lengths']} | "
                    f"{', '.join(f'{h:g}' for h in e['thresholds'])} | {', '.join(map(str, e['gpus_by_model']))} | "
                    f"{'; '.join(e['strategies'])} | {e['algorithm_runtime_s']:.2f} | {_fmt(e['applied_s'])} | "
                    f"{_fmt(e['thresholds_applied_s'])} | {_fmt(e['rollout_done_s'])} | "
                    f"{e['replicas_removed']} / {e['replicas_added']} / {e['requests_moved']} | "
                    f"{'abandoned part of the rollout' if e['abandoned'] else e['error']} |")
        lines.append("")
    lines += ["## Not reproduced", "", "CascadeServe (the paper's other baseline in Fig. 11 / Table 5) is not run; the "
              "complexity subsample is not charged as extra GPU load; re-scheduling's algorithm time is the modelled "
              f"{settings.planning_delay_s:g} s, not our planner's wall time.", "",
              "Figure: fig11_fluctuating.png (per window of arrivals; dashed: trace changes, dotted: re-schedules applied). "
              "TensorBoard runs in tensorboard/.", ""]
    path.write_text("\n".join(lines))


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def plot(out: Path, results: dict[str, Any]) -> None:
    runs = results["runs"]
    edges = np.array(results["window_edges_s"])
    mids_min = (edges[:-1] + edges[1:]) / 2 / 60
    metrics = (("p95_e2e_s", "p95 E2E (s)"), ("slo_attainment", "SLO attainment"), ("quality", "mean score"))
    fig, axes = plt.subplots(len(metrics) + 1, len(runs), figsize=(6 * len(runs), 11), squeeze=False)
    for col, (key, cell) in enumerate(runs.items()):
        for row, (metric, label) in enumerate(metrics):
            ax = axes[row][col]
            for system in SYSTEMS:
                ax.plot(mids_min, cell[system]["windows"][metric], marker=".", label=system)
            ax.set_ylabel(label)
            if metric == "p95_e2e_s":
                ax.set_yscale("log")
        ax = axes[len(metrics)][col]
        timeline = cell[RESCHEDULING]["gpus_timeline"]
        if timeline:
            times = np.array([t for t, _ in timeline]) / 60
            gpus = np.array([g for _, g in timeline])
            for i, model in enumerate(CASCADIA_MODELS):
                ax.step(times, gpus[:, i], where="post", label=f"{model} GPUs (re-scheduling)")
        ax.set_ylabel("GPUs")
        ax.set_xlabel("time (min)")
        axes[0][col].set_title(key)
        for row in range(len(metrics) + 1):
            for p in results["phases"][1:]:
                axes[row][col].axvline(p["start_s"] / 60, color="grey", ls="--", lw=0.8)
            for e in cell[RESCHEDULING]["reschedules"]:
                if e["applied_s"] is not None:
                    axes[row][col].axvline(e["applied_s"] / 60, color="black", ls=":", lw=0.8)
        axes[0][col].legend(fontsize=7)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "fig11_fluctuating.png", dpi=90)
    plt.close(fig)


def write_tensorboard(root: Path, results: dict[str, Any]) -> None:
    """One run per system; ``<q>/<metric>`` per window (step = window index) and
    ``<q>/total/<metric>`` at step 0."""
    if root.exists():
        shutil.rmtree(root)
    for system in SYSTEMS:
        writer = SummaryWriter(log_dir=str(root / system.replace(" ", "_").replace("(", "").replace(")", "")))
        for key, cell in results["runs"].items():
            for metric, values in cell[system]["windows"].items():
                for step, value in enumerate(values):
                    if math.isfinite(value):
                        writer.add_scalar(f"{key}/{metric}", value, step)
            for metric, value in cell[system]["total"].items():
                writer.add_scalar(f"{key}/total/{metric}", value, 0)
        writer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="40 s segments, one quality requirement (< 30 s)")
    parser.add_argument("--workers", type=int, default=2, help="processes running the (quality, system) cells (1 or 2)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "results" / "cascadia_fluctuating")
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else FULL
    args.out.mkdir(parents=True, exist_ok=True)
    results = run_experiment(settings, workers=args.workers)
    write_report(args.out / "report.md", results, settings)
    (args.out / "results.json").write_text(json.dumps(results, indent=1, default=float) + "\n")
    plot(args.out, results)
    write_tensorboard(args.out / "tensorboard", results)
    print(f"wrote {args.out / 'report.md'} ({results['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
