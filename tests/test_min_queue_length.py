"""CascadeServe's minimum queue length (CascadeServe §4.5) in the simulator, Cascade-v0 and
the ``cascadeserve`` policy: hand-computed start times, the bounded wait, completion, and the
planned lengths applied online."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest

import baselines
import envs  # noqa: F401
from baselines.cascadeserve.cascade_search import CascadeStats
from baselines.cascadeserve.planner import Gear, GearPlan
from baselines.cascadeserve.policy import choice_index
from hardware.latency import latency_model
from simulator.cluster import Cluster
from simulator.instance import InstanceConfig
from simulator.request import Request
from simulator.workloads import PoissonArrivals, generate_requests, length_sampler

ENGINE = "vidur-2024"  # the hand-computed expectations here use its latency model and batching

GPU, MODEL, PROMPT = "A100-80GB", "Llama-2-7B", 100


def gated_cluster(length: int, max_wait_s: float, instances: int = 1) -> Cluster:
    cluster = Cluster({GPU: instances})
    for _ in range(instances):
        instance_id = cluster.deploy(InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL), ready_now=True)
        cluster.instances[instance_id].set_min_queue_length(length, max_wait_s)
    return cluster


def batch_prefill_s(batch: int) -> float:
    """One prefill iteration of ``batch`` prompts of PROMPT tokens (``SegmentPlanner.mixed_iteration_s``)."""
    return latency_model(GPU, MODEL, engine=ENGINE).iteration_time_s(batch * PROMPT, batch * PROMPT * (PROMPT + 1) / 2, 0, 0)


def test_three_waiting_requests_wait_for_the_timeout_then_prefill_together():
    requests = [Request(i, 0.1 * i, PROMPT, 1) for i in range(3)]
    outcomes = gated_cluster(4, 0.5).run(requests)
    # Below 4 waiting the gate holds until the oldest (arrived at 0) has waited 0.5 s.
    assert [o.first_scheduled_s for o in outcomes] == [0.5] * 3
    assert [o.finish_s for o in outcomes] == [0.5 + batch_prefill_s(3)] * 3


def test_four_waiting_requests_start_at_once():
    requests = [Request(i, 0.1 * i, PROMPT, 1) for i in range(4)]
    outcomes = gated_cluster(4, 0.5).run(requests)
    assert [o.first_scheduled_s for o in outcomes] == [0.30000000000000004] * 4  # 0.1 * 3
    assert [o.finish_s for o in outcomes] == [0.1 * 3 + batch_prefill_s(4)] * 4


def test_without_the_gate_each_request_starts_on_arrival():
    requests = [Request(i, 1.0 * i, PROMPT, 1) for i in range(3)]
    outcomes = gated_cluster(1, 0.5).run(requests)
    assert [o.first_scheduled_s for o in outcomes] == [0.0, 1.0, 2.0]
    assert [o.finish_s for o in outcomes] == [t + batch_prefill_s(1) for t in (0.0, 1.0, 2.0)]


def test_every_request_completes_and_length_one_is_bit_identical_to_no_gate():
    def run(length: int | None) -> list:
        requests = generate_requests(PoissonArrivals(8.0), length_sampler("sharegpt"), 150, np.random.default_rng(1))
        cluster = Cluster({GPU: 2})
        for _ in range(2):
            instance_id = cluster.deploy(InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL, memory_utilization=0.3), ready_now=True)
            if length is not None:
                cluster.instances[instance_id].set_min_queue_length(length, 0.2)
        return sorted(cluster.run(requests), key=lambda o: o.request_id)

    plain, off, gated = run(None), run(1), run(6)
    assert [repr(o) for o in off] == [repr(o) for o in plain]
    # every request completes, but the prompts over Llama-2-7B's context (simulator.context)
    assert len(gated) == 150 and all(o.completed == (o.prompt_tokens <= 4096) for o in gated)
    assert [o.e2e_s for o in gated] != [o.e2e_s for o in plain]


@pytest.mark.parametrize("length, wait, match", [(0, 0.1, "min queue length"), (2.0, 0.1, "min queue length"),
                                                 (2, -1.0, "max_wait_s"), (2, float("inf"), "max_wait_s")])
def test_bad_gate_settings_raise(length, wait, match):
    with pytest.raises(ValueError, match=match):
        gated_cluster(length, wait)


def cascade_env(**kwargs):
    return gym.make("servegym/Cascade-v0", scenario="cascadeserve", quality_kind="correct",
                    episode_requests=200, **kwargs)


def test_cascade_env_batch_entries_set_every_instance_of_each_model():
    env = cascade_env(min_queue_lengths=(1, 2, 4, 8))
    unwrapped = env.unwrapped
    assert env.action_space.nvec.tolist() == [11, 11, 11, 4, 4, 4, 4]
    assert unwrapped.max_queue_wait_s == unwrapped.scenario.control_interval_s
    obs, _ = env.reset(seed=0)
    assert obs["action_mask"].shape == (3 * 11 + 4 * 4,) and obs["action_mask"][33:].all()
    assert all(i.min_queue_length == 1 for i in unwrapped.cluster.instances.values())
    obs, *_ = env.step(np.array([0, 0, 0, 2, 3, 0, 1]))
    expected = {"OpenLlama-3B": 4, "Llama-2-7B": 8, "Llama-2-13B": 1, "Llama-2-70B": 2}
    assert unwrapped.current_min_queue_lengths() == expected
    assert {i.model.name: i.min_queue_length for i in unwrapped.cluster.instances.values()} == expected
    assert obs["context"][-4:].tolist() == [0.5, 1.0, 0.125, 0.25]


@pytest.mark.parametrize("kwargs, match", [
    (dict(min_queue_lengths=(2, 1)), "strictly increasing"),
    (dict(min_queue_lengths=(0, 1)), "strictly increasing"),
    (dict(min_queue_lengths=()), "strictly increasing"),
    (dict(min_queue_lengths=(1, 2), action="gear", gears=[[0, 0, 0]]), "action='thresholds'"),
    (dict(min_queue_lengths=(1, 2), max_queue_wait_s=-0.1), "max_queue_wait_s"),
])
def test_bad_batching_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        cascade_env(**kwargs)


def test_choice_index_rounds_down():
    assert [choice_index((1, 2, 4, 8), n) for n in (1, 3, 4, 16)] == [0, 1, 2, 3]
    assert choice_index((2, 4), 1) == 0


def test_policy_applies_the_gears_planned_lengths_and_its_qps_is_the_arrivals():
    env = cascade_env(min_queue_lengths=(1, 2, 3, 4, 5, 6))
    unwrapped = env.unwrapped
    models = tuple(unwrapped.models)
    low = CascadeStats((10, 10, 10), 0.0, (1.0, 0.5, 0.3, 0.2), 0.0)
    high = CascadeStats((0, 0, 0), 0.0, (1.0, 0.0, 0.0, 0.0), 0.0)
    plan = GearPlan(models, 11, (Gear(0.0, 20.0, low, 1, 0.5, 0.1), Gear(20.0, 40.0, high, 5, 0.5, 0.1)), (), 0.0, 0)
    policy = baselines.make("cascadeserve", env, plan=plan, alpha=0.0)
    obs, _ = env.reset(seed=0)
    seen = 0
    for _ in range(40):
        action = policy.act(obs)
        # The policy's QPS is the last interval's arrivals (α = 0: the gear follows it at once).
        arrived = unwrapped.cluster.arrived
        assert policy.gear_trace[-1] == plan.gear_index((arrived - seen) / unwrapped.scenario.control_interval_s)
        seen = arrived
        gear = plan.gears[policy.gear_trace[-1]]
        planned = [gear.min_queue_length, 1, 1, 1]
        assert action.tolist() == list(gear.cascade.levels) + [n - 1 for n in planned]
        obs, *_ = env.step(action)
        assert unwrapped.current_min_queue_lengths() == dict(zip(models, planned))
    assert set(policy.gear_trace) == {0, 1}
    with pytest.raises(ValueError, match="plan"):
        baselines.make("cascadeserve", env, plan=dataclasses.replace(plan, threshold_levels=5))
