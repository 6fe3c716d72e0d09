"""Cascadia's planner pieces (Cascadia §3.2-§3.3, Alg. 1, App. D) and the ``cascadia`` policy:
MILP vs brute force, the §3.3 worked example, threshold replay, lookup tables, Alg. 1 invariants."""

from __future__ import annotations

import math
import time

import gymnasium as gym
import numpy as np
import pytest

import baselines
import envs  # noqa: F401  (registers the IDs)
from baselines.cascadia.milp import InfeasibleAllocationError, brute_force_allocation, solve_allocation
from baselines.cascadia.parallelism import (
    ModelLatencyTable,
    ParallelismStrategy,
    ReplicaShape,
    ReplicaTable,
    TableSettings,
    build_replica_table,
    simulate_replica,
    shape_feasibility,
)
from baselines.cascadia.planner import CascadiaPlanner
from baselines.cascadia.policy import CascadiaPolicy, deployment_of
from baselines.cascadia.thresholds import QualityProfile, latency_quality_score, threshold_grid
from envs.scenario import InstanceGroup, Scenario, Workload
from simulator.instance import InstanceConfig
from simulator.request import SLO

INF = math.inf
SMALL, LARGE = "Llama-3.1-8B", "Llama-3.1-70B"


# ----------------------------------------------------------------------------- MILP (§3.2)
def test_milp_optimum_equals_brute_force_on_toy_tables():
    rng = np.random.default_rng(3)
    for _ in range(8):
        gpus = 6
        table = np.sort(rng.uniform(1.0, 20.0, (2, gpus + 1)), axis=1)[:, ::-1].copy()
        table[0, 0] = table[1, 0] = INF  # a model with traffic needs a GPU
        table[1, 1] = INF  # model 2 does not fit on one GPU
        milp, brute = solve_allocation(table, gpus), brute_force_allocation(table, gpus)
        assert milp.latency_s == pytest.approx(brute.latency_s)
        assert sum(milp.gpus_by_model) == gpus
        assert milp.latency_s == max(milp.stage_latency_s)
        assert table[1, milp.gpus_by_model[1]] < INF


def test_milp_hand_example():
    # model 1: 10 / 6 / 4 / 3 s on 1-4 GPUs; model 2: infeasible below 2 GPUs, 9 / 7 / 5 s on 2-4.
    table = np.array([[INF, 10, 6, 4, 3, 2.5], [INF, INF, 9, 7, 5, 4]])
    allocation = solve_allocation(table, 5)
    # (1, 4) -> max(10, 5) = 10; (2, 3) -> max(6, 7) = 7; (3, 2) -> max(4, 9) = 9
    assert allocation.gpus_by_model == (2, 3) and allocation.latency_s == 7.0


def test_milp_infeasible_raises_a_clear_error():
    table = np.array([[INF, INF, 1.0], [INF, INF, 1.0]])
    with pytest.raises(InfeasibleAllocationError, match="exactly 2 GPUs"):
        solve_allocation(table, 2)
    with pytest.raises(InfeasibleAllocationError):
        brute_force_allocation(table, 2)
    with pytest.raises(ValueError, match="shape"):
        solve_allocation(np.ones((2, 3)), 5)
    with pytest.raises(ValueError, match="total_gpus"):
        solve_allocation(np.ones((2, 3)), -1)


# ----------------------------------------------------------------------------- J (§3.3)
def test_worked_example_of_section_3_3():
    # z1* = 0.95, z2* = 0.75, q_min = 0.90, mu = 100 (§3.3 "Illustrative example"), on the 0-100 scale.
    j = [latency_quality_score(l, q, 90.0, 95.0, 75.0, 100.0) for l, q in ((11.0, 88.0), (11.4, 91.0), (12.2, 93.0))]
    assert j == [21.0, 11.4, 12.2]
    fractions = [latency_quality_score(l, q, 0.90, 0.95, 0.75, 100.0) for l, q in ((11.0, 0.88), (11.4, 0.91), (12.2, 0.93))]
    assert fractions == pytest.approx([21.0, 11.4, 12.2], abs=1e-12)
    with pytest.raises(ValueError, match="utopia"):
        latency_quality_score(1.0, 80.0, 90.0, 75.0, 95.0, 100.0)


