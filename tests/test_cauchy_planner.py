"""Cauchy's planner: GPU combos, Pareto filtering and CE ranking (Cauchy §3.3.1), the
eq. 16 ILP and its §4.3 variants on a toy instance solved by hand, infeasibility and the
§3.3.2 fallback."""

from __future__ import annotations

import pytest

from baselines.cauchy.combos import COUNT_SHAPES, enumerate_combos
from baselines.cauchy.ilp import InfeasibleDemandError, ServiceDemand, overall_ce, plan_combos, solve_allocation
from simulator.combos import Combo, combo_of_configs, parse_combo
from baselines.cauchy.selection import (
    Candidate,
    build_candidates,
    combo_ce_tokens_per_usd,
    pareto_filter,
    rank_by_ce,
)
from baselines.cauchy.workloads import INVENTORY, get_workload
from hardware.cost_efficiency import cost_efficiency_tokens_per_usd
from hardware.gpus import get_gpu
from hardware.models import get_model
from simulator.instance import Role

H800, A800, H20 = "H800-SXM", "A800-PCIe", "H20-NVL"

# Toy instance (prices from the catalog: H800 2.69, A800 1.19, H20 1.50 $/h).
# c1 <1xH800,1xH20>: 4.19 $/h, CE 4.19 M -> P/C = 1.0, goodput 10
# c2 <2xA800>:       2.38 $/h, CE 1.19 M -> P/C = 2.0, goodput 6
# c3 <1xH20>:        1.50 $/h, CE 1.00 M -> P/C = 1.5, goodput 3
C1 = Candidate(Combo(H800, 1, H20, 1), 4.19e6, 10.0)
C2 = Candidate(Combo(A800, 2), 1.19e6, 6.0)
C3 = Candidate(Combo(H20, 1), 1.0e6, 3.0)
TOY = (C1, C2, C3)
TOY_INVENTORY = {H800: 2, H20: 3, A800: 8}


def counts(plan) -> dict[str, int]:
    return {c.combo.name: n for c, n in plan.entries}


def test_combo_shapes_instances_and_names():
    combo = Combo(H800, 2, H20, 6)
    assert combo.name == "<2xH800-SXM,6xH20-NVL>" and parse_combo(combo.name) == combo
    configs = combo.instance_configs("Llama-3.1-8B")
    assert [(c.gpu, c.tp, c.role) for c in configs] == [(H800, 2, Role.PREFILL)] + [(H20, 2, Role.DECODE)] * 3
    assert combo.gpu_counts() == {H800: 2, H20: 6}
    assert combo.price_per_hour_usd() == pytest.approx(2 * 2.69 + 6 * 1.50)
    assert Combo(A800, 1, A800, 3).gpu_counts() == {A800: 4}
    aggregated = Combo(A800, 2)
    assert aggregated.aggregated and aggregated.name == "<2xA800-PCIe>"
    assert [(c.tp, c.role) for c in aggregated.instance_configs("Llama-3.1-8B")] == [(2, Role.AGGREGATED)]
    # 3 types: 9 ordered pairs x 6 count shapes (1:1 .. 2:6) + 3 types x 2 aggregated sizes
    combos = enumerate_combos(INVENTORY)
    assert len(combos) == 9 * len(COUNT_SHAPES) + 6 and len(set(combos)) == len(combos)


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda: Combo("H999", 1), "unknown GPU 'H999'"),
        (lambda: Combo(H800, 3, H20, 3), "exceeds the TP limit 2"),
        (lambda: Combo(H800, 2, H20, 3), "not a multiple of the prefill TP 2"),
        (lambda: Combo(H800, 0, H20, 1), "prefill_gpus must be a positive integer, got 0"),
        (lambda: Combo(H800, 1, H20, 1.5), "decode_gpus must be a positive integer, got 1.5"),
        (lambda: parse_combo("H800+H20"), "cannot parse GPU combo 'H800\\+H20'"),
    ],
)
def test_bad_combos_raise(bad, match):
    with pytest.raises(ValueError, match=match):
        bad()


