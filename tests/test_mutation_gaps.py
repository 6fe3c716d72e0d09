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
