"""Model switching (CascadeServe §6.2 MS, §6.6 "No cascade"): planned with the gear planner,
served online with requests entering the gear's model."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import baselines
import envs  # noqa: F401
from baselines.cascadeserve.cascade_search import CascadeStats
from baselines.cascadeserve.model_switching import plan_model_switching, single_model_cascade, single_model_front
from baselines.cascadeserve.planner import Gear, GearPlan, PlanningInfeasibleError, PlanningProblem
from baselines.cascadeserve.policy import gear_env_options
from baselines.cascadeserve.profiles import Device, ModelProfile
from envs.scenarios.cascadeserve import cascadeserve
from hardware.latency import latency_model
from simulator.routers.cascade import CascadeRouter
from simulator.cluster import Cluster
from simulator.instance import InstanceConfig
from simulator.request import Request
from tests.test_cascadeserve import observation

ENGINE = "vidur-2024"  # the hand-computed expectations here use its latency model and batching

SMALL, LARGE = "Llama-3.1-8B", "Llama-3.1-70B"
LARGE_CONFIG = InstanceConfig(engine=ENGINE, gpu="H100-80GB", model=LARGE, tp=4)


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


def test_router_entry_stage_serves_a_later_model_alone():
    router = CascadeRouter([SMALL, LARGE], [75.0])
    cluster = Cluster({"H100-80GB": 5}, **router.cluster_options())
    cluster.deploy(InstanceConfig(engine=ENGINE, gpu="H100-80GB", model=SMALL), ready_now=True)
    cluster.deploy(LARGE_CONFIG, ready_now=True)
    router.set_entry_stage(1)
    # Would be accepted at the small model (99 >= 75); entering the large one, it is served there
    # alone: one stage, no judge, the large model's score.
    (outcome,) = cluster.run([Request(0, 1.0, 300, 1, quality_by_model={SMALL: 99.0, LARGE: 42.0})])
    large = latency_model("H100-80GB", LARGE, 4, engine=ENGINE)
    assert outcome.instance_id == 1 and outcome.quality == 42.0
    assert outcome.e2e_s == pytest.approx(large.prefill_time_s(300), rel=1e-12)
    for bad in (2, -1, True):
        with pytest.raises(ValueError, match="entry stage"):
            router.set_entry_stage(bad)


def switching_plan(models: tuple[str, ...]) -> GearPlan:
    """Two single-model gears: the last model up to 20 QPS, the first above."""
    def gear(i: int, served: int) -> Gear:
        shares = tuple(1.0 if stage == served else 0.0 for stage in range(len(models)))
        levels = tuple(10 if stage < served else 0 for stage in range(len(models) - 1))
        return Gear(20.0 * i, 20.0 * (i + 1), CascadeStats(levels, 50.0, shares, 0.1), 1, 0.5, 0.1)

    return GearPlan(models, 11, (gear(0, len(models) - 1), gear(1, 0)), (), 0.0, 0)


def test_model_switching_policy_serves_the_gears_model_by_measured_qps():
    models = cascadeserve().cascade
    plan = switching_plan(models)
    assert gear_env_options(plan) == {"action": "gear", "gears": [[100.0, 100.0, 100.0], [0.0, 0.0, 0.0]],
                                      "entry_stages": [3, 0], "threshold_levels": 11}
    env = gym.make("servegym/Cascade-v0", scenario="cascadeserve", episode_requests=40, judge_latency_s=0.0,
                   **gear_env_options(plan))
    policy = baselines.make("model_switching", env, plan=plan)
    unwrapped = env.unwrapped
    schema = unwrapped.schema
    # 0 QPS: the 70B; 5 arrivals in 100 ms = 50 QPS: the 3B, even with a queue (no α rule); then back.
    assert [policy.act(observation(schema, a, w)) for a, w in ((0, 0), (5, 30), (5, 30))] == [0, 1, 0]
    obs, _ = env.reset(seed=0)
    while True:
        obs, _, _, truncated, _ = env.step(0)  # hold the 70B gear
        if truncated:
            break
    instances = unwrapped.cluster.instances
    assert {instances[o.instance_id].model.name for o in unwrapped.cluster.outcomes} == {models[-1]}
    with pytest.raises(ValueError, match="gear_env_options"):
        baselines.make("model_switching", gym.make("servegym/Cascade-v0", scenario="cascadeserve"), plan=plan)
    with pytest.raises(ValueError, match="entry_stages"):
        gym.make("servegym/Cascade-v0", scenario="cascadeserve", entry_stages=[0])
    with pytest.raises(ValueError, match="entry_stages"):
        gym.make("servegym/Cascade-v0", scenario="cascadeserve", **{**gear_env_options(plan), "entry_stages": [4, 0]})


def test_model_switching_without_a_plan_says_what_it_needs():
    env = gym.make("servegym/Cascade-v0", scenario="cascadeserve", episode_requests=20)
    with pytest.raises(ValueError, match="model_switching needs plan="):
        baselines.make("model_switching", env)
