"""Cauchy's hierarchical scheduler: goodput-weighted RR across combos (Cauchy §3.4.1) and
its §4.4 rivals on Routing-v0, and the opportunistic instance scheduler inside a combo
(§3.4.2) against basic RR prefill-then-decode."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest

import baselines
import envs  # noqa: F401
from agents.rollout import run_episode
from envs import make_scenario
from envs.combo_scenario import ComboScenario, combo_scenario
from simulator.backends import make_combo_cluster
from simulator.routers.units import WeightedUnitRouter
from simulator.routers.weighted_rr import SmoothWeightedRoundRobin
from simulator.combo_cluster import ComboCluster
from simulator.combos import Combo
from simulator.request import Request

H800, A800, H20 = "H800-SXM", "A800-PCIe", "H20-NVL"
MODEL = "Llama-3.1-8B"
COMBOS = [(Combo(H800, 1, H20, 2), 40.0), (Combo(A800, 2), 18.0), (Combo(H800, 1, A800, 1), 15.0)]


def routing_env(**overrides):
    return gym.make("servegym/Routing-v0", scenario=combo_scenario(make_scenario("cauchy"), COMBOS, **overrides))


def test_smooth_weighted_rr_is_proportional_over_10000_draws():
    weights = [40.0, 18.0, 15.0]
    turns = SmoothWeightedRoundRobin(weights)
    picks = np.bincount([turns.pick() for _ in range(10_000)], minlength=3)
    expected = 10_000 * np.array(weights) / sum(weights)  # 5479.45, 2465.75, 2054.79
    assert np.all(np.abs(picks - expected) <= 1.0)
    # an ineligible item is skipped; the others keep their ratio (18 : 15)
    picks = np.bincount([turns.pick(np.array([False, True, True])) for _ in range(3_300)], minlength=3)
    assert picks[0] == 0 and abs(picks[1] - 1800) <= 1 and abs(picks[2] - 1500) <= 1


@pytest.mark.parametrize("weights, match", [([], "at least one weight"), ([1.0, -2.0], "weight 1 must be finite and >= 0, got -2.0"), ([0.0], "a positive one")])
def test_smooth_weighted_rr_rejects_bad_weights(weights, match):
    with pytest.raises(ValueError, match=match):
        SmoothWeightedRoundRobin(weights)


def test_goodput_weighted_rr_hands_out_requests_in_proportion_to_goodput():
    env = routing_env(episode_requests=50)
    policy = baselines.make("cauchy_gwrr", env)
    observation, _ = env.reset(seed=0)
    scenario = env.unwrapped.scenario
    assert scenario.entry_slots() == [0, 3, 4]  # <1xH800,2xH20> holds slots 0-2
    slots = [int(policy.predict(observation)[0]) for _ in range(10_000)]
    counts = np.array([slots.count(s) for s in scenario.entry_slots()])
    expected = 10_000 * np.array([40.0, 18.0, 15.0]) / 73.0
    assert counts.sum() == 10_000 and np.all(np.abs(counts - expected) <= 1.0)


def test_basic_rr_cycles_combos_and_token_weighted_picks_the_most_kv_room():
    env = routing_env(episode_requests=50)
    observation, _ = env.reset(seed=0)
    basic = baselines.make("basic_rr", env)
    assert [int(basic.predict(observation)[0]) for _ in range(6)] == [0, 3, 4, 0, 3, 4]
    token = baselines.make("token_weighted_rr", env)
    capacity = [sum(i.kv.total_blocks for i in env.unwrapped.cluster.instances.values() if i.instance_id in slots)
                for slots in env.unwrapped.scenario.member_slots()]
    assert int(np.argmax(capacity)) == 0  # an empty cluster: room = KV capacity, H800 + 2 x H20 the most
    assert int(token.predict(observation)[0]) == 0
    masked = dict(observation, action_mask=observation["action_mask"].copy())
    masked["action_mask"][0] = 0.0
    second = env.unwrapped.scenario.entry_slots()[int(np.argsort(capacity)[-2])]
    assert int(token.predict(masked)[0]) == second


def test_gwrr_episode_serves_every_request_without_invalid_actions():
    env = routing_env(episode_requests=300, rate_rps=20.0)
    metrics = run_episode(env, baselines.make("cauchy_gwrr", env), seed=1)
    assert metrics["invalid_actions"] == 0 and metrics["completed"] == 300
    per_combo = np.zeros(3)
    combo_of = env.unwrapped.cluster.combo_of
    for outcome in env.unwrapped.cluster.outcomes:
        per_combo[combo_of(outcome.instance_id)] += 1
    # 300 requests at weights 40 : 18 : 15 -> 164.4, 74.0, 61.6 (within one)
    assert np.all(np.abs(per_combo - 300 * np.array([40, 18, 15]) / 73) <= 1.0)


def test_combo_policies_need_a_combo_scenario():
    env = gym.make("servegym/Routing-v0", scenario="cauchy")
    with pytest.raises(ValueError, match="not a ComboScenario"):
        baselines.make("cauchy_gwrr", env)
    scenario = combo_scenario(make_scenario("cauchy"), COMBOS)
    with pytest.raises(ValueError, match="instances must be exactly the deployed combos' instances"):
        dataclasses.replace(scenario, combos=scenario.combos[:2], combo_goodput_rps=(1.0, 1.0))
    with pytest.raises(ValueError, match="unknown instance scheduler 'fifo'"):
        combo_scenario(make_scenario("cauchy"), COMBOS, instance_scheduler="fifo")
    with pytest.raises(ValueError, match="goodput of <2xA800-PCIe> must be positive"):
        combo_scenario(make_scenario("cauchy"), [(Combo(A800, 2), 0.0)])
    assert isinstance(scenario.with_overrides(rate_rps=3.0), ComboScenario)


def serve_four(instance_scheduler: str) -> ComboCluster:
    """A 1P2D <1xH800, 2xH20> combo (instances 0 = prefill, 1 and 2 = decode) gets four
    long requests 1 ms apart, each while the earlier ones still run."""
    cluster = ComboCluster({H800: 1, H20: 2}, instance_scheduler=instance_scheduler)
    cluster.deploy_combo(Combo(H800, 1, H20, 2), MODEL, ready_now=True)
    cluster.run([Request(i, 0.001 * i, 64, 400) for i in range(4)])
    return cluster


def test_opportunistic_runs_in_place_on_idle_instances_then_least_loaded_decode():
    cluster = serve_four("opportunistic")
    by_id = {o.request_id: o for o in cluster.outcomes}
    # 0: all idle -> in place on decode 1; 1: decode 2 idle; 2: only the prefill instance idle;
    # 3: none idle -> prefill on 0, then the least-loaded decode (1 and 2 tie at one request: 1)
    assert [by_id[i].instance_id for i in range(4)] == [1, 2, 0, 1]
    assert [by_id[i].num_migrations for i in range(4)] == [0, 0, 0, 1]
    assert cluster.in_place_dispatches == 3


@pytest.mark.parametrize("backend", ["python", "compiled"])
def test_unit_router_places_in_place_as_the_combo_dispatch_does(backend: str):
    """Scaling-v0's unit router over the one combo: on the compiled engine both the routing and
    the in-place placement run inside the engine (Engine.place_in_combo), with the same result."""
    cluster = make_combo_cluster({H800: 1, H20: 2}, backend=backend, router=WeightedUnitRouter(lambda: [((0, 1, 2), 1.0)]))
    cluster.deploy_combo(Combo(H800, 1, H20, 2), MODEL, ready_now=True)
    cluster.run([Request(i, 0.001 * i, 64, 400) for i in range(4)])
    by_id = {o.request_id: o for o in cluster.outcomes}
    assert [by_id[i].instance_id for i in range(4)] == [1, 2, 0, 1]
    assert [by_id[i].num_migrations for i in range(4)] == [0, 0, 0, 1]
    assert cluster.in_place_dispatches == 3
    if backend == "compiled":
        assert cluster.router_spec.name == "units" and cluster.engine.in_place_dispatches == 3


def test_basic_rr_always_prefills_then_alternates_decode_instances():
    cluster = serve_four("basic_rr")
    by_id = {o.request_id: o for o in cluster.outcomes}
    assert [by_id[i].instance_id for i in range(4)] == [1, 2, 1, 2]
    assert all(by_id[i].num_migrations == 1 for i in range(4)) and cluster.in_place_dispatches == 0


def test_combo_cluster_rejects_bad_setups():
    with pytest.raises(ValueError, match="unknown instance scheduler 'random'"):
        ComboCluster({H800: 1}, instance_scheduler="random")
    cluster = ComboCluster({H800: 1, H20: 1})
    with pytest.raises(ValueError, match="cannot deploy <1xH800-SXM,2xH20-NVL>: it needs 2 x H20-NVL, 1 free"):
        cluster.deploy_combo(Combo(H800, 1, H20, 2), MODEL)
    with pytest.raises(ValueError, match="instance 7 belongs to no combo"):
        cluster.combo_of(7)