def test_combo_ce_is_eq_15_with_the_workload_means():
    workload = get_workload("sharegpt_cauchy")
    expected = cost_efficiency_tokens_per_usd(
        get_model("Llama-3.1-8B"), get_gpu(H800), get_gpu(H20), 290, 207, 32
    )
    assert combo_ce_tokens_per_usd(Combo(H800, 1, H20, 3), workload) == pytest.approx(expected, rel=1e-12)
    # an aggregated combo is its GPU in both phases: A1 f/p + A2 b/p of one GPU
    same = cost_efficiency_tokens_per_usd(get_model("Llama-3.1-8B"), get_gpu(A800), get_gpu(A800), 290, 207, 32)
    assert combo_ce_tokens_per_usd(Combo(A800, 2), workload) == pytest.approx(same, rel=1e-12)


def test_build_candidates_skips_zero_goodput_and_rejects_unprofiled():
    workload = get_workload("longwriter")
    combos = [Combo(H800, 1, H20, 1), Combo(H20, 1)]
    got = build_candidates(combos, workload, {combos[0].name: 3.0, combos[1].name: 0.0})
    assert [c.combo for c in got] == [combos[0]]
    with pytest.raises(ValueError, match=r"no profiled goodput for <1xH20-NVL>"):
        build_candidates(combos, workload, {combos[0].name: 3.0})


def test_pareto_filter_drops_the_dominated_direction():
    workload = get_workload("sharegpt_cauchy")
    forward = Combo(H800, 1, H20, 1)
    reverse = Combo(H20, 1, H800, 1)
    ce_forward, ce_reverse = (combo_ce_tokens_per_usd(c, workload) for c in (forward, reverse))
    assert ce_forward > ce_reverse  # H800 has the FLOPs per dollar, H20 the bandwidth per dollar (eq. 15)
    kept = pareto_filter([Candidate(forward, ce_forward, 20.0), Candidate(reverse, ce_reverse, 20.0)])
    assert [c.combo for c in kept] == [forward]
    # a reverse variant with more goodput per dollar is not dominated: both stay
    kept = pareto_filter([Candidate(forward, ce_forward, 20.0), Candidate(reverse, ce_reverse, 25.0)])
    assert {c.combo for c in kept} == {forward, reverse}
    # same direction, other counts: same CE, so only the most goodput per dollar survives
    bigger = Combo(H800, 1, H20, 2)  # 5.69 $/h
    kept = pareto_filter([Candidate(forward, ce_forward, 20.0), Candidate(bigger, ce_forward, 25.0)])
    assert [c.combo for c in kept] == [forward]  # 20 / 4.19 > 25 / 5.69
    # different GPU pairs never compete
    other = Candidate(Combo(A800, 1, H20, 1), 1.0, 0.1)
    assert other in pareto_filter([Candidate(forward, ce_forward, 20.0), other])


def test_rank_by_ce_descending_then_goodput_per_dollar():
    a = Candidate(Combo(H800, 1, H20, 1), 5e6, 10.0)
    b = Candidate(Combo(H800, 1, H20, 2), 5e6, 20.0)  # same CE, more goodput per dollar
    c = Candidate(Combo(A800, 2), 6e6, 1.0)
    assert rank_by_ce([a, b, c]) == [c, b, a]


def test_co_lp_returns_the_hand_optimum_of_the_toy_instance():
    plan = solve_allocation({"m": ServiceDemand(TOY, 23.0)}, TOY_INVENTORY, "co")["m"]
    # min 1.0 x1 + 2.0 x2 + 1.5 x3, 10 x1 + 6 x2 + 3 x3 >= 23, x1 <= 2, x1 + x3 <= 3, 2 x2 <= 8
    assert counts(plan) == {C1.combo.name: 2, C3.combo.name: 1}
    assert plan.goodput_rps == 23.0 and plan.cost_per_hour_usd == pytest.approx(2 * 4.19 + 1.50)
    assert plan.gpu_counts() == {H800: 2, H20: 3}
    assert plan.solve_time_s > 0