def test_threshold_replay_by_hand():
    # 4 requests x 3 models; h = (50, 70)
    scores = np.array([[60, 0, 0], [40, 80, 0], [40, 60, 90], [10, 20, 30]], dtype=float)
    routing = QualityProfile(scores).route((50.0, 70.0))
    assert routing.reach_fractions == (1.0, 0.75, 0.5)
    assert routing.accept_fractions == (0.25, 0.25, 0.5)
    assert routing.quality == pytest.approx((60 + 80 + 90 + 30) / 4)
    assert QualityProfile(scores).route((0.0, 0.0)).quality == pytest.approx(150 / 4)  # everything on model 1
    assert QualityProfile(scores).utopia == 30.0 and QualityProfile(scores).nadir == 37.5


def test_judge_signals_route_and_scores_count():
    # the judge sees signals (e.g. certainty), the quality counts the scores
    scores = np.array([[100, 0], [0, 100]], dtype=float)
    signals = np.array([[10, 0], [90, 0]], dtype=float)
    routing = QualityProfile(scores, signals).route((50.0,))
    assert routing.accept_fractions == (0.5, 0.5) and routing.quality == 0.0
    with pytest.raises(ValueError, match="shape"):
        QualityProfile(scores, signals[:1])


def test_proportional_start_gives_model_i_one_over_i():
    rng = np.random.default_rng(0)
    scores = rng.uniform(0, 100, (3000, 3))
    grid = threshold_grid(101)
    routing = QualityProfile(scores).route(QualityProfile(scores).proportional_thresholds(grid))
    assert routing.reach_fractions[1] == pytest.approx(1 / 2, abs=0.01)
    assert routing.reach_fractions[2] == pytest.approx(1 / 3, abs=0.01)


def test_bad_threshold_inputs_raise():
    with pytest.raises(ValueError, match="levels"):
        threshold_grid(1)
    with pytest.raises(ValueError, match=r"\[0, 100\]"):
        QualityProfile(np.array([[101.0, 5.0]]))
    with pytest.raises(ValueError, match="thresholds"):
        QualityProfile(np.ones((2, 2))).route((120.0,))


# ----------------------------------------------------------------------------- tables (§3.2, App. B)
def toy_table(model: str, shapes: dict[ReplicaShape, tuple[tuple[float, ...], tuple[float, ...]]]) -> ModelLatencyTable:
    replicas = tuple(ReplicaTable(shape, rates, p95) for shape, (rates, p95) in shapes.items())
    return ModelLatencyTable(model, "fp16", TableSettings(), replicas)


def small_model() -> ModelLatencyTable:
    return toy_table(SMALL, {ReplicaShape(1): ((1.0, 2.0, 4.0, 8.0), (1.0, 1.5, 3.0, INF))})


def large_model() -> ModelLatencyTable:
    return toy_table(LARGE, {ReplicaShape(2): ((0.5, 1.0, 2.0, 4.0), (4.0, 5.0, 8.0, INF)),
                             ReplicaShape(4): ((0.5, 1.0, 2.0, 4.0, 8.0), (3.0, 3.5, 4.0, 6.0, INF))})


def test_replica_table_interpolates_and_saturates():
    table = small_model().replicas[0]
    assert table.capacity_rps == 4.0
    assert table.p95_at(np.array([0.1, 1.5, 3.0, 4.0, 4.5])).tolist() == [1.0, 1.25, 2.25, 3.0, INF]


def test_strategy_latency_homogeneous_and_mixed():
    table = large_model()
    two = ParallelismStrategy(((ReplicaShape(2), 2),))
    assert float(table.strategy_latency_s(two, 2.0)) == pytest.approx(5.0)  # 1 req/s each
    mixed = ParallelismStrategy(((ReplicaShape(2), 1), (ReplicaShape(4), 1)))
    # capacities 2 and 4 -> shares 1/3 and 2/3 of 3 req/s: TP2 at 1 (5 s), TP4 at 2 (4 s)
    assert float(table.strategy_latency_s(mixed, 3.0)) == pytest.approx(5.0)
    assert float(table.strategy_latency_s(ParallelismStrategy(()), 1.0)) == INF
    assert mixed.describe() == "(TP=2), (TP=4)" and mixed.num_gpus == 6


def test_latency_by_gpus_marks_infeasible_and_never_increases():
    latency, best = large_model().latency_by_gpus(2.0, 8)
    assert latency[0] == INF and latency[1] == INF  # the smallest shape needs 2 GPUs
    finite = latency[2:]
    assert np.all(np.diff(finite) <= 0)
    assert latency[2] == 8.0 and latency[4] == pytest.approx(4.0)  # TP4 alone at 2 req/s beats 2 x TP2 (5 s)
    assert all(s.num_gpus <= f for f, s in enumerate(best))
    idle, _ = large_model().latency_by_gpus(0.0, 4)
    assert idle.tolist() == [0.0, INF, INF, INF, INF]
    with pytest.raises(ValueError, match="rate_rps"):
        large_model().latency_by_gpus(-1.0, 4)


