"""Reproduce Cascadia's results (Cascadia §4) on its testbed: 32 H100-80GB, the DeepSeek
cascade 7B -> 70B -> 671B (int4), judge latency 0.27 s.

1. Fig. 5-6 / Table 2: Cascadia (Alg. 1 plan: thresholds, GPUs and parallelism per model) vs
   CascadeServe and the stand-alone model (the one §4.1 names: DeepSeek-671B for quality
   requirements 90 and 85, DeepSeek-dist-70B for 80 and 70, on all 32 GPUs with the parallelism
   the same lookup tables choose) on three workload mixes x quality requirements 90 / 85 / 80 /
   70. Metrics: the minimum SLO scale at 95% attainment (= p95 E2E / the trace's base latency,
   §4.1), the mean accepted score, and throughput (requests / makespan with all requests queued
   at t = 0).
2. CascadeServe plans a gear plan with the quality requirement as its accuracy
   SLO (``baselines.cascadeserve.accuracy_slo``) on the same 32 GPUs (4 servers of 8): its own
   hardware mapping (greedy pruning + LP load balancer) places replicas of each model, one replica
   shape per model (the TP-only shape with the highest sustainable rate per GPU in the same
   lookup tables: "we tune the parallelism ... for CascadeServe", Cascadia §4.1); a replica's
   per-request runtime is 1 / that rate (servegym engines batch continuously, so the profile of a
   batch of b is b times it). The QPS ranges are weighted by the QPS the producer measures in
   100 ms intervals of the trace (App. C.2's re-planning with the measured distribution; the
   Zipf default would assume mostly idle intervals, which these steady traces never have).
   Serving switches gears every 100 ms by the measured QPS with §5's α rule
   (``baselines.cascadeserve.cluster_gears``). The throughput run (a burst at t = 0) is one
   measurement, which App. C.2's linear QPS mapping may put in any range; to keep the accuracy
   SLO it uses the cheapest gear that meets it alone (``single_measurement_gear``).
3. §4.4 / Fig. 10: planning time against cluster size (16-80 GPUs, load scaled with the GPUs).
4. App. J: the bi-level plan's J against exhaustive search (every threshold vector with its own
   enumerated allocation) on a small Llama-3 8B -> 70B case and on the DeepSeek case.
5. The registered ``cascadia`` policy driving servegym/Cascade-v0 with trace 1's plan deployed.
6. §4.2 / Fig. 7: the Llama cascade (Llama-3-8B -> 70B) at App. I's quality requirement 80,
   Cascadia vs the stand-alone Llama-3-70B; and a load sweep (trace 3, deployments held, rate
   raised) that shows how far from saturation the traces' rates leave the 32 GPUs.

``headlines(results)`` turns ``results.json`` into ``experiments.headlines.Headline`` rows (§4.2's
averages and Fig. 7), each row that does not reproduce with its cause in this run's numbers.

Traces: the paper subsamples MT-Bench into three traces of different lengths and complexity
(§4.1). Here each trace has a length distribution, a Poisson rate and the difficulty mean δ
that ``simulator.cascade_quality.TRACE_DIFFICULTY_MEAN`` fitted to Table 2's rows for that
trace: trace 1 ShareGPT lengths (``sharegpt_cauchy``), trace 2 long-input short-output
(``cnn_dailymail``), trace 3 ShareGPT. Rates load the cluster (a stand-alone 671B on 32 GPUs
carries about 85 req/s of ShareGPT here). Fig. 11 / Table 5 (fluctuating workload) is
``experiments.cascadia_fluctuating``.

Every served run is repeated on the request seeds (``--seeds``, default 0 1 2; ``--quick`` the
first) and its numbers averaged. One seed is not enough here: the minimum SLO scale is the 95th
percentile of 1,500 requests with long-tailed outputs, and the burst throughput divides 600
requests by the time the last one ends; stand-alone / Cascadia SLO scale averaged 0.97x over the
12 cases on seed 0 and 1.09x, 1.08x on seeds 1 and 2 (the direction flips). The per-seed minimum
SLO scale and throughput stay in each cell (``*_by_seed``).

Outputs under ``--out`` (default ``results/cascadia``): ``report.md`` (the paper's numbers next
to ours), ``results.json``, PNGs and ``tensorboard/<system>/`` runs with the same tags.

    python -m experiments.cascadia_reproduction [--quick] [--out DIR] [--seeds 0 1 2] [--workers 2] [--address auto|HOST:PORT]

The twelve (quality requirement, trace) cases fan out over Ray tasks (``simulator.fanout``;
``--workers 1`` runs them here, without Ray); the rest runs here.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import matplotlib.pyplot as plt
import numpy as np

import baselines
import envs  # noqa: F401  (registers the IDs)
from agents.rollout import run_episode
from baselines.cascadeserve.cluster_gears import GearSwitcher, gear_thresholds, single_measurement_gear
from baselines.cascadeserve.planner import GearPlan, PlanningInfeasibleError, PlanningProblem, plan_gears
from baselines.cascadeserve.table_inputs import accuracy_slo_problem, instance_groups
from baselines.cascadia.milp import InfeasibleAllocationError
from baselines.cascadia.parallelism import ModelLatencyTable, TableSettings, load_cached_tables, model_table
from baselines.cascadia.planner import CascadePlan, CascadiaPlanner
from baselines.cascadia.thresholds import QualityProfile
from envs.scenario import InstanceGroup
from envs.scenarios.cascadia import CASCADIA_ENGINE, CASCADIA_MODELS
from experiments.harness import ExperimentParser, Run, Scalar, markdown_table, mean_over_seeds, save_figure
from experiments.headlines import Headline
from hardware.latency import latency_model
from simulator.cascade import assign_cascade_quality
from simulator.routers.cascade import CascadeRouter
from simulator.cascade_quality import TRACE_DIFFICULTY_MEAN
from simulator.cli import command
from simulator.fanout import fan_out
from simulator.backends import make_cluster
from simulator.instance import InstanceConfig
from simulator.outcome import RequestOutcome
from simulator.request import Request
from simulator.workloads import PoissonArrivals, generate_requests, length_sampler

GPU = "H100-80GB"
TOTAL_GPUS = 32
DTYPES = ("fp16", "fp16", "int4")
QUALITY_REQUIREMENTS = (90.0, 85.0, 80.0, 70.0)
ATTAINMENT = 0.95
LLAMA_CASCADE = ("Llama-3-8B", "Llama-3-70B")
SYSTEMS = ("Cascadia", "CascadeServe", "Stand-alone")
FANS_OUT = True  # the (quality requirement, trace) cases: takes --workers / --address (simulator.fanout)
BASELINES = ("CascadeServe", "Stand-alone")
GPUS_PER_SERVER = 8  # Cascadia §4.1: 4 servers of 8 H100s
CASCADESERVE_LEVELS = 11  # CascadeServe §4.2: "a small number of discretized thresholds"
CASCADESERVE_RANGES = 6
CASCADESERVE_MAX_BATCH = 4  # with runtimes linear in the batch, longer queues only add waiting
# Cascadia §4.1: "For quality requirement of 90 and 85, we choose stand-alone DeepSeek-671B for comparison,
# and for quality requirement of 80 and 70, we choose stand-alone DeepSeek-dist-70B" (index into CASCADIA_MODELS).
STANDALONE_MODEL_INDEX = {90.0: 2, 85.0: 2, 80.0: 1, 70.0: 1}


@dataclass(frozen=True)
class Trace:
    """A workload mix: lengths, Poisson rate and difficulty mean δ (complexity)."""

    name: str
    lengths: str
    rate_rps: float
    difficulty_mean: float


TRACES = (
    Trace("trace1", "sharegpt_cauchy", 50.0, TRACE_DIFFICULTY_MEAN[1]),
    Trace("trace2", "cnn_dailymail", 25.0, TRACE_DIFFICULTY_MEAN[2]),
    Trace("trace3", "sharegpt_cauchy", 60.0, TRACE_DIFFICULTY_MEAN[3]),
)

# Cascadia's numbers: (value, where).
PAPER: dict[str, tuple[float, str]] = {
    "slo_scale_gain_vs_baselines_mean": (2.3, "2.3x tighter SLOs on average over both baselines (abstract)"),
    "throughput_gain_vs_baselines_mean": (2.4, "2.4x higher throughput on average over both baselines (abstract)"),
    "slo_scale_gain_vs_standalone_mean": (2.8, "2.8x lower SLO scale than stand-alone on average (§4.2)"),
    "slo_scale_gain_vs_standalone_max": (4.0, "up to 4x (§4.2)"),
    "throughput_gain_vs_standalone_mean": (3.0, "3x higher throughput on average (§4.2)"),
    "throughput_gain_vs_standalone_max": (5.0, "up to 5x (§4.2)"),
    "slo_scale_gain_vs_cascadeserve_mean": (1.7, "1.7x lower SLO scale than CascadeServe on average (§4.2)"),
    "slo_scale_gain_vs_cascadeserve_max": (2.5, "up to 2.5x (§4.2)"),
    "throughput_gain_vs_cascadeserve_mean": (1.7, "1.7x higher throughput than CascadeServe on average (§4.2)"),
    "throughput_gain_vs_cascadeserve_max": (3.3, "up to 3.3x (§4.2)"),
    "planning_time_32_gpus_s": (20.0, "<= 20 s at 32 GPUs on 12 cores (§4.4, Fig. 10)"),
    "planning_time_80_gpus_s": (60.0, "< 60 s at 80 GPUs (§4.4, Fig. 10)"),
    "gap_to_exhaustive_small": (0.06, "2-6% gap to exhaustive search (App. J, Llama 8B -> 70B)"),
}
TABLE2 = {  # (q, trace): h1, h2, p1, p2, p3, f1, f2, f3 (App. E, Table 2)
    (90, 1): (99, 91, 100, 94, 50, 4, 8, 20), (85, 1): (74, 64, 100, 62, 21, 4, 12, 16),
    (80, 1): (69, 25, 100, 54, 11, 6, 14, 12), (80, 2): (61, 18, 100, 31, 3, 8, 16, 8),
    (80, 3): (32, 0, 100, 23, 0, 18, 14, 0), (70, 3): (10, 0, 100, 5, 0, 24, 8, 0),
}


@dataclass(frozen=True)
class Settings:
    requests: int
    throughput_requests: int
    profile_requests: int
    threshold_levels: int
    scaling_gpus: tuple[int, ...]
    exhaustive_levels: int
    env_requests: int
    cascadeserve_samples: int
    cascadeserve_sim_s: float
    llama_traces: tuple[int, ...]  # indices into TRACES for the Llama cascade (Fig. 7)
    load_factors: tuple[float, ...]  # trace 3's rate times these in the Llama load sweep
    load_duration_s: float  # arrivals per load-sweep run
    seeds: tuple[int, ...] = (0,)  # request seeds: every served run is repeated per seed and averaged


QUICK = Settings(120, 120, 400, 21, (16, 32), 6, 60, 40, 3.0, (2,), (1.0, 3.0), 5.0)
FULL = Settings(1500, 600, 1000, 101, (16, 32, 48, 64, 80), 11, 600, 200, 10.0, (0, 1, 2), (1.0, 2.0, 3.0), 30.0)
LLAMA_QUALITY = 80.0  # Cascadia App. I runs the Llama cascade at average quality requirement 80


SERVE_SEED, BURST_SEED, SEED_STRIDE = 11, 13, 100  # request seed s serves seed 11 + 100 s, its burst 13 + 100 s


# (instance groups, cascade models, thresholds, CascadeServe's gear plan when it switches gears)
Deployment = tuple[tuple[InstanceGroup, ...], tuple[str, ...], tuple[float, ...], GearPlan | None]


# ----------------------------------------------------------------------------- workload
def trace_requests(trace: Trace, models: tuple[str, ...], count: int, seed: int, burst: bool = False) -> list[Request]:
    """``count`` requests of ``trace`` scored on every model by ``simulator.cascade`` (Poisson
    arrivals at the trace's rate; all at t = 0 with ``burst``)."""
    rng = np.random.default_rng(seed)
    requests = generate_requests(PoissonArrivals(trace.rate_rps), length_sampler(trace.lengths), count, rng)
    assign_cascade_quality(requests, models, rng, difficulty_mean=trace.difficulty_mean)
    if burst:
        for request in requests:
            request.arrival_s = 0.0
    return requests


def serve(requests: list[Request], groups: tuple[InstanceGroup, ...], models: tuple[str, ...], thresholds: tuple[float, ...],
          gear_plan: GearPlan | None = None) -> tuple[list[RequestOutcome], float]:
    """Run the requests through the cascade (``simulator.cascade.CascadeRouter``); with a
    ``gear_plan`` CascadeServe's producer switches the thresholds every 100 ms. Returns the
    outcomes and the makespan (s)."""
    router = CascadeRouter(models, thresholds)
    cluster = make_cluster({GPU: TOTAL_GPUS * 4}, **router.cluster_options())
    for group in groups:
        for _ in range(group.count):
            cluster.deploy(group.config, ready_now=True)
    if gear_plan is not None:
        GearSwitcher(cluster, router, gear_plan, [r.arrival_s for r in requests])
    outcomes = cluster.run(requests)
    return outcomes, cluster.events.now_s


def base_latency_s(trace: Trace) -> float:
    """The SLO base (§4.1: "the system's average single-request processing latency"): mean E2E
    of the trace's requests served one at a time by the cascade's middle model (TP 2)."""
    requests = trace_requests(trace, CASCADIA_MODELS, 60, seed=99)
    for i, request in enumerate(requests):
        request.arrival_s = 1000.0 * i
    group = InstanceGroup(InstanceConfig(gpu=GPU, model=CASCADIA_MODELS[1], tp=2), 1)
    outcomes, _ = serve(requests, (group,), (CASCADIA_MODELS[1],), ())
    return float(np.mean([o.e2e_s for o in outcomes]))


# ----------------------------------------------------------------------------- systems
def deepseek_tables(trace: Trace, cache: dict[str, ModelLatencyTable]) -> list[ModelLatencyTable]:
    settings = TableSettings(gpu=GPU, lengths=trace.lengths)
    return [model_table(m, d, settings, cache) for m, d in zip(CASCADIA_MODELS, DTYPES)]


def profile_of(trace: Trace, models: tuple[str, ...], settings: Settings) -> QualityProfile:
    return QualityProfile.from_requests(trace_requests(trace, models, settings.profile_requests, seed=7), models)


def standalone(trace: Trace, quality_min: float, tables: list[ModelLatencyTable]) -> tuple[int, tuple[InstanceGroup, ...]]:
    """§4.1's stand-alone baseline: the model the paper names for ``quality_min``
    (``STANDALONE_MODEL_INDEX``), its parallelism for all 32 GPUs from the same tables."""
    if quality_min not in STANDALONE_MODEL_INDEX:
        raise ValueError(f"Cascadia §4.1 names no stand-alone model for quality requirement {quality_min!r}; "
                         f"it names one for {sorted(STANDALONE_MODEL_INDEX)}")
    index = STANDALONE_MODEL_INDEX[quality_min]
    strategy = tables[index].strategy_for(trace.rate_rps, TOTAL_GPUS)
    return index, strategy.instance_groups(GPU, tables[index].model, tables[index].dtype)


def cascadeserve_problem(trace: Trace, quality_min: float, tables: list[ModelLatencyTable], profile: QualityProfile,
                         settings: Settings) -> PlanningProblem:
    """CascadeServe's Alg. 1 inputs on the 32-GPU testbed with ``quality_min`` as accuracy SLO
    (module docstring, item 2); QPS weights from the profiling requests' arrivals."""
    arrivals_s = [r.arrival_s for r in trace_requests(trace, CASCADIA_MODELS, settings.profile_requests, seed=7)]
    return accuracy_slo_problem(tables, profile.scores, arrivals_s, quality_min, gpu=GPU, total_gpus=TOTAL_GPUS,
                                gpus_per_server=GPUS_PER_SERVER, threshold_levels=CASCADESERVE_LEVELS, n_ranges=CASCADESERVE_RANGES,
                                max_batch=CASCADESERVE_MAX_BATCH, num_cascade_samples=settings.cascadeserve_samples,
                                sim_duration_s=settings.cascadeserve_sim_s)


def measure(outcomes: list[RequestOutcome], makespan_s: float, base_s: float) -> dict[str, float]:
    e2e = np.array([o.e2e_s for o in outcomes if o.completed])
    return {
        "p95_e2e_s": float(np.percentile(e2e, 95)),
        "min_slo_scale": float(np.percentile(e2e, 100 * ATTAINMENT)) / base_s,
        "quality": float(np.mean([o.quality for o in outcomes if o.completed])),
        "completed": float(len(e2e)),
        "lost": float(len(outcomes) - len(e2e)),
        "makespan_s": makespan_s,
    }


def attainment_curve(outcomes: list[RequestOutcome], base_s: float, scales: np.ndarray) -> list[float]:
    e2e = np.array([o.e2e_s for o in outcomes if o.completed])
    return [float(np.mean(e2e <= s * base_s)) for s in scales]


def run_case(trace: Trace, quality_min: float, tables: list[ModelLatencyTable], profile: QualityProfile,
             base_s: float, settings: Settings, scales: np.ndarray) -> dict[str, Any]:
    """Plan Cascadia and CascadeServe, pick the stand-alone model, serve all three on the same
    requests (CascadeServe switching gears; its burst run on ``single_measurement_gear``)."""
    planner = CascadiaPlanner(tables, TOTAL_GPUS, profile, quality_min, threshold_levels=settings.threshold_levels)
    plan = planner.plan(trace.rate_rps)
    systems: dict[str, Deployment] = {"Cascadia": (plan.instance_groups(GPU, tables), CASCADIA_MODELS, plan.thresholds, None)}
    cells: dict[str, Any] = {}
    try:
        gears = plan_gears(cascadeserve_problem(trace, quality_min, tables, profile, settings), np.random.default_rng(0))
    except PlanningInfeasibleError as error:
        cells["cascadeserve_error"] = str(error)
    else:
        burst_gear = single_measurement_gear(gears, quality_min)
        systems["CascadeServe"] = (instance_groups(gears, tables, GPU), CASCADIA_MODELS, gear_thresholds(gears, burst_gear), gears)
        cells["cascadeserve_plan"] = gear_plan_row(gears, burst_gear)
    index, groups = standalone(trace, quality_min, tables)
    systems["Stand-alone"] = (groups, (CASCADIA_MODELS[index],), (), None)
    for system, (deployment, models, thresholds, gear_plan) in systems.items():
        per_seed = []
        for seed in settings.seeds:
            requests = trace_requests(trace, CASCADIA_MODELS, settings.requests, seed=SERVE_SEED + SEED_STRIDE * seed)
            outcomes, makespan = serve(requests, deployment, models, thresholds, gear_plan)
            cell = measure(outcomes, makespan, base_s)
            burst_requests = trace_requests(trace, CASCADIA_MODELS, settings.throughput_requests,
                                            seed=BURST_SEED + SEED_STRIDE * seed, burst=True)
            burst, burst_makespan = serve(burst_requests, deployment, models, thresholds)
            cell["throughput_rps"] = sum(o.completed for o in burst) / burst_makespan
            cell["throughput_quality"] = float(np.mean([o.quality for o in burst if o.completed]))
            cell["attainment"] = attainment_curve(outcomes, base_s, scales)
            per_seed.append(cell)
        cells[system] = mean_over_seeds(per_seed) | {
            "deployment": describe(deployment),
            "min_slo_scale_by_seed": [c["min_slo_scale"] for c in per_seed],
            "throughput_rps_by_seed": [c["throughput_rps"] for c in per_seed],
        }
    cells["plan"] = plan_row(plan)
    cells["standalone_model"] = CASCADIA_MODELS[index]
    return cells


def gear_plan_row(plan: GearPlan, burst_gear: int) -> dict[str, Any]:
    """CascadeServe's gears (QPS upper bound, thresholds, validation accuracy, time share) and plan."""
    return {
        "gears": [[g.qps_high, list(gear_thresholds(plan, i)), g.cascade.quality, w]
                  for i, (g, w) in enumerate(zip(plan.gears, plan.qps_weights))],
        "planned_accuracy": plan.accuracy(), "burst_gear": burst_gear, "replicas": plan.replica_counts(),
        "planning_time_s": plan.planning_time_s, "submodule_calls": plan.submodule_calls,
    }


def plan_row(plan: CascadePlan) -> dict[str, Any]:
    return {
        "thresholds": list(plan.thresholds), "reach_fractions": list(plan.routing.reach_fractions),
        "gpus": list(plan.gpus_by_model), "strategies": [s.describe() for s in plan.strategies],
        "planned_quality": plan.routing.quality, "planned_latency_s": plan.latency_s, "objective": plan.objective,
        "iterations": plan.iterations, "runtime_s": plan.runtime_s,
    }


# ----------------------------------------------------------------------------- §4.4 and App. J
def planning_time(cache: dict[str, ModelLatencyTable], settings: Settings) -> dict[int, dict[str, Any]]:
    """Alg. 1's runtime at each cluster size, trace 1 at a rate scaled with the GPUs, q = 85. A
    size where Alg. 1 cannot start (no allocation of its GPUs carries the loads of the initial
    proportional routing) is a row with the deployment solver's reason (``no_plan``) instead."""
    trace = TRACES[0]
    tables = deepseek_tables(trace, cache)
    profile = profile_of(trace, CASCADIA_MODELS, settings)
    rows: dict[int, dict[str, Any]] = {}
    for gpus in settings.scaling_gpus:
        started = time.perf_counter()
        planner = CascadiaPlanner(tables, gpus, profile, 85.0, threshold_levels=settings.threshold_levels)
        try:
            plan = planner.plan(trace.rate_rps * gpus / TOTAL_GPUS)
        except InfeasibleAllocationError as error:
            rows[gpus] = {"no_plan": str(error)}
            continue
        rows[gpus] = {"runtime_s": time.perf_counter() - started, "iterations": plan.iterations, "objective": plan.objective}
    return rows


def optimality_gap(tables: list[ModelLatencyTable], gpus: int, profile: QualityProfile, quality_min: float,
                   rate_rps: float, levels: int) -> dict[str, float]:
    planner = CascadiaPlanner(tables, gpus, profile, quality_min, threshold_levels=levels)
    plan, exhaustive = planner.plan(rate_rps), planner.exhaustive(rate_rps)
    return {"bilevel_objective": plan.objective, "exhaustive_objective": exhaustive.objective,
            "gap": plan.objective / exhaustive.objective - 1.0, "bilevel_runtime_s": plan.runtime_s,
            "exhaustive_runtime_s": exhaustive.runtime_s, "levels": float(levels), "gpus": float(gpus)}


def run_gaps(cache: dict[str, ModelLatencyTable], settings: Settings) -> dict[str, dict[str, float]]:
    trace = TRACES[0]
    llama_settings = TableSettings(gpu=GPU, lengths=trace.lengths)
    llama = [model_table(m, "fp16", llama_settings, cache) for m in LLAMA_CASCADE]
    gaps = {"llama_8_gpus": optimality_gap(llama, 8, profile_of(trace, LLAMA_CASCADE, settings), 80.0, 3.0, 21)}
    deepseek = deepseek_tables(trace, cache)
    gaps["deepseek_32_gpus"] = optimality_gap(deepseek, TOTAL_GPUS, profile_of(trace, CASCADIA_MODELS, settings), 85.0,
                                              trace.rate_rps, settings.exhaustive_levels)
    return gaps


def run_llama(cache: dict[str, ModelLatencyTable], settings: Settings, base_s: dict[str, float]) -> dict[str, Any]:
    """§4.2 / Fig. 7: the Llama cascade (Llama-3-8B -> 70B, fp16) on the same 32 GPUs at App. I's
    quality requirement 80, Cascadia's plan vs the stand-alone Llama-3-70B (its parallelism for 32
    GPUs from the tables), per trace at the trace's rate; then the load sweep: trace 3 with both
    deployments held (planned for its rate) and the rate raised by ``load_factors``, each run
    ``load_duration_s`` of arrivals, to show how far from saturation the traces' rates are."""
    results: dict[str, Any] = {"cases": {}, "load_sweep": {}}
    deployments = {}
    for index in sorted({*settings.llama_traces, len(TRACES) - 1}):
        trace = TRACES[index]
        tables = [model_table(m, "fp16", TableSettings(gpu=GPU, lengths=trace.lengths), cache) for m in LLAMA_CASCADE]
        plan = CascadiaPlanner(tables, TOTAL_GPUS, profile_of(trace, LLAMA_CASCADE, settings), LLAMA_QUALITY,
                               threshold_levels=settings.threshold_levels).plan(trace.rate_rps)
        deployments[trace.name] = {
            "Cascadia": (plan.instance_groups(GPU, tables), LLAMA_CASCADE, plan.thresholds),
            "Stand-alone": (tables[1].strategy_for(trace.rate_rps, TOTAL_GPUS).instance_groups(GPU, tables[1].model, tables[1].dtype),
                            (LLAMA_CASCADE[1],), ()),
        }
        if index in settings.llama_traces:
            cells: dict[str, Any] = {"thresholds": list(plan.thresholds), "reach_fractions": list(plan.routing.reach_fractions)}
            for system, (groups, models, thresholds) in deployments[trace.name].items():
                cells[system] = mean_over_seeds([
                    measure(*serve(trace_requests(trace, LLAMA_CASCADE, settings.requests, seed=SERVE_SEED + SEED_STRIDE * seed),
                                   groups, models, thresholds), base_s[trace.name])
                    for seed in settings.seeds]) | {"deployment": describe(groups)}
            results["cases"][trace.name] = cells
    trace = TRACES[-1]
    for factor in settings.load_factors:
        loaded = replace(trace, rate_rps=trace.rate_rps * factor)
        count = int(loaded.rate_rps * settings.load_duration_s)
        row: dict[str, Any] = {"rate_rps": loaded.rate_rps, "requests": count}
        for system, (groups, models, thresholds) in deployments[trace.name].items():
            row[system] = mean_over_seeds([
                measure(*serve(trace_requests(loaded, LLAMA_CASCADE, count, seed=SERVE_SEED + SEED_STRIDE * seed),
                               groups, models, thresholds), base_s[trace.name])
                for seed in settings.seeds])
        results["load_sweep"][f"x{factor:g}"] = row
    return results


def describe(groups: tuple[InstanceGroup, ...]) -> str:
    return ", ".join(f"{g.count} x {g.config.model} TP{g.config.tp} PP{g.config.pp}" for g in groups if g.count)


def run_env_policy(cache: dict[str, ModelLatencyTable], settings: Settings, plan_row_q85: dict[str, Any],
                   groups: tuple[InstanceGroup, ...]) -> dict[str, float]:
    """The ``cascadia`` policy on Cascade-v0 (scenario ``cascadia``) with trace 1's q = 85 plan deployed."""
    trace = TRACES[0]
    env = gym.make("servegym/Cascade-v0", scenario="cascadia", instances=groups, threshold_levels=settings.threshold_levels,
                   quality_min=85.0, episode_requests=settings.env_requests, rate_rps=trace.rate_rps,
                   lengths=trace.lengths, difficulty_mean=trace.difficulty_mean)
    tables = deepseek_tables(TRACES[0], cache)
    policy = baselines.make("cascadia", env, tables=tables, profile_requests=settings.profile_requests)
    metrics = run_episode(env, policy, seed=0)
    return {"policy_h1": policy.thresholds[0], "policy_h2": policy.thresholds[1], "plan_h1": plan_row_q85["thresholds"][0],
            "plan_h2": plan_row_q85["thresholds"][1], "replans": float(policy.replans), "quality_mean": metrics.get("quality_mean", float("nan")),
            "e2e_p95_s": metrics.get("e2e_p95_s", float("nan")), "return": metrics["return"]}


# ----------------------------------------------------------------------------- headline and outputs
def headline(cases: dict[str, dict[str, Any]], scaling: dict[int, dict[str, Any]], gaps: dict[str, dict[str, float]]) -> dict[str, float]:
    """Cascadia's gains: baseline SLO scale / Cascadia's and Cascadia's throughput / baseline's,
    mean and max over the cases a baseline has (CascadeServe misses cases it finds infeasible);
    "baselines" pools both baselines' ratios (the abstract's average)."""
    values: dict[str, float] = {}
    pooled: dict[str, list[float]] = {"slo_scale": [], "throughput": []}
    for baseline in BASELINES:
        served = [c for c in cases.values() if baseline in c]
        ratios = {"slo_scale": [c[baseline]["min_slo_scale"] / c["Cascadia"]["min_slo_scale"] for c in served],
                  "throughput": [c["Cascadia"]["throughput_rps"] / c[baseline]["throughput_rps"] for c in served]}
        key = "standalone" if baseline == "Stand-alone" else "cascadeserve"
        for metric, found in ratios.items():
            pooled[metric] += found
            values[f"{metric}_gain_vs_{key}_mean"] = float(np.mean(found)) if found else float("nan")
            values[f"{metric}_gain_vs_{key}_max"] = float(np.max(found)) if found else float("nan")
    for metric, found in pooled.items():
        values[f"{metric}_gain_vs_baselines_mean"] = float(np.mean(found))
    values["gap_to_exhaustive_small"] = gaps["llama_8_gpus"]["gap"]
    for gpus in (32, 80):
        values[f"planning_time_{gpus}_gpus_s"] = scaling.get(gpus, {}).get("runtime_s", float("nan"))
    return values


COMMAND = "python -m experiments.cascadia_reproduction"
PAPER_SETUP = "paper setup (§4.1): 32 H100-80GB, DeepSeek 7B -> 70B -> 671B int4, traces 1-3 x quality 90/85/80/70"
# (results["headline"] key, where, claim, metric, paper value, paper text); the §4.2 averages.
HEADLINE_CLAIMS = (
    ("slo_scale_gain_vs_standalone_mean", "§4.2, Fig. 5", "lower SLO scale at 95% attainment than stand-alone",
     "stand-alone / Cascadia minimum SLO scale, mean over the 12 cases", 2.8, "2.8x on average (up to 4x)"),
    ("throughput_gain_vs_standalone_mean", "§4.2, Fig. 6", "higher throughput than stand-alone",
     "Cascadia / stand-alone throughput, mean over the 12 cases", 3.0, "3x on average (up to 5x)"),
    ("slo_scale_gain_vs_cascadeserve_mean", "§4.2, Fig. 5", "lower SLO scale at 95% attainment than CascadeServe",
     "CascadeServe / Cascadia minimum SLO scale, mean over the cases CascadeServe can plan", 1.7,
     "1.7x on average (up to 2.5x)"),
    ("throughput_gain_vs_cascadeserve_mean", "§4.2, Fig. 6", "higher throughput than CascadeServe",
     "Cascadia / CascadeServe throughput, mean over the cases CascadeServe can plan", 1.7, "1.7x on average (up to 3.3x)"),
)


def headlines(results: dict[str, Any]) -> list[Headline]:
    """§4.2's average gains over stand-alone and CascadeServe (paper setup), each with its cause
    when it does not reproduce (``standalone_cause``, ``cascadeserve_cause``)."""
    rows = []
    for key, where, claim, metric, value, text in HEADLINE_CLAIMS:
        row = Headline(paper="Cascadia", where=where, claim=claim, metric=metric, unit="×", paper_value=value,
                       paper_text=text, ours=float(results["headline"][key]), no_effect=1.0, setup=PAPER_SETUP,
                       command=COMMAND)
        if not row.reproduced:
            row = replace(row, cause=standalone_cause(results) if "standalone" in key else cascadeserve_cause(results))
        rows.append(row)
    llama = results["llama"]["cases"]
    gain = float(np.mean([c["Stand-alone"]["min_slo_scale"] / c["Cascadia"]["min_slo_scale"] for c in llama.values()]))
    row = Headline(paper="Cascadia", where="§4.2, Fig. 7", claim="Llama cascade: lower SLO scale than the stand-alone model",
                   metric=f"stand-alone Llama-3-70B / Cascadia minimum SLO scale at quality {LLAMA_QUALITY:g} (App. I), mean "
                   f"over {', '.join(llama)}", unit="×", paper_value=2.6, paper_text="2.6x on average over the baselines (up to 3.8x)",
                   ours=gain, no_effect=1.0, setup="paper setup (§4.2): 32 H100-80GB, Llama-3-8B -> 70B fp16", command=COMMAND)
    rows.append(row if row.reproduced else replace(row, cause=load_cause(results)))
    return rows


def load_cause(results: dict[str, Any]) -> str:
    """The load regime behind the Fig. 7 row, in this run's numbers: per-trace gains with the
    stand-alone's SLO scale, and Cascadia's p95 gain at each rate of the load sweep."""
    llama = results["llama"]
    per_trace = "; ".join(
        f"{name} {c['Stand-alone']['min_slo_scale'] / c['Cascadia']['min_slo_scale']:.2f}x (stand-alone SLO scale "
        f"{c['Stand-alone']['min_slo_scale']:.2f}; Cascadia thresholds {c['thresholds']}, mean score {c['Cascadia']['quality']:.1f})"
        for name, c in llama["cases"].items())
    sweep = ", ".join(f"{row['Stand-alone']['p95_e2e_s'] / row['Cascadia']['p95_e2e_s']:.2f}x at {row['rate_rps']:g} req/s"
                      for row in llama["load_sweep"].values())
    return ("Setting: load. Cascadia states no arrival rate; at the traces' rates (25-60 req/s) the stand-alone runs "
            f"at low SLO scales, far from the 12-17 its baselines need in the paper (§4.2, Table 5). Per trace: {per_trace}. "
            f"Trace 3 with both deployments held, Cascadia's p95 gain by rate: {sweep}. Where the 70B alone scores below "
            "the requirement, Alg. 1 sends every request through both models (a high threshold), paying both plus the "
            "0.27 s judge. The paper's 0.25-0.64 req/s on 32 GPUs (Table 4) also implies far longer (reasoning) outputs "
            "than the ShareGPT stand-in for MT-Bench.")


def standalone_throughput_rps(results: dict[str, Any], model_index: int, trace: str) -> float:
    """The stand-alone ``CASCADIA_MODELS[model_index]``'s measured throughput on ``trace`` (32 GPUs)."""
    for q, index in STANDALONE_MODEL_INDEX.items():
        if index == model_index:
            return float(results["cases"][f"q{q:g}/{trace}"]["Stand-alone"]["throughput_rps"])
    raise ValueError(f"no stand-alone run of model index {model_index!r}")


def standalone_gains_text(results: dict[str, Any]) -> str:
    """Cascadia's mean gains over the stand-alone model, over the seeds and seed by seed."""
    cases = results["cases"].values()
    seeds = len(next(iter(cases))["Cascadia"]["min_slo_scale_by_seed"])
    slo = [float(np.mean([c["Stand-alone"]["min_slo_scale_by_seed"][s] / c["Cascadia"]["min_slo_scale_by_seed"][s]
                          for c in cases])) for s in range(seeds)]
    throughput = [float(np.mean([c["Cascadia"]["throughput_rps_by_seed"][s] / c["Stand-alone"]["throughput_rps_by_seed"][s]
                                 for c in cases])) for s in range(seeds)]
    gains = results["headline"]
    return (f"Cascadia's SLO scale gain {gains['slo_scale_gain_vs_standalone_mean']:.2f}x and throughput gain "
            f"{gains['throughput_gain_vs_standalone_mean']:.2f}x on average (paper 2.8x, 3x); request seed by seed "
            f"{', '.join(f'{v:.2f}x' for v in slo)} and {', '.join(f'{v:.2f}x' for v in throughput)}")


def cost_ratios(results: dict[str, Any]) -> dict[str, float]:
    """The 671B's GPU-seconds per request over the 70B's, per trace: the inverse ratio of their
    stand-alone throughputs on the same 32 GPUs."""
    return {t.name: standalone_throughput_rps(results, 1, t.name) / standalone_throughput_rps(results, 2, t.name)
            for t in TRACES}


def cost_ratio_text(results: dict[str, Any]) -> str:
    ratios = cost_ratios(results).values()
    low, high = f"{min(ratios):.2f}", f"{max(ratios):.2f}"
    return (f"the simulator's {CASCADIA_MODELS[2]} costs {low if low == high else f'{low}-{high}'}x the GPU-seconds per request "
            f"of {CASCADIA_MODELS[1]}, where Cascadia's Table 2 (90, 1) gives the 671B 20 GPUs for 50% of requests vs "
            "8 GPUs for 94% on the 70B (~4.7x the GPUs per request)")


def standalone_cause(results: dict[str, Any]) -> str:
    """Why the cascade gains less over the stand-alone model than in the paper, in this run's numbers."""
    large, medium = CASCADIA_MODELS[2], CASCADIA_MODELS[1]
    per_trace = "; ".join(f"{t.name} {standalone_throughput_rps(results, 2, t.name):.2f} vs "
                          f"{standalone_throughput_rps(results, 1, t.name):.2f} req/s" for t in TRACES)
    unloaded = results["unloaded_p95_s"]
    tpot_ms = latency_model(GPU, large, tp=8, dtype="int4", engine=CASCADIA_ENGINE).decode_time_s(1, 1024) * 1e3
    return (f"Cost ordering of {large} (int4 MoE, 37B active) and {medium}: stand-alone on 32 GPUs, 671B vs 70B "
            f"throughput {per_trace}, so {cost_ratio_text(results)}; Fig. 1 has the 671B slowest, here its unloaded "
            f"p95 is {unloaded[large]:.1f} s vs {unloaded[medium]:.1f} s. The less the last stage costs against the "
            "70B, the less a cascade saves by stopping requests early, and a cascaded request pays every stage it "
            f"passes plus the 0.27 s judge: {standalone_gains_text(results)}. Check of the 671B's decode: one request "
            "at a time on 8 H100s, vLLM measured 16.1-16.6 ms per token with DeepSeek-R1-0528-AWQ "
            f"(tenstorrent/tt-inference-server#356); under {CASCADIA_ENGINE} the model gives {tpot_ms:.1f} ms, since "
            "the MoE routing, permutation and MLA decode kernels of a batch of one are not in its operator model "
            "(docs/validation.md). The load regime of the Fig. 7 row adds to it (the stand-alone runs at low SLO "
            "scales here).")


def cascadeserve_cause(results: dict[str, Any]) -> str:
    """Why Cascadia's edge over CascadeServe is smaller here, in this run's numbers."""
    cases = results["cases"]
    unplanned = [case for case, cells in cases.items() if "CascadeServe" not in cells]
    same = sum(1 for cells in cases.values() if "CascadeServe" in cells
               and abs(cells["CascadeServe"]["min_slo_scale"] / cells["Cascadia"]["min_slo_scale"] - 1.0) <= 0.2)
    return (f"Setting: CascadeServe here is planned from the same simulated per-trace latency tables as Cascadia "
            "(Cascadia §4.1 tunes its parallelism), so it does see the trace's lengths, the edge the paper credits "
            f"to Cascadia; its SLO scale is within 20% of Cascadia's in {same} of "
            f"{len(cases) - len(unplanned)} planned cases. The stand-alone rows' cost ordering ({cost_ratio_text(results)}) "
            "compresses every cascade's latency gap. CascadeServe has no plan "
            f"(accuracy SLO unattainable on 32 GPUs) in {', '.join(unplanned) or 'no case'}.")


def write_report(path: Path, results: dict[str, Any], setup: str) -> None:
    ours = results["headline"]
    lines = ["# Cascadia reproduction (Cascadia §4)", "", setup, "", "## Headline numbers", ""]
    lines += markdown_table(("metric", "paper", "ours"), [(key, f"{text} ({value:g})", f"{ours.get(key, float('nan')):.3g}")
                                                          for key, (value, text) in PAPER.items()])
    lines += ["", "## Fig. 5-6: minimum SLO scale at 95% attainment, throughput, quality", ""]
    rows = []
    for case, cells in results["cases"].items():
        for system in SYSTEMS:
            if system not in cells:
                rows.append((case, system, f"infeasible: {cells['cascadeserve_error']}", *"-" * 5))
                continue
            c = cells[system]
            rows.append((case, system, c["deployment"], f"{c['min_slo_scale']:.2f}", f"{c['p95_e2e_s']:.1f}",
                         f"{c['throughput_rps']:.2f}", f"{c['quality']:.1f}", f"{c['lost']:.0f}"))
    lines += markdown_table(("case", "system", "deployment", "min SLO scale", "p95 E2E (s)", "throughput (req/s)",
                             "mean score", "lost"), rows)
    lines += ["", "## CascadeServe's gear plans (accuracy SLO = the quality requirement)", "",
              "Gears: (QPS upper bound: thresholds h1, h2; validation accuracy; time share). The plan's accuracy is the "
              "time-weighted mean (App. C.2); the throughput run uses the burst gear, the cheapest gear meeting the SLO "
              "alone (its mean score in the burst run is shown).", ""]
    rows = []
    for case, cells in results["cases"].items():
        if "cascadeserve_plan" not in cells:
            continue
        g = cells["cascadeserve_plan"]
        gears = "; ".join(f"{high:.0f}: {', '.join(f'{h:g}' for h in hs)}; {acc:.1f}; {100 * w:.0f}%" for high, hs, acc, w in g["gears"])
        rows.append((case, " / ".join(str(n) for n in g["replicas"].values()), gears, f"{g['planned_accuracy']:.1f}",
                     g["burst_gear"], f"{cells['CascadeServe']['throughput_quality']:.1f}", f"{g['planning_time_s']:.1f}"))
    lines += markdown_table(("case", "replicas 7B / 70B / 671B", "gears", "planned accuracy", "burst gear",
                             "burst mean score", "planning (s)"), rows)
    lines += ["", "## Table 2-3 shape: Cascadia's plans (paper's Table 2 row where there is one)", ""]
    rows = []
    for case, cells in results["cases"].items():
        p = cells["plan"]
        q, trace = case.split("/")
        paper = TABLE2.get((int(float(q[1:])), int(trace[-1])))
        rows.append((case, ", ".join(f"{h:g}" for h in p["thresholds"]), ", ".join(f"{100 * r:.0f}" for r in p["reach_fractions"]),
                     ", ".join(map(str, p["gpus"])), "; ".join(p["strategies"]), f"{p['planned_quality']:.1f}",
                     f"{p['planned_latency_s']:.1f}", f"{p['objective']:.1f}", p["iterations"], f"{p['runtime_s']:.2f}",
                     f"{paper[:2]} / {paper[2:5]} / {paper[5:]}" if paper else "-"))
    lines += markdown_table(("case", "h1, h2", "p1, p2, p3 (%)", "f1, f2, f3", "parallelism", "planned Q", "planned L (s)",
                             "J", "iterations", "runtime (s)", "paper h / p / f"), rows)
    lines += ["", "## §4.4 / Fig. 10: planning time vs cluster size (trace 1, q = 85, load scaled with GPUs)", ""]
    planned = {gpus: row for gpus, row in results["scaling"].items() if "runtime_s" in row}
    lines += markdown_table(("GPUs", "runtime (s)", "iterations"), [(gpus, f"{row['runtime_s']:.2f}", row["iterations"])
                                                                     for gpus, row in planned.items()])
    lines += [f"- {gpus} GPUs: no plan, Alg. 1 cannot start: {row['no_plan']}"
              for gpus, row in results["scaling"].items() if "runtime_s" not in row]
    lines += ["", "## App. J: bi-level vs exhaustive search", ""]
    lines += markdown_table(
        ("case", "GPUs", "threshold levels", "J bi-level", "J exhaustive", "gap", "bi-level (s)", "exhaustive (s)"),
        [(case, f"{g['gpus']:.0f}", f"{g['levels']:.0f}", f"{g['bilevel_objective']:.2f}", f"{g['exhaustive_objective']:.2f}",
          f"{100 * g['gap']:.1f}%", f"{g['bilevel_runtime_s']:.2f}", f"{g['exhaustive_runtime_s']:.2f}")
         for case, g in results["gaps"].items()])
    unloaded = ", ".join(f"{model} {value:.1f} s" for model, value in results["unloaded_p95_s"].items())
    lines += ["", "## Reading the comparison", "",
              f"Unloaded p95 E2E per model in this simulator (trace 1 lengths, fastest replica shape, lowest table rate): {unloaded}. "
              "Cascadia Fig. 1 has the 671B slowest; here the int4 MoE (37B active) is not, so a stand-alone 671B is a strong "
              "baseline at high quality requirements, while every cascaded request pays each stage it passes plus the judge. "
              "The MILP balances per-stage p95s (§3.2), so the measured end-to-end p95 exceeds the planned L."]
    llama = results["llama"]
    lines += ["", f"## §4.2 / Fig. 7: Llama cascade (Llama-3-8B -> 70B) at quality {LLAMA_QUALITY:g} (App. I)", ""]
    lines += markdown_table(
        ("trace", "system", "deployment", "thresholds", "min SLO scale", "p95 E2E (s)", "mean score"),
        [(name, system, cells[system]["deployment"],
          ", ".join(f"{h:g}" for h in cells["thresholds"]) if system == "Cascadia" else "-",
          f"{cells[system]['min_slo_scale']:.2f}", f"{cells[system]['p95_e2e_s']:.1f}", f"{cells[system]['quality']:.1f}")
         for name, cells in llama["cases"].items() for system in ("Cascadia", "Stand-alone")])
    lines += ["", "Load sweep (trace 3, deployments planned for its rate and held, the rate raised):", ""]
    lines += markdown_table(("rate (req/s)", "requests", "stand-alone p95 (s)", "Cascadia p95 (s)"),
                            [(f"{row['rate_rps']:g}", row["requests"], f"{row['Stand-alone']['p95_e2e_s']:.1f}",
                              f"{row['Cascadia']['p95_e2e_s']:.1f}") for row in llama["load_sweep"].values()])
    env = results["env_policy"]
    lines += ["", "## The `cascadia` policy on servegym/Cascade-v0 (trace-1 q = 85 plan deployed)", "",
              f"Policy thresholds {env['policy_h1']:g}, {env['policy_h2']:g} (plan: {env['plan_h1']:g}, {env['plan_h2']:g}), "
              f"re-plans {env['replans']:.0f}, episode mean score {env['quality_mean']:.1f}, p95 E2E {env['e2e_p95_s']:.1f} s.",
              "", "Not reproduced: CascadeServe on the Llama cascade (our Fig. 7 has the stand-alone only), the ablation "
              "Fig. 9, Sarathi-Serve and RouteLLM; the fluctuating "
              "workload (Fig. 11 / Table 5) is `python -m experiments.cascadia_fluctuating`.",
              "", "Figures: fig5_slo_attainment.png, fig6_throughput.png, fig10_planning_time.png; TensorBoard runs in tensorboard/.", ""]
    path.write_text("\n".join(lines))


def plot_figures(out: Path, results: dict[str, Any], scales: np.ndarray) -> None:
    cases = results["cases"]
    fig, axes = plt.subplots(len(TRACES), len(QUALITY_REQUIREMENTS), figsize=(14, 9), squeeze=False)
    for row, trace in enumerate(TRACES):
        for col, q in enumerate(QUALITY_REQUIREMENTS):
            ax = axes[row][col]
            cell = cases[f"q{q:g}/{trace.name}"]
            for system in SYSTEMS:
                if system in cell:
                    ax.plot(scales, cell[system]["attainment"], label=system)
            ax.axhline(ATTAINMENT, color="grey", lw=0.5)
            ax.set_title(f"{trace.name}, q = {q:g}", fontsize=8)
            ax.set_xlabel("SLO scale", fontsize=7)
    axes[0][0].legend(fontsize=7)
    save_figure(fig, out / "fig5_slo_attainment.png", dpi=100)
    fig, ax = plt.subplots(figsize=(10, 4))
    names = list(cases)
    for i, system in enumerate(SYSTEMS):
        heights = [cases[n][system]["throughput_rps"] if system in cases[n] else 0.0 for n in names]
        ax.bar(np.arange(len(names)) + 0.27 * i, heights, 0.27, label=system)
    ax.set_xticks(np.arange(len(names)) + 0.27, names, rotation=45, fontsize=7)
    ax.set_ylabel("throughput (req/s)")
    ax.legend()
    save_figure(fig, out / "fig6_throughput.png", dpi=100)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    gpus = sorted(g for g, row in results["scaling"].items() if "runtime_s" in row)
    ax.plot(gpus, [results["scaling"][g]["runtime_s"] for g in gpus], marker="o")
    ax.set_xlabel("GPUs")
    ax.set_ylabel("planning time (s)")
    save_figure(fig, out / "fig10_planning_time.png", dpi=100)


def tensorboard_scalars(results: dict[str, Any]) -> dict[str, list[Scalar]]:
    """One run per system; scalars tagged ``<case>/<metric>`` (step 0)."""
    return {system: [(f"{case}/{metric}", cells[system][metric], 0) for case, cells in results["cases"].items()
                     if system in cells for metric in ("min_slo_scale", "p95_e2e_s", "throughput_rps", "quality")]
            for system in SYSTEMS}


# ----------------------------------------------------------------------------- main
@command("experiments.cascadia_reproduction")
def main(argv: list[str] | None = None) -> int:
    args = ExperimentParser(__doc__, "cascadia", "small request counts, coarse threshold grids, the first seed (< 90 s)",
                            seeds=[0, 1, 2], fans_out=FANS_OUT).parse_args(argv)
    settings = replace(QUICK, seeds=tuple(args.seeds[:1])) if args.quick else replace(FULL, seeds=tuple(args.seeds))
    run = Run(args.out)
    cache = load_cached_tables()
    scales = np.linspace(0.5, 12.0, 47)
    results: dict[str, Any] = {"cases": {}, "base_latency_s": {}}
    jobs = []
    for trace in TRACES:
        tables = deepseek_tables(trace, cache)
        profile = profile_of(trace, CASCADIA_MODELS, settings)
        base_s = results["base_latency_s"][trace.name] = base_latency_s(trace)
        jobs += [(trace, q, tables, profile, base_s, settings, scales) for q in QUALITY_REQUIREMENTS]
    run.log(f"{len(jobs)} cases on {args.workers} worker(s)")
    for (trace, q, *_), case in zip(jobs, fan_out(run_case, jobs, args.workers, args.address)):
        results["cases"][f"q{q:g}/{trace.name}"] = case
    run.log("cases done")
    results["unloaded_p95_s"] = {
        t.model: min(r.p95_s[0] for r in t.replicas) for t in deepseek_tables(TRACES[0], cache)
    }
    results["llama"] = run_llama(cache, settings, results["base_latency_s"])
    results["scaling"] = planning_time(cache, settings)
    results["gaps"] = run_gaps(cache, settings)
    q85 = results["cases"]["q85/trace1"]["plan"]
    tables = deepseek_tables(TRACES[0], cache)
    planner = CascadiaPlanner(tables, TOTAL_GPUS, profile_of(TRACES[0], CASCADIA_MODELS, settings), 85.0,
                              threshold_levels=settings.threshold_levels)
    groups = planner.plan(TRACES[0].rate_rps).instance_groups(GPU, tables)
    results["env_policy"] = run_env_policy(cache, settings, q85, groups)
    results["headline"] = headline(results["cases"], results["scaling"], results["gaps"])
    setup = (f"32 x {GPU}; cascade {' -> '.join(CASCADIA_MODELS)} (671B int4); traces "
             + "; ".join(f"{t.name}: {t.lengths}, Poisson {t.rate_rps:g} req/s, difficulty mean {t.difficulty_mean:g}" for t in TRACES)
             + f". {settings.requests} requests per run ({settings.throughput_requests} queued at t = 0 for throughput), "
             f"every run on request seeds {list(settings.seeds)} and averaged; "
             f"threshold grid {settings.threshold_levels} levels; profile {settings.profile_requests} requests; "
             f"mu = 100. CascadeServe: accuracy SLO = q, {CASCADESERVE_LEVELS} threshold levels, {CASCADESERVE_RANGES} QPS ranges "
             f"weighted by the measured 100 ms QPS, {settings.cascadeserve_samples} sampled cascades. Wall time {run.elapsed_s:.0f} s.")
    write_report(args.out / "report.md", results, setup)
    plot_figures(args.out, results, scales)
    return run.finish(results, tensorboard_scalars(results))


if __name__ == "__main__":
    sys.exit(main())