def test_mc_lp_is_the_cheapest_plan_and_mce_lp_the_highest_overall_ce():
    mc = solve_allocation({"m": ServiceDemand(TOY, 23.0)}, TOY_INVENTORY, "mc")["m"]
    assert counts(mc) == {C2.combo.name: 4}  # 4 x 2.38 = 9.52 $/h < 9.88 $/h of CO-LP's plan
    assert mc.cost_per_hour_usd == pytest.approx(9.52)
    # Overall CE = Σ C P x / Σ P x (M tokens/USD). Two c1 (the H800s' limit) give 20 req/s; the
    # other 3 come from c3, (2 x 4.19 x 4.19 + 1.0 x 1.5) / 9.88 = 3.706, or c2, (35.11 + 1.19 x 2.38) /
    # 10.76 = 3.526; every plan without two c1 is lower still. The highest CE costs more than MC-LP's.
    demand = {"m": ServiceDemand(TOY, 23.0)}
    mce = solve_allocation(demand, TOY_INVENTORY, "mce")["m"]
    assert counts(mce) == {C1.combo.name: 2, C3.combo.name: 1}
    assert overall_ce(demand, {("m", 0): 2, ("m", 2): 1}) == pytest.approx((2 * 4.19 * 4.19 + 1.5) / 9.88)
    assert mce.cost_per_hour_usd > mc.cost_per_hour_usd


def test_mce_lp_takes_the_cheapest_of_the_plans_with_the_highest_overall_ce():
    # One c1 (10 req/s) meets 5 req/s at CE 4.19; two c1 have the same CE at twice the dollars.
    mce = solve_allocation({"m": ServiceDemand(TOY, 5.0)}, TOY_INVENTORY, "mce")["m"]
    assert counts(mce) == {C1.combo.name: 1}
    # With H800s spare the highest-CE combo fills the demand alone: 3 x c1 for 23 req/s (30 served),
    # 12.57 $/h, where MC-LP pays 9.52 $/h: §4.3's over-provisioning of high-end GPUs.
    roomy = {**TOY_INVENTORY, H800: 3}
    assert counts(solve_allocation({"m": ServiceDemand(TOY, 23.0)}, roomy, "mce")["m"]) == {C1.combo.name: 3}


def test_infeasible_demand_names_the_unmet_goodput():
    # best reachable: 2 x c1 + 1 x c3 + 4 x c2 = 20 + 3 + 24 = 47 req/s
    with pytest.raises(InfeasibleDemandError, match=r"needs 100 req/s, at most 47 req/s reachable \(unmet 53 req/s\)") as error:
        solve_allocation({"m": ServiceDemand(TOY, 100.0)}, TOY_INVENTORY, "co")
    assert error.value.unmet_rps == {"m": pytest.approx(53.0)}


def test_fallback_relaxes_ce_when_the_shortlist_cannot_meet_demand():
    # the shortlist (top-1 by CE: c1) reaches only 20 req/s; the fallback plans with every
    # candidate at the lowest cost (MC-LP)
    plan = plan_combos(TOY, 23.0, TOY_INVENTORY, shortlist=1)
    assert plan.fallback and plan.objective == "mc" and counts(plan) == {C2.combo.name: 4}
    assert not plan_combos(TOY, 23.0, TOY_INVENTORY).fallback
    with pytest.raises(InfeasibleDemandError, match="unmet 53 req/s"):
        plan_combos(TOY, 100.0, TOY_INVENTORY, shortlist=1)