def test_strategy_for_a_rate_falls_back_to_the_most_capacity_when_all_saturate():
    table = large_model()  # TP2 carries 2 req/s, TP4 4 req/s
    # 3 req/s on 4 GPUs: TP4 at 3 req/s (5 s) beats 2 x TP2 at 1.5 req/s each (6.5 s)
    assert table.strategy_for(3.0, 4) == ParallelismStrategy(((ReplicaShape(4), 1),))
    # 10 req/s saturates every 8-GPU strategy; 2 x TP4, 4 x TP2 and 2 x TP2 + TP4 all carry 8
    assert table.strategy_for(10.0, 8) == ParallelismStrategy(((ReplicaShape(4), 2),))
    with pytest.raises(ValueError, match="fits in 1 GPUs"):
        table.strategy_for(1.0, 1)


def test_strategy_enumeration_respects_the_budget():
    table = large_model()
    strategies = table.strategies(6)
    assert sorted(s.describe() for s in strategies) == sorted(
        ["(TP=2)", "(DP=2, TP=2)", "(DP=3, TP=2)", "(TP=2), (TP=4)", "(TP=4)"]
    )
    assert all(s.num_gpus <= 6 for s in strategies)


def test_shape_feasibility_reasons():
    settings = TableSettings(lengths="sharegpt_cauchy")
    assert "does not divide" in shape_feasibility("DeepSeek-R1-Distill-Qwen-7B", ReplicaShape(8), "fp16", settings)
    assert "bytes" in shape_feasibility("DeepSeek-R1-671B", ReplicaShape(1), "fp16", settings)
    assert shape_feasibility("DeepSeek-R1-Distill-Qwen-7B", ReplicaShape(1), "fp16", settings) is None


def test_simulated_replica_table_is_monotone_and_stops_at_saturation():
    settings = TableSettings(arrival_s=20.0, min_requests=30, max_requests=120, min_rate_rps=1.0, rate_ratio=4.0, max_points=5)
    table = build_replica_table("Llama-3-8B", ReplicaShape(1), "fp16", settings)
    finite = [p for p in table.p95_s if math.isfinite(p)]
    assert finite and all(b >= a for a, b in zip(finite, finite[1:]))
    assert all(not math.isfinite(p) for p in table.p95_s[len(finite):])
    assert len(table.p95_s) - len(finite) <= 1  # the grid stops at the first saturated rate



def test_backlog_marks_a_rate_above_capacity_as_saturated_before_its_p95_grows_4x():
    """DeepSeek-7B on one H100 under Vidur's 2024 engine, ShareGPT lengths, 60 s of arrivals: at
    33 req/s the replica keeps up (almost no request is still queued when the last arrives); at 74
    req/s it does not (more than a third are), though its 60 s p95 is under 4x the unloaded one,
    so only the backlog rule stops the table there (a 240 s run's p95 is 7x the 60 s one at that
    rate). Under the scenario's vllm-v1 the same replica keeps up to about 100 req/s."""
    settings = TableSettings(engine="vidur-2024", lengths="sharegpt_cauchy")
    keeps_up = simulate_replica("DeepSeek-R1-Distill-Qwen-7B", ReplicaShape(1), "fp16", 32.84, settings)
    overloaded = simulate_replica("DeepSeek-R1-Distill-Qwen-7B", ReplicaShape(1), "fp16", 73.89, settings)
    assert keeps_up.backlog_fraction < 0.01 < settings.max_backlog_fraction < 0.3 < overloaded.backlog_fraction
    assert overloaded.p95_s < settings.saturation_factor * keeps_up.p95_s
    with pytest.raises(ValueError, match="max_backlog_fraction"):
        TableSettings(max_backlog_fraction=1.0)


# ----------------------------------------------------------------------------- Alg. 1
def toy_planner(levels: int = 21, gpus: int = 6) -> CascadiaPlanner:
    rng = np.random.default_rng(1)
    difficulty = rng.uniform(0, 1, 400)
    scores = np.clip(np.column_stack([100 * (1 - difficulty) ** 0.6, 100 * (1 - difficulty) ** 0.15]), 0, 100)
    return CascadiaPlanner([small_model(), large_model()], gpus, QualityProfile(scores), quality_min=80.0, threshold_levels=levels)


