"""CascadeServe's accuracy-SLO planning (CascadeServe §3, §4.3, App. C.2) against brute force
on toy problems, and its online gear switching on a simulator cluster (§3, §5)."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from baselines.cascadeserve.accuracy_slo import (
    assign_for_accuracy,
    expected_load,
    fastest_min_queue_length,
    measured_weights,
    plan_accuracy,
    zipf_weights,
)
from baselines.cascadeserve.cascade_search import evaluate_cascade, pareto_front
from baselines.cascadeserve.cluster_gears import GearSwitcher, interval_qps, single_measurement_gear
from baselines.cascadeserve.load_balancer import LoadBalancingError, balance_load, min_utilization
from baselines.cascadeserve.planner import GearPlan, PlanningInfeasibleError, PlanningProblem, plan_gears
from baselines.cascadeserve.profiles import Device, ModelProfile
from baselines.cascadeserve.workload_adaption import qps_ranges
from simulator.routers.cascade import CascadeRouter
from simulator.cluster import Cluster
from simulator.instance import InstanceConfig
from simulator.request import Request

MODELS = ("S", "M", "L")
LEVELS = 6


def profile(name: str, runtime_s: float) -> ModelProfile:
    return ModelProfile(name, tuple(runtime_s * b for b in range(1, 9)), 4.0)


PROFILES = (profile("S", 0.01), profile("M", 0.03), profile("L", 0.08))
DEVICES = (Device(0, 0, 10.0), Device(1, 0, 10.0))


def toy_scores() -> np.ndarray:
    difficulty = np.random.default_rng(3).uniform(0, 1, 400)
    return np.stack([100 * (1 - difficulty) ** a for a in (1.5, 0.8, 0.3)], axis=1)


SCORES = toy_scores()
ALL_CASCADES = [evaluate_cascade(levels, SCORES, LEVELS, PROFILES) for levels in itertools.product(range(LEVELS), repeat=2)]


def problem(accuracy_slo: float, qps_max: float = 20.0, n_ranges: int = 1, **extra) -> PlanningProblem:
    return PlanningProblem(MODELS, PROFILES, DEVICES, SCORES, LEVELS, qps_max, n_ranges, None,
                           num_cascade_samples=100, sim_duration_s=5.0, accuracy_slo=accuracy_slo, **extra)


def test_zipf_and_measured_weights_by_hand():
    assert zipf_weights(4) == pytest.approx(np.array([12, 6, 4, 3]) / 25)  # 1, 1/2, 1/3, 1/4 over H_4 = 25/12
    assert zipf_weights(3, exponent=0.0) == pytest.approx([1 / 3] * 3)
    # (0, 30] in 3 ranges of 10: samples 0 and 5 -> range 0, 10 and 15 -> 1, 45 (above qps_max) -> 2.
    assert measured_weights([0.0, 5.0, 10.0, 15.0, 45.0], 30.0, 3) == pytest.approx([0.4, 0.4, 0.2])
    assert plan_accuracy([90.0, 80.0, 50.0], [0.5, 0.3, 0.2]) == pytest.approx(45 + 24 + 10)
    with pytest.raises(ValueError, match="-1"):
        measured_weights([-1.0], 10.0, 2)
    with pytest.raises(ValueError, match="0"):
        zipf_weights(0)


def test_one_range_picks_the_cheapest_cascade_meeting_the_slo_and_its_latency_is_lowest():
    for slo in (50.0, 60.0, 65.0, 70.0):
        plan = plan_gears(problem(slo), np.random.default_rng(0))
        chosen = plan.gears[0].cascade
        meeting = [c for c in ALL_CASCADES if c.quality >= slo]
        assert chosen.quality >= slo
        assert chosen.work_s == pytest.approx(min(c.work_s for c in meeting))  # brute force over all 36 cascades
        assert plan.accuracy() == pytest.approx(chosen.quality)
        # Latency by brute force: every cascade meeting the SLO, simulated on the plan's placement
        # at the range's QPS with its best queue length; the chosen gear is within 10% of the
        # fastest (the least-work cascade is not always the fastest in simulation, by a few %).
        fastest = np.inf
        for cascade in meeting:
            demand = cascade.demand_qps(MODELS, 20.0)
            try:
                u = min_utilization(plan.placement, demand, PROFILES)
            except LoadBalancingError:
                continue
            loads = balance_load(plan.placement, demand, PROFILES, u * (1 + 1e-6) + 1e-9)
            _, sim = fastest_min_queue_length(cascade, MODELS, PROFILES, loads, 20.0, SCORES, LEVELS, 5.0)
            fastest = min(fastest, sim.latency_p95_s)
        assert plan.gears[0].latency_p95_s <= 1.1 * fastest


def monotone_assignments(front_size: int, n_ranges: int):
    for combo in itertools.combinations_with_replacement(range(front_size), n_ranges):
        yield list(reversed(combo))  # non-increasing: higher QPS never gets a costlier cascade


@pytest.mark.parametrize("slo", [50.0, 60.0, 68.0, 74.0])
def test_sp2_assignment_equals_brute_force(slo):
    front = pareto_front(ALL_CASCADES)
    ranges = qps_ranges(40.0, 4)
    weights = zipf_weights(4)
    caps = [len(front) - 1, len(front) - 1, 4, 2]
    for limits in (None, caps):
        chosen = assign_for_accuracy(front, weights, ranges, slo, limits)
        feasible = [
            a for a in monotone_assignments(len(front), 4)
            if plan_accuracy([front[c].quality for c in a], weights) >= slo - 1e-9
            and (limits is None or all(c <= cap for c, cap in zip(a, limits)))
        ]
        if not feasible:
            assert chosen is None
            continue
        assert chosen is not None and chosen == sorted(chosen, reverse=True)
        assert plan_accuracy([front[c].quality for c in chosen], weights) >= slo - 1e-6
        best = min(expected_load(front, a, weights, ranges) for a in feasible)
        assert expected_load(front, chosen, weights, ranges) == pytest.approx(best, rel=1e-6)


def test_multi_range_plan_puts_accurate_cascades_at_low_qps_and_meets_the_zipf_accuracy():
    plan = plan_gears(problem(62.0, qps_max=30.0, n_ranges=4), np.random.default_rng(0))
    qualities = [g.cascade.quality for g in plan.gears]
    assert plan.qps_weights == pytest.approx(tuple(zipf_weights(4)))
    assert plan.accuracy() >= 62.0 - 1e-6
    assert qualities == sorted(qualities, reverse=True) and qualities[0] > qualities[-1]
    assert all(g.utilization <= 1.0 for g in plan.gears)
    measured = plan_gears(problem(62.0, qps_max=30.0, n_ranges=4, qps_weights=(0.0, 0.0, 0.0, 1.0)), np.random.default_rng(0))
    assert measured.gears[-1].cascade.quality >= 62.0  # all time at the top range: its gear alone meets the SLO


def test_unattainable_accuracy_slo_raises_naming_it():
    best = max(c.quality for c in ALL_CASCADES)
    with pytest.raises(PlanningInfeasibleError, match=r"accuracy SLO 90 unattainable: the most accurate cascade reaches 77\.05"):
        plan_gears(problem(90.0), np.random.default_rng(0))
    assert best == pytest.approx(77.05, abs=0.01)
    # Attainable accuracy but not at 60 QPS on two GPUs: (3, 2) needs 60 x 0.057 = 3.4 GPU-s/s.
    with pytest.raises(PlanningInfeasibleError, match=r"accuracy SLO 60 unattainable on 2 GPUs"):
        plan_gears(problem(60.0, qps_max=60.0), np.random.default_rng(0))


def test_problem_needs_exactly_one_valid_slo():
    with pytest.raises(ValueError, match="exactly one SLO"):
        PlanningProblem(MODELS, PROFILES, DEVICES, SCORES, LEVELS, 20.0, 1, 0.5, accuracy_slo=60.0)
    with pytest.raises(ValueError, match="exactly one SLO"):
        PlanningProblem(MODELS, PROFILES, DEVICES, SCORES, LEVELS, 20.0, 1, None)
    with pytest.raises(ValueError, match="120"):
        problem(120.0)
    with pytest.raises(ValueError, match="weights"):
        problem(60.0, n_ranges=2, qps_weights=(1.0,))


def test_gear_switching_follows_the_measured_qps_on_a_cluster():
    plan = plan_gears(problem(62.0, qps_max=30.0, n_ranges=4), np.random.default_rng(0))
    assert single_measurement_gear(plan, 62.0) == max(i for i, g in enumerate(plan.gears) if g.cascade.quality >= 62.0)
    # 3 arrivals in (0, 0.1] = 30 QPS (top gear), none in (0.1, 0.2], 1 in (0.2, 0.3] = 10 QPS.
    arrivals = [0.02, 0.05, 0.08, 0.25]
    assert interval_qps(arrivals).tolist() == pytest.approx([30.0, 0.0, 10.0])
    requests = [Request(i, t, 32, 4) for i, t in enumerate(arrivals)]
    for request in requests:
        request.quality_by_model = {"DeepSeek-R1-Distill-Qwen-7B": 90.0, "Llama-3-8B": 95.0}
    two_model = renamed_plan(plan, ("DeepSeek-R1-Distill-Qwen-7B", "Llama-3-8B"))
    router = CascadeRouter(two_model.models, (100.0,))
    cluster = Cluster({"H100-80GB": 2}, **router.cluster_options())
    for model in two_model.models:
        cluster.deploy(InstanceConfig(gpu="H100-80GB", model=model), ready_now=True)
    switcher = GearSwitcher(cluster, router, two_model, arrivals, alpha=0.0)
    outcomes = cluster.run(requests)
    assert len(outcomes) == 4 and all(o.completed for o in outcomes)
    # alpha = 0 disables the hysteresis: gear 0 at t = 0, then the gears of 30, 0 and 10 QPS.
    assert switcher.gear_trace == [0, two_model.gear_index(30.0), 0, two_model.gear_index(10.0)]


def renamed_plan(plan: GearPlan, models: tuple[str, str]) -> GearPlan:
    """The plan for two catalogued models (the simulator needs real ones): each gear keeps its
    first threshold level."""
    gears = tuple(dataclasses.replace(g, cascade=dataclasses.replace(g.cascade, levels=g.cascade.levels[:1])) for g in plan.gears)
    return dataclasses.replace(plan, models=models, gears=gears)