def test_two_services_share_the_inventory():
    services = {"a": ServiceDemand(TOY, 20.0), "b": ServiceDemand((C1, C3), 6.0)}
    plans = solve_allocation(services, TOY_INVENTORY, "co")
    # alone, a would take 2 x c1 (cost 2.0) and b 2 x c3 (3.0), but that needs 4 H20 of 3.
    # Best together: a = c1 + 2 x c2 (1.0 + 4.0), b = c1 (1.0): 6.0, vs e.g. a = c1 + 2 x c2,
    # b = 2 x c3 (8.0) or a = 4 x c2, b = c1 (9.0)
    assert counts(plans["a"]) == {C1.combo.name: 1, C2.combo.name: 2} and counts(plans["b"]) == {C1.combo.name: 1}


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: solve_allocation({"m": ServiceDemand(TOY, 5.0)}, TOY_INVENTORY, "fastest"), "unknown objective 'fastest'"),
        (lambda: ServiceDemand(TOY, -1.0), "positive finite req/s, got -1.0"),
        (lambda: ServiceDemand(TOY, float("nan")), "got nan"),
        (lambda: solve_allocation({"m": ServiceDemand(TOY, 5.0)}, {H800: -1}), "inventory of H800-SXM must be a non-negative integer, got -1"),
        (lambda: plan_combos(TOY, 5.0, TOY_INVENTORY, shortlist=0), "shortlist must be a positive integer or None, got 0"),
    ],
)
def test_bad_planner_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_a_combo_is_recovered_from_its_instances():
    for combo in enumerate_combos(["H800-SXM", "H20-NVL"]):
        assert combo_of_configs(combo.instance_configs("Llama-3.1-8B")) == combo
    prefill, decode = Combo("H800-SXM", 1, "H20-NVL", 2).instance_configs("Llama-3.1-8B")[:2]
    with pytest.raises(ValueError, match="are not a GPU combo"):
        combo_of_configs([prefill])  # a prefill instance without decode instances
    with pytest.raises(ValueError, match="are not a GPU combo"):
        combo_of_configs([decode, prefill])  # decode first
    with pytest.raises(ValueError, match="no instance configs"):
        combo_of_configs([])


def test_plan_lists_one_combo_per_copy_in_plan_order():
    plan = solve_allocation({"m": ServiceDemand(TOY, 23.0)}, TOY_INVENTORY, "co")["m"]  # 2 x c1 + c3 (above)
    assert plan.combos() == [(C1.combo, 10.0), (C1.combo, 10.0), (C3.combo, 3.0)]
    assert plan.demand_rps == 23.0


def test_solve_time_is_within_the_calls_wall_time():
    import time

    started = time.perf_counter()
    plan = solve_allocation({"m": ServiceDemand(TOY, 23.0)}, TOY_INVENTORY, "co")["m"]
    assert 0.0 < plan.solve_time_s <= time.perf_counter() - started


def test_a_gpu_type_missing_from_the_inventory_is_zero_of_it():
    """c_a <1xA800> (6 req/s, 1.19 $/h) would make 9 req/s cheapest as c_a + c3 (2.69 $/h); with
    no A800 in the inventory MC-LP's plan is 3 x c3 (4.50 $/h), and 12 req/s cannot be met."""
    c_a = Candidate(Combo(A800, 1), 1.19e6, 6.0)
    inventory = {H20: 3}
    plan = solve_allocation({"m": ServiceDemand((c_a, C3), 9.0)}, inventory, "mc")["m"]
    assert counts(plan) == {C3.combo.name: 3}
    with pytest.raises(InfeasibleDemandError, match=r"at most 9 req/s reachable \(unmet 3 req/s\)"):
        solve_allocation({"m": ServiceDemand((c_a, C3), 12.0)}, inventory, "mc")