def test_bilevel_plan_is_feasible_and_not_worse_than_its_start():
    planner = toy_planner()
    plan = planner.plan(2.0)
    assert sum(plan.gpus_by_model) == 6
    assert plan.objective == pytest.approx(min(plan.objective_history))
    assert plan.objective_history[0] >= plan.objective
    assert plan.thresholds[0] in planner.grid.tolist()
    routing = planner.routing_for(plan.thresholds)
    assert plan.objective == pytest.approx(planner.objective(plan.latency_s, routing.quality))
    exhaustive = planner.exhaustive(2.0)
    assert exhaustive.objective <= plan.objective + 1e-9
    # the exhaustive optimum really is the best over the grid
    for candidate in planner.routings[::5]:
        try:
            allocation, _ = planner.deploy(candidate, 2.0, exhaustive=True)
        except ValueError:
            continue
        assert planner.objective(allocation.latency_s, candidate.quality) >= exhaustive.objective - 1e-9


@pytest.mark.parametrize("gpus, rate_rps", [(2, 1.0), (3, 4.0), (4, 8.0), (6, 10.0)])
def test_fewest_gpus_says_which_routings_the_deployment_solver_can_deploy(gpus, rate_rps):
    planner = toy_planner(gpus=gpus)
    deployable = planner.fewest_gpus(rate_rps).sum(axis=1) <= gpus
    for index, routing in enumerate(planner.routings):
        try:
            planner.deploy(routing, rate_rps)
        except InfeasibleAllocationError:
            assert not deployable[index], routing.thresholds
        else:
            assert deployable[index], routing.thresholds


def test_alg1_starts_from_the_deployable_routing_nearest_the_proportional_one():
    planner = toy_planner(gpus=4)
    proportional = planner.profile.route(planner.profile.proportional_thresholds(planner.grid))
    with pytest.raises(InfeasibleAllocationError):
        planner.deploy(proportional, 6.0)  # the large model's half of 6 req/s needs 4 GPUs alone
    nearest, nearest_distance = None, INF
    for routing in planner.routings:  # brute force: every grid routing through the MILP
        try:
            allocation, _ = planner.deploy(routing, 6.0)
        except InfeasibleAllocationError:
            continue
        distance = sum(abs(a - b) for a, b in zip(routing.reach_fractions, proportional.reach_fractions))
        if distance < nearest_distance:
            nearest, nearest_distance, start_allocation = routing, distance, allocation
    start, (allocation, _) = planner.start(6.0)
    assert start == nearest
    assert allocation.gpus_by_model == start_allocation.gpus_by_model
    plan = planner.plan(6.0)
    assert plan.objective_history[0] == pytest.approx(planner.objective(start_allocation.latency_s, nearest.quality))
    assert sum(plan.gpus_by_model) == 4 and plan.objective <= plan.objective_history[0]


def test_alg1_names_the_grid_when_no_routing_is_deployable():
    with pytest.raises(InfeasibleAllocationError, match=r"no allocation of exactly 2 GPUs .*; no threshold vector of "
                                                        r"the 21-level grid sends loads that 2 GPUs carry at 10 req/s"):
        toy_planner(gpus=2).plan(10.0)


def test_planner_rejects_bad_inputs():
    with pytest.raises(ValueError, match="total_gpus"):
        toy_planner(gpus=0)
    with pytest.raises(ValueError, match="rate_rps"):
        toy_planner().plan(float("nan"))
    with pytest.raises(ValueError, match="latency tables"):
        CascadiaPlanner([small_model()], 4, QualityProfile(np.ones((3, 2))), 80.0)


# ----------------------------------------------------------------------------- policy
def tiny_cascade() -> Scenario:
    return Scenario(
        name="tiny_cascade", description="8B -> 70B (TP 4)", reference="test",
        instances=(InstanceGroup(InstanceConfig(gpu="H100-80GB", model=SMALL), 1),
                   InstanceGroup(InstanceConfig(gpu="H100-80GB", model=LARGE, tp=4), 1)),
        workload=Workload(rate_rps=2.0, lengths="sharegpt_cauchy", slo_by_tier=(SLO(e2e_s=20.0),)),
        episode_requests=60, control_interval_s=5.0, cascade=(SMALL, LARGE),
    )


def observation_with_qps(schema, qps: float, progress: float = 0.5) -> dict[str, np.ndarray]:
    """Cascade-v0's observation with ``qps`` arrivals per second over the last interval."""
    arrived = round(progress * schema.constants["episode_requests"])
    return schema.encode(context={"arrivals_per_s": qps, "arrived": arrived})


