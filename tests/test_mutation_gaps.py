"""Tests written for mutants that survived ``make mutation`` (issue 42): boundaries and the
field named by each argument check of the core modules, with expectations derived by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from baselines.cascadia.milp import InfeasibleAllocationError, brute_force_allocation, solve_allocation
from hardware.latency import latency_model

INF = math.inf


@pytest.mark.parametrize("solve", [solve_allocation, brute_force_allocation])
def test_allocation_table_checks_name_the_bad_value_at_each_boundary(solve):
    with pytest.raises(ValueError, match=r"^total_gpus must be a non-negative integer, got True$"):
        solve(np.zeros((1, 2)), True)
    with pytest.raises(ValueError, match=r"^total_gpus must be a non-negative integer, got -1$"):
        solve(np.zeros((1, 1)), -1)
    with pytest.raises(ValueError, match=r"^latency table must be \(models x 3\) for f = 0\.\.2, got shape \(2, 2\)$"):
        solve(np.zeros((2, 2)), 2)
    with pytest.raises(ValueError, match=r"got shape \(0, 3\)$"):
        solve(np.zeros((0, 3)), 2)
    with pytest.raises(ValueError, match=r"got shape \(3,\)$"):
        solve(np.zeros(3), 2)
    message = r"^latency table entries must be >= 0 \(inf marks an infeasible pair\), got NaN or a negative value$"
    for bad in (-1e-9, math.nan):
        with pytest.raises(ValueError, match=message):
            solve(np.array([[INF, 1.0, bad]]), 2)


@pytest.mark.parametrize("solve", [solve_allocation, brute_force_allocation])
def test_allocation_edges_by_hand(solve):
    # One model type, zero GPUs to give: the only allocation is f = 0, at latency 0 (allowed).
    none = solve(np.array([[0.0]]), 0)
    assert (none.gpus_by_model, none.stage_latency_s, none.latency_s) == ((0,), (0.0,), 0.0)
    # A single model type takes all N GPUs; a latency below 1 s stays as it is (integer-valued tables hide a cast).
    single = solve(np.array([[INF, 0.75, 0.5]]), 2)
    assert (single.gpus_by_model, single.latency_s) == ((2,), 0.5)
    # Two types, 3 GPUs: (1, 2) gives max(0.9, 0.3) = 0.9, (2, 1) gives max(0.4, 0.6) = 0.6, the optimum.
    table = np.array([[INF, 0.9, 0.4, 0.2], [INF, 0.6, 0.3, 0.25]])
    best = solve(table, 3)
    assert best.gpus_by_model == (2, 1) and best.stage_latency_s == (0.4, 0.6) and best.latency_s == 0.6
    assert isinstance(best.latency_s, float) and best.solve_time_s >= 0


def test_infeasible_allocation_lists_each_models_feasible_counts():
    table = np.array([[INF, INF, 1.0], [INF, INF, 2.0]])  # each needs 2 GPUs, only 3 exist
    expected = (r"^no allocation of exactly 3 GPUs has a feasible GPU count for every model "
                r"\(model 0: f in \[2\]; model 1: f in \[2\]\)$")
    for solve in (solve_allocation, brute_force_allocation):
        with pytest.raises(InfeasibleAllocationError, match=expected):
            solve(np.hstack([table, [[INF], [INF]]]), 3)
    many = np.ones((1, 15))  # 14 GPUs, every count feasible: the list is shortened
    many[0, 14] = INF
    shortened = r"model 0: f in \[0, 1, 2, 3, 4, 5, '\.\.\.', 11, 12, 13\]; model 1: f in \[\]\)$"
    with pytest.raises(InfeasibleAllocationError, match=shortened):
        solve_allocation(np.vstack([many, np.full((1, 15), INF)]), 14)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda m: m.prefill_time_s(0), r"^tokens=0 must be an integer >= 1$"),
        (lambda m: m.prefill_time_s(8, -1), r"^context_before=-1 must be an integer >= 0$"),
        (lambda m: m.prefill_time_s(8, True), r"^context_before=True must be an integer >= 0$"),
        (lambda m: m.decode_time_s(1, -1), r"^context_tokens=-1 must be an integer >= 0$"),
        (lambda m: m.stage_times_s(0, 1, 0.01), r"^tokens=0 must be an integer >= 1$"),
        (lambda m: m.stage_times_s(1, 0, 0.01), r"^logit_tokens=0 must be an integer >= 1$"),
        (lambda m: m.stage_times_s(1, 1, 0.0), r"^iteration_s=0\.0 must be a finite number > 0\.0$"),
        (lambda m: m.stage_times_s(1, 1, math.inf), r"^iteration_s=inf must be a finite number > 0\.0$"),
    ],
)
def test_latency_model_arguments_are_checked_naming_them(call, message):
    with pytest.raises(ValueError, match=message):
        call(latency_model("A100-80GB", "Llama-2-7B"))


def test_latency_model_argument_boundaries_are_accepted():
    model = latency_model("A100-80GB", "Llama-2-7B")
    assert model.prefill_time_s(1, 0) > 0 and model.decode_time_s(1, 0) > 0
    assert model.prefill_time_s(8, 0) == model.prefill_time_s(8)
    # One token, one logit: the stages of a one-stage model are the whole iteration.
    iteration_s = model.decode_time_s(1, 0)
    assert sum(model.stage_times_s(1, 1, iteration_s)) == pytest.approx(iteration_s, rel=1e-12)


def test_qoe_argument_errors_say_what_is_wrong():
    from simulator.metrics.qoe import qoe

    curve = ((1.0, 1), (2.0, 4))
    targets = {"expected_ttfat_s": 1.0, "expected_tpot_s": 0.1}
    cases = [
        ({}, r"^arrival_s is required with a bare token curve$"),
        ({"arrival_s": math.inf}, r"^arrival_s must be finite, got inf$"),
        ({"arrival_s": 0.0, "answer_start_token": 1.5}, r"^answer_start_token must be an integer, got 1\.5$"),
        ({"arrival_s": 0.0, "answer_start_token": 4}, r"^no answer tokens: answer_start_token 4 >= 4 delivered$"),
    ]
    for extra, message in cases:
        with pytest.raises(ValueError, match=message):
            qoe(curve, **targets, **extra)


def test_routing_fallback_is_the_first_valid_slot_and_none_valid_raises():
    import gymnasium as gym

    env = gym.make("servegym/Routing-v0", scenario="default").unwrapped
    env.reset(seed=0)
    env.action_masks = lambda: np.array([False, False, True, False, False, True, False, False])
    assert env.fallback_action() == 2
    env.action_masks = lambda: np.array([False, True, False, False, False, False, False, False])
    assert env.fallback_action() == 1
    env.action_masks = lambda: np.zeros(8, dtype=bool)
    with pytest.raises(RuntimeError, match=r"^no instance can take the request: every instance is masked out$"):
        env.fallback_action()


def test_cauchy_allocation_inputs_are_checked_at_their_boundaries():
    from baselines.cauchy.ilp import ServiceDemand, _check_inventory, solve_allocation

    for bad in (0, 0.0, -1.0, math.inf, True):
        with pytest.raises(ValueError, match=rf"^goodput demand must be a positive finite req/s, got {bad!r}$"):
            ServiceDemand((), bad)
    with pytest.raises(ValueError, match=r"^a service needs at least one candidate combo$"):
        ServiceDemand((), 1e-9)  # the smallest positive demand passes its own check
    _check_inventory({"A100-80GB": 0})  # no GPU of a type is an inventory
    for bad in (-1, True, 1.0):
        with pytest.raises(ValueError, match=rf"^inventory of A100-80GB must be a non-negative integer, got {bad!r}$"):
            _check_inventory({"A100-80GB": bad})
    with pytest.raises(ValueError, match=r"^no service to allocate$"):
        solve_allocation({}, {"A100-80GB": 1})


def test_iqm_of_no_finite_evaluation_seed_is_nan_and_of_one_value_is_that_value():
    from agents.statistics import iqm_value

    assert math.isnan(iqm_value([[math.nan, math.nan]]))
    assert iqm_value([[0.25]]) == 0.25
    # 8 scores: the IQM drops the lowest and highest quarter and averages (3 + 4 + 5 + 6) / 4.
    assert iqm_value([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 100.0]]) == pytest.approx(4.5)


def test_dense_latency_reward_integrates_requests_in_the_system_by_hand():
    from types import SimpleNamespace

    import envs
    from envs.rewards import DenseLatencyReward

    reward = DenseLatencyReward(envs.make_scenario("default"))
    arrivals = [SimpleNamespace(arrival_s=a) for a in (0.5, 1.0, 4.0)]
    cluster = SimpleNamespace(events=SimpleNamespace(now_s=0.0), arrived=0, submitted_requests=arrivals, outcomes=[])
    reward.reset(cluster)
    cluster.events.now_s, cluster.arrived = 2.0, 2
    # No one in the system at the last step; the two arrivals spent 1.5 s and 1.0 s of the step in it.
    assert reward(cluster, []) == pytest.approx(-2.5 / reward.E2E_SCALE_S)
    cluster.events.now_s, cluster.arrived = 5.0, 3
    cluster.outcomes = [SimpleNamespace(finish_s=3.0)]
    # Two in the system for 3 s, one arrival 1 s before the step's end, one end 2 s before it.
    assert reward(cluster, []) == pytest.approx(-(2 * 3.0 + 1.0 - 2.0) / reward.E2E_SCALE_S)
    cluster.events.now_s = 6.0  # 3 arrived, 1 ended: two in the system for 1 s
    assert reward(cluster, []) == pytest.approx(-2.0 / reward.E2E_SCALE_S)


def test_signed_squash_by_hand():
    from envs.observation import signed_squash

    assert (signed_squash(math.inf, 2.0), signed_squash(-math.inf, 2.0)) == (1.0, -1.0)
    assert (signed_squash(0.0, 2.0), signed_squash(6.0, 2.0), signed_squash(-6.0, 2.0)) == (0.0, 0.75, -0.75)
    assert signed_squash(0.5, 0.5) == 0.5


def test_improvement_and_iqm_intervals_count_their_runs_and_usable_seeds():
    from agents.statistics import iqm_by_metric, probability_of_improvement

    one = probability_of_improvement([[2.0]], [[1.0]], reps=50)
    assert (one.value, one.runs, one.tasks) == (1.0, 1, 1)  # one evaluation seed is enough for a point
    lower = probability_of_improvement([[2.0, 1.0]], [[1.0, 3.0]], higher_is_better=False, reps=50)
    assert lower.value == 0.5 and lower.tasks == 2  # negated: better on the second seed only
    none = probability_of_improvement([[math.nan], [1.0]], [[1.0]], reps=50)
    assert math.isnan(none.value) and math.isnan(none.low) and math.isnan(none.high)
    assert (none.runs, none.tasks) == (2, 0)
    scores = np.array([[[1.0, math.nan], [3.0, math.nan]], [[2.0, math.nan], [4.0, math.nan]]])  # runs x seeds x metrics
    first, second = iqm_by_metric(scores, reps=50)
    assert (first.value, first.runs, first.tasks) == (2.5, 2, 2)
    assert math.isnan(second.value) and math.isnan(second.low) and math.isnan(second.high)
    assert (second.runs, second.tasks) == (2, 0)


def _finished(arrival_s: float, finish_s: float, rejected: bool = False):
    from simulator.outcome import RequestOutcome
    from simulator.request import SLO

    return RequestOutcome(
        request_id=0, tier=0, instance_id=0, arrival_s=arrival_s, prompt_tokens=1, output_tokens=1, reasoning_tokens=0,
        first_scheduled_s=math.nan, first_token_s=math.nan, first_answer_token_s=math.nan, reasoning_end_s=math.nan,
        finish_s=finish_s, max_tbt_s=0.0, preempted_s=0.0, num_preemptions=0, num_migrations=0, token_curve=(),
        slo=SLO(), rejected_reason="exceeds_kv_capacity" if rejected else None,
    )


def test_latency_reward_charges_e2e_over_10_s_and_one_per_rejection_by_hand():
    import envs
    from envs.rewards import LatencyReward

    reward = LatencyReward(envs.make_scenario("default"))
    finished = [_finished(1.0, 6.0), _finished(2.0, 4.5), _finished(3.0, 3.3, rejected=True)]
    # E2E 5 s and 2.5 s: 0.5 + 0.25; the rejection (0.3 s after arrival) costs 1, not 0.03.
    assert reward(None, finished) == pytest.approx(-1.75)
    assert reward(None, []) == 0.0


@pytest.mark.parametrize("name", ["slo", "latency", "latency_dense", "latency_balance", "ttft_dense", "ttft_balance",
                                  "slo_dense", "slo_balance", "cost"])
def test_a_reward_keeps_the_scenario_it_was_made_for(name):
    import envs
    from envs.rewards import make_reward

    scenario = envs.make_scenario("default")
    assert make_reward(name, scenario).scenario is scenario


def _fresh_cluster(counts: list[int]):
    from types import SimpleNamespace

    instances = {i: SimpleNamespace(num_requests=n) for i, n in enumerate(counts)}
    return SimpleNamespace(events=SimpleNamespace(now_s=0.0), arrived=0, submitted_requests=[], outcomes=[],
                           instances=instances)


def test_a_new_dense_latency_reward_starts_as_if_reset_on_an_empty_cluster_at_time_0():
    from types import SimpleNamespace

    import envs
    from envs.rewards import DenseLatencyReward

    reward = DenseLatencyReward(envs.make_scenario("default"))  # no reset: the state of an empty cluster at 0 s
    cluster = _fresh_cluster([0])
    cluster.events.now_s, cluster.arrived = 2.0, 2
    cluster.submitted_requests = [SimpleNamespace(arrival_s=0.5), SimpleNamespace(arrival_s=1.0)]
    cluster.outcomes = [SimpleNamespace(finish_s=1.5)]  # the first ended at 1.5 s
    # In the system: 0.5 -> 2.0 and 1.0 -> 2.0, less 1.5 -> 2.0 after the end: 1.5 + 1.0 - 0.5 = 2 request-seconds.
    assert reward(cluster, []) == pytest.approx(-2.0 / 10.0)


def test_load_balance_shaping_charges_the_potential_change_by_hand():
    """Φ = −Σ (n / 16)² over the instances: a request joining an empty instance costs 1/256 at
    once, one joining an instance of 2 costs (3² − 2²) / 256 = 5/256 (the docstring's (2n + 1) / 256)."""
    from types import SimpleNamespace

    import envs
    from envs.rewards import BalancedDenseLatencyReward

    reward = BalancedDenseLatencyReward(envs.make_scenario("default"))  # new: Φ = 0 of an empty cluster
    cluster = _fresh_cluster([0, 0])
    cluster.events.now_s, cluster.arrived = 1.0, 1
    cluster.submitted_requests = [SimpleNamespace(arrival_s=0.5)]
    cluster.instances[0].num_requests = 1
    assert reward(cluster, []) == pytest.approx(-0.5 / 10.0 - 1.0 / 256.0)
    cluster.events.now_s, cluster.arrived = 2.0, 3
    cluster.submitted_requests += [SimpleNamespace(arrival_s=2.0), SimpleNamespace(arrival_s=2.0)]
    cluster.instances[0].num_requests, cluster.instances[1].num_requests = 3, 0  # 1 -> 3 requests: (9 - 1) / 256
    assert reward(cluster, []) == pytest.approx(-1.0 / 10.0 - 8.0 / 256.0)
    assert reward.potential(cluster) == -9.0 / 256.0