def test_unmet_goodput_of_services_sharing_a_gpu_type_by_hand():
    """Two H20s: a (5 req/s wanted, 10 per H20), b (1.5 wanted, 1 per H20), c (3 wanted, on an
    A800 the inventory lacks). Most goodput served: one H20 each for a and b, 5 + 1 = 6 req/s
    (both H20s to a serve 5, to b 1.5); so b misses 0.5 req/s and c all its 3."""
    on_h20 = lambda goodput: Candidate(Combo(H20, 1), 1.0e6, goodput)  # noqa: E731
    services = {"a": ServiceDemand((on_h20(10.0),), 5.0), "b": ServiceDemand((on_h20(1.0),), 1.5),
                "c": ServiceDemand((Candidate(Combo(A800, 1), 1.19e6, 6.0),), 3.0)}
    expected = (r"^goodput demand cannot be met with inventory \{'H20-NVL': 2\}: "
                r"'b' needs 1\.5 req/s, at most 1 req/s reachable \(unmet 0\.5 req/s\); "
                r"'c' needs 3 req/s, at most 0 req/s reachable \(unmet 3 req/s\)$")
    with pytest.raises(InfeasibleDemandError, match=expected) as error:
        solve_allocation(services, {H20: 2}, "co")
    assert error.value.unmet_rps == {"a": pytest.approx(0.0, abs=1e-9), "b": pytest.approx(0.5), "c": pytest.approx(3.0)}


def test_mce_lp_below_one_million_tokens_per_usd():
    low = Candidate(Combo(H20, 1), 0.5e6, 3.0)  # 0.5 M tokens/USD: Dinkelbach must start below it
    plan = solve_allocation({"m": ServiceDemand((low,), 3.0)}, TOY_INVENTORY, "mce")["m"]
    assert counts(plan) == {low.combo.name: 1}


def test_mce_lp_takes_a_low_ce_combo_when_the_best_plan_needs_it():
    """H800 <= 2, H20 <= 3, 11 req/s. x1 <1xH800> CE 2 (7 req/s, 2.69 $/h), x2 <2xH800> CE 5
    (4 req/s, 5.38 $/h), y <1xH20> CE 1 (5 req/s, 1.50 $/h). Overall CE Σ C P x / Σ P x of the
    plans meeting 11 req/s: x2 + 2y (5 x 5.38 + 2 x 1.5) / 8.38 = 3.57, 2 x1 2.0, 2 x1 + y 1.78,
    x2 + 3y 3.18, x1 + y 1.64, 3y 1.0: the best needs two of the worst combo."""
    x1, x2, y = Candidate(Combo(H800, 1), 2e6, 7.0), Candidate(Combo(H800, 2), 5e6, 4.0), Candidate(Combo(H20, 1), 1e6, 5.0)
    demand = {"m": ServiceDemand((x1, x2, y), 11.0)}
    plan = solve_allocation(demand, {H800: 2, H20: 3}, "mce")["m"]
    assert counts(plan) == {x2.combo.name: 1, y.combo.name: 2}
    assert overall_ce(demand, {("m", 1): 1, ("m", 2): 2}) == pytest.approx(29.9 / 8.38)


def test_plan_combos_uses_the_objective_asked_for():
    assert counts(plan_combos(TOY, 23.0, TOY_INVENTORY, objective="mc")) == {C2.combo.name: 4}  # MC-LP, above
    assert counts(plan_combos(TOY, 23.0, TOY_INVENTORY, objective="co")) == {C1.combo.name: 2, C3.combo.name: 1}


def test_the_fallback_plan_keeps_the_demand_and_its_solve_time():
    plan = plan_combos(TOY, 23.0, TOY_INVENTORY, shortlist=1)  # the fallback, above
    assert plan.fallback and plan.demand_rps == 23.0 and plan.solve_time_s > 0.0


@pytest.mark.parametrize("shortlist", [True, 2.5])
def test_shortlist_must_be_an_integer(shortlist):
    with pytest.raises(ValueError, match=rf"^shortlist must be a positive integer or None, got {shortlist!r}$"):
        plan_combos(TOY, 5.0, TOY_INVENTORY, shortlist=shortlist)