def test_cascadia_policy_plans_thresholds_and_replans_on_a_shift():
    assert "cascadia" in baselines.policy_names("servegym/Cascade-v0")
    env = gym.make("servegym/Cascade-v0", scenario=tiny_cascade(), quality_min=80.0)
    policy = baselines.make("cascadia", env, tables=[small_model(), large_model()], profile_requests=300)
    assert isinstance(policy, CascadiaPolicy)
    strategies, dtypes, gpu = deployment_of(env.unwrapped.scenario)
    assert [s.describe() for s in strategies] == ["(DP=1)", "(TP=4)"] and dtypes == ("fp16", "fp16") and gpu == "H100-80GB"
    expected, _ = policy.planner.route(2.0, strategies)
    schema = env.unwrapped.schema
    first = policy.act(observation_with_qps(schema, 0.0))  # the reset observation measured nothing
    assert first.tolist() == [round(expected.thresholds[0] / 10)]
    assert policy.replans == 0
    action = policy.act(observation_with_qps(schema, 6.0))
    assert policy.replans == 1 and policy.planned_rate_rps == pytest.approx(6.0, rel=1e-5)
    replanned, _ = policy.planner.route(policy.planned_rate_rps, strategies)
    assert action.tolist() == [round(replanned.thresholds[0] / 10)]
    assert env.action_space.contains(action)
    policy.act(observation_with_qps(schema, 6.5))  # within 25% of 6: no new plan
    assert policy.replans == 1
    policy.act(observation_with_qps(schema, 0.5, progress=1.0))  # the stream ended: not a shift
    assert policy.replans == 1
    policy.reset()
    assert policy.replans == 0 and policy.planned_rate_rps == 2.0
    with pytest.raises(ValueError, match="replan_shift"):
        baselines.make("cascadia", env, tables=[small_model(), large_model()], replan_shift=0.0)
    with pytest.raises(ValueError, match="no cached Cascadia latency table"):
        baselines.make("cascadia", env)  # Llama-3.1 tables are not cached, and building them is opt-in


def test_cascadia_policy_uses_the_cached_tables_of_the_cascadia_scenario():
    env = gym.make("servegym/Cascade-v0", scenario="cascadia", episode_requests=40)
    policy = baselines.make("cascadia", env, profile_requests=200)
    assert [t.model for t in policy.planner.tables] == list(env.unwrapped.scenario.cascade)
    assert all(t.settings.lengths == "sharegpt_cauchy" for t in policy.planner.tables)
    assert env.action_space.contains(policy.act(env.reset(seed=0)[0]))


@pytest.mark.parametrize("name", ["cascadia", "cascadeserve"])
def test_threshold_policies_refuse_the_continuous_action_mode(name):
    env = gym.make("servegym/Cascade-v0", scenario="cascadia", action="continuous")
    with pytest.raises(ValueError, match=rf"policy '{name}' drives servegym/Cascade-v0 with action in \['thresholds'\], not 'continuous'"):
        baselines.make(name, env)


@pytest.mark.parametrize("solve", [solve_allocation, brute_force_allocation])
def test_allocation_where_the_first_model_takes_every_gpu(solve):
    """Three model types, 2 GPUs. Model 0 needs a GPU; (2, 0, 0) gives max(0.2, 0, 0) = 0.2,
    (1, 1, 0) and (1, 0, 1) give 0.9: the optimum comes last in enumeration order."""
    table = np.array([[math.inf, 0.9, 0.2], [0.0, 0.5, 0.4], [0.0, 0.5, 0.4]])
    started = time.perf_counter()
    best = solve(table, 2)
    assert best.gpus_by_model == (2, 0, 0) and best.latency_s == 0.2
    assert 0.0 <= best.solve_time_s <= time.perf_counter() - started


def test_infeasible_allocation_message_lists_up_to_12_counts_in_full():
    """Model 0 feasible at f = 0..11 (12 counts, listed in full) or f = 0..12 (13, shortened);
    model 1 at no count (the check before the MILP)."""
    for feasible, listed in [(12, r"\[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11\]"),
                             (13, r"\[0, 1, 2, 3, 4, 5, '\.\.\.', 10, 11, 12\]")]:
        table = np.full((2, 15), math.inf)
        table[0, :feasible] = 1.0
        expected = rf"^no allocation of exactly 14 GPUs has a feasible GPU count for every model \(model 0: f in {listed}; model 1: f in \[\]\)$"
        with pytest.raises(InfeasibleAllocationError, match=expected):
            solve_allocation(table, 14)
