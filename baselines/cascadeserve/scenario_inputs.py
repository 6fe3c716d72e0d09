"""Planning inputs from a servegym cascade scenario, and a scenario deploying a gear plan.

Validation samples (App. C.2) are requests drawn from the scenario's workload with scores from
``simulator.cascade.assign_cascade_quality``; profiles come from the latency model at the
samples' mean prompt length (``profiles.scenario_profiles``).
"""

from __future__ import annotations

import numpy as np

from baselines.cascadeserve.planner import PlanningProblem
from baselines.cascadeserve.profiles import Replica, scenario_profiles
from envs.scenario import InstanceGroup, Scenario
from simulator.cascade import assign_cascade_quality

GPUS_PER_NODE = 2  # CascadeServe §6.2: 8 nodes of 2 V100s


def validation_scores(scenario: Scenario, num_samples: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """(samples x models scores, mean prompt tokens) of ``num_samples`` requests of the workload."""
    requests = scenario.with_overrides(episode_requests=num_samples).requests(rng)
    assign_cascade_quality(requests, scenario.cascade, rng)
    scores = np.array([[r.quality_by_model[m] for m in scenario.cascade] for r in requests])
    return scores, max(1, round(float(np.mean([r.prompt_tokens for r in requests]))))


def _group_of(scenario: Scenario, model: str) -> InstanceGroup:
    return next(g for g in scenario.instances if g.config.model == model)


def scenario_placement(scenario: Scenario) -> tuple[Replica, ...]:
    """The scenario's deployment as replicas on consecutive devices, groups in scenario order."""
    replicas, device = [], 0
    for group in scenario.instances:
        for _ in range(group.count):
            span = group.config.num_gpus
            replicas.append(Replica(group.config.model, tuple(range(device, device + span))))
            device += span
    return tuple(replicas)


def problem_for_scenario(
    scenario: Scenario,
    rng: np.random.Generator,
    *,
    qps_max: float,
    n_ranges: int,
    latency_slo_s: float | None = None,
    num_gpus: int | None = None,
    threshold_levels: int = 11,
    fixed_placement: bool = False,
    num_validation: int = 1000,
    num_cascade_samples: int = 200,
    sim_duration_s: float = 20.0,
) -> PlanningProblem:
    """Alg. 1's inputs for ``scenario``'s cascade on ``num_gpus`` GPUs of its type (default: the
    GPUs it deploys); ``fixed_placement`` keeps the scenario's own deployment. The latency SLO
    defaults to the workload's E2E target."""
    groups = [_group_of(scenario, m) for m in scenario.cascade]
    deployed = sum(g.count * g.config.num_gpus for g in scenario.instances)
    gpus = deployed if num_gpus is None else num_gpus
    if fixed_placement and gpus != deployed:
        raise ValueError(f"a fixed placement uses the scenario's {deployed} GPUs, got num_gpus={num_gpus!r}")
    slo = scenario.workload.slo(0).e2e_s if latency_slo_s is None else latency_slo_s
    scores, prompt_tokens = validation_scores(scenario, num_validation, rng)
    profiles, devices = scenario_profiles(
        scenario.cascade, groups[0].config.gpu, gpus, GPUS_PER_NODE, prompt_tokens,
        {g.config.model: g.config.tp for g in groups}, groups[0].config.dtype,
    )
    return PlanningProblem(
        tuple(scenario.cascade), profiles, devices, scores, threshold_levels, qps_max, n_ranges, slo,
        num_cascade_samples, scenario_placement(scenario) if fixed_placement else None, sim_duration_s,
    )
