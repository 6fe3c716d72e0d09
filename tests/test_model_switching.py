"""Model switching (cascadeserve.txt §6.2 MS, §6.6 "No cascade") planned with the gear planner."""

from __future__ import annotations

import numpy as np
import pytest

from baselines.cascadeserve.model_switching import plan_model_switching, single_model_cascade, single_model_front
from baselines.cascadeserve.planner import PlanningInfeasibleError, PlanningProblem
from baselines.cascadeserve.profiles import Device, ModelProfile


def toy_problem(latency_slo_s: float, qps_max: float = 60.0) -> PlanningProblem:
    # Accuracy 20 / 50 / 80, batch b costs b x the per-sample runtime 0.01 / 0.03 / 0.08 s.
    scores = np.array([[0.0, 40.0, 70.0], [40.0, 60.0, 90.0]])
    profiles = tuple(ModelProfile(name, tuple(t * b for b in range(1, 9)), 4.0) for name, t in
                     (("S", 0.01), ("M", 0.03), ("L", 0.08)))
    devices = (Device(0, 0, 10.0), Device(1, 0, 10.0))
    return PlanningProblem(("S", "M", "L"), profiles, devices, scores, 6, qps_max, 4, latency_slo_s,
                           num_cascade_samples=0, sim_duration_s=5.0)


def test_single_model_candidates_by_hand():
    problem = toy_problem(0.5)
    middle = single_model_cascade(problem, 1)
    assert middle.stage_shares == (0.0, 1.0, 0.0) and middle.quality == 50.0 and middle.work_s == 0.03
    assert middle.levels == (5, 0) and middle.demand_qps(problem.models, 10.0) == {"M": 10.0}
    assert [(c.quality, c.work_s) for c in single_model_front(problem)] == [(20.0, 0.01), (50.0, 0.03), (80.0, 0.08)]
    with pytest.raises(ValueError, match="model index"):
        single_model_cascade(problem, 3)


def test_every_gear_serves_one_model_and_higher_qps_gets_a_cheaper_one():
    plan = plan_model_switching(toy_problem(0.5), np.random.default_rng(0))
    served = [g.cascade.stage_shares.index(1.0) for g in plan.gears]
    assert all(sorted(g.cascade.stage_shares) == [0.0, 0.0, 1.0] for g in plan.gears)
    assert served == sorted(served, reverse=True) and served[0] > served[-1]
    assert all(g.latency_p95_s <= 0.5 for g in plan.gears)
    with pytest.raises(PlanningInfeasibleError):
        plan_model_switching(toy_problem(0.005), np.random.default_rng(0))
