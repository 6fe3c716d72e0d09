"""servegym/Scaling-v0: API conformance, cost and lifecycle mechanics, masking."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import envs  # noqa: F401  (registers the IDs)
from envs.base import InvalidActionError
from envs.observation import BASE_FEATURES
from envs.scaling import ADD, HOLD, REMOVE, ScalingEnv
from hardware.gpus import get_gpu
from hardware.latency import weight_load_time_s
from simulator.instance import Lifecycle
from simulator.metrics import meets_slo

A100_USD_PER_S = get_gpu("A100-80GB").price_per_hour_usd / 3600.0
L40S_USD_PER_S = get_gpu("L40S").price_per_hour_usd / 3600.0
ROOM = {"gpu_inventory": {"A100-80GB": 5, "L40S": 5}, "max_instances": 10}
STARTING = BASE_FEATURES.index("starting")
SERVING = BASE_FEATURES.index("serving")
DRAINING = BASE_FEATURES.index("draining")


def make(**kwargs):
    options = {"episode_requests": 200, "scaling_window_s": 2.0, **ROOM, **kwargs}
    return ScalingEnv("default", **options)


def test_kinds_are_the_distinct_instance_configs():
    env = make()
    assert env.kind_names == ("Llama-3.1-8B@1xA100-80GB", "Llama-3.1-8B@1xL40S")
    assert [len(u.configs) for u in env.units] == [1, 1] and [u.routing_weight for u in env.units] == [1.0, 1.0]
    assert env.action_space.nvec.tolist() == [3, 3]


def test_gymnasium_and_sb3_checkers_pass():
    env = gym.make("servegym/Scaling-v0", scenario="default", episode_requests=100, scaling_window_s=2.0, **ROOM)
    gym_check_env(env.unwrapped)
    sb3_check_env(make(episode_requests=100))


def test_maskable_ppo_learns_without_error():
    from sb3_contrib import MaskablePPO

    env = make(episode_requests=100, scaling_window_s=1.0)
    model = MaskablePPO("MultiInputPolicy", env, n_steps=64, batch_size=64, seed=0)
    model.learn(1024)
    assert model.num_timesteps >= 1024


def rollout(seed, steps=12):
    env = make()
    obs, _ = env.reset(seed=seed)
    trace = [obs]
    actions = [[ADD, HOLD], [HOLD, REMOVE], [HOLD, HOLD], [REMOVE, ADD]]
    for step in range(steps):
        mask = env.action_masks().reshape(2, 3)
        action = np.array([a if mask[k, a] else HOLD for k, a in enumerate(actions[step % 4])])
        obs, reward, terminated, truncated, _ = env.step(action)
        trace.append((obs, reward))
        if terminated or truncated:
            break
    return trace


def test_same_seed_same_trajectory():
    first, second = rollout(5), rollout(5)
    assert len(first) == len(second)
    for a, b in zip(first[1:], second[1:]):
        assert a[1] == b[1]
        for key in a[0]:
            assert np.array_equal(a[0][key], b[0][key])
    assert any(a[1] != b[1] for a, b in zip(first[1:], rollout(6)[1:]))


def test_adding_costs_gpus_times_price_from_deploy():
    env = make(rate_rps=0.001, scaling_window_s=10.0, reward="cost")
    env.reset(seed=0)
    _, reward, _, _, info = env.step(np.array([ADD, HOLD]))
    assert env.cluster.arrived == 0  # no request in the window: cost only
    # 4 + 1 A100s and 4 L40S held for the whole 10 s window.
    expected_usd = 10.0 * (5 * A100_USD_PER_S + 4 * L40S_USD_PER_S)
    assert info["cost_usd"] == pytest.approx(expected_usd, rel=1e-12)
    full_inventory_usd_per_h = 5 * get_gpu("A100-80GB").price_per_hour_usd + 5 * get_gpu("L40S").price_per_hour_usd
    assert reward == pytest.approx(-1000.0 / full_inventory_usd_per_h * expected_usd, rel=1e-12)
    _, _, _, _, info = env.step(np.array([HOLD, HOLD]))
    assert info["cost_usd"] == pytest.approx(2 * expected_usd, rel=1e-12)


def test_started_instance_serves_only_after_the_startup_delay():
    env = make(rate_rps=20.0, scaling_window_s=0.5, provisioning_s=1.0, episode_requests=300)
    env.reset(seed=1)
    delay_s = weight_load_time_s("Llama-3.1-8B", "A100-80GB") + 1.0  # 1.50 s
    env.step(np.array([ADD, HOLD]))
    new_id = max(env.cluster.instances)
    new = env.cluster.instances[new_id]
    for _ in range(2):  # t = 1.0 s, 1.5 s: still loading weights
        obs, *_ = env.step(np.array([HOLD, HOLD]))
        assert new.lifecycle == Lifecycle.STARTING and new.num_requests == 0
        assert obs["instances"][8, STARTING] == 1.0 and obs["instances"][8, SERVING] == 0.0
        assert obs["context"][8 + 1] == pytest.approx(1 / 10)  # one A100 instance starting, / 10 slots
    obs, *_ = env.step(np.array([HOLD, HOLD]))  # t = 2.0 s
    assert new.lifecycle == Lifecycle.SERVING and obs["instances"][8, SERVING] == 1.0
    truncated = False
    while not truncated:
        _, _, _, truncated, _ = env.step(np.array([HOLD, HOLD]))
    served = [o for o in env.cluster.outcomes if o.instance_id == new_id]
    assert served and min(o.arrival_s for o in served) >= delay_s


def test_remove_drains_then_stops_and_frees_the_slot():
    env = ScalingEnv("default", episode_requests=400, scaling_window_s=2.0)  # inventory fully deployed
    env.reset(seed=2)
    env.step(np.array([HOLD, HOLD]))
    assert not env.action_masks().reshape(2, 3)[:, ADD].any()  # no free GPU: add masked
    newest_l40s = env.cluster.instances[7]
    assert newest_l40s.num_requests > 0
    drained_at_s = env.cluster.events.now_s
    rate_before = env.cluster.cost_rate_usd_per_s()
    obs, *_ = env.step(np.array([HOLD, REMOVE]))
    assert newest_l40s.lifecycle in (Lifecycle.DRAINING, Lifecycle.STOPPED)
    assert all(o.arrival_s <= drained_at_s for o in env.cluster.outcomes if o.instance_id == 7)
    while newest_l40s.lifecycle == Lifecycle.DRAINING:
        assert obs["instances"][7, DRAINING] == 1.0
        obs, *_ = env.step(np.array([HOLD, HOLD]))
    assert newest_l40s.lifecycle == Lifecycle.STOPPED and newest_l40s.num_requests == 0
    assert not obs["instances"][7].any()
    assert env.cluster.gpus_in_use["L40S"] == 3
    assert env.cluster.cost_rate_usd_per_s() == pytest.approx(rate_before - L40S_USD_PER_S, rel=1e-12)
    assert env.action_masks().reshape(2, 3)[1, ADD]  # GPU and slot free again
    obs, *_ = env.step(np.array([HOLD, ADD]))  # loads in 0.5 s, serving by the window's end
    assert max(env.cluster.instances) == 8 and env.cluster.instances[8].lifecycle == Lifecycle.SERVING
    assert obs["instances"][7, SERVING] == 1.0  # instance 8 took the stopped instance's slot 7


def test_never_beyond_inventory():
    env = make(gpu_inventory={"A100-80GB": 5, "L40S": 4}, max_instances=10, rate_rps=0.001)
    env.reset(seed=0)
    assert env.action_masks().reshape(2, 3).tolist() == [[True, True, True], [True, True, False]]
    env.step(np.array([ADD, HOLD]))
    assert env.action_masks().reshape(2, 3)[:, ADD].tolist() == [False, False]
    _, _, _, _, info = env.step(np.array([ADD, HOLD]))
    assert info["invalid_action"]
    assert env.cluster.gpus_in_use == {"A100-80GB": 5, "L40S": 4}


def test_add_needs_a_free_slot():
    env = make(max_instances=9, rate_rps=0.001)
    env.reset(seed=0)
    env.step(np.array([HOLD, ADD]))
    assert env.action_masks().reshape(2, 3)[:, ADD].tolist() == [False, False]


def test_masked_action_falls_back_to_hold_with_penalty():
    twins = [make(gpu_inventory={"A100-80GB": 4, "L40S": 4}, invalid_action_penalty=2.5) for _ in range(2)]
    for env in twins:
        env.reset(seed=3)
    obs_bad, reward_bad, _, _, info_bad = twins[0].step(np.array([ADD, HOLD]))
    obs_hold, reward_hold, _, _, info_hold = twins[1].step(np.array([HOLD, HOLD]))
    assert info_bad["invalid_action"] and not info_hold["invalid_action"]
    assert reward_bad == reward_hold - 2.5
    for key in obs_hold:
        assert np.array_equal(obs_bad[key], obs_hold[key])


def test_removing_every_serving_instance_is_invalid_jointly():
    from envs.scenario import InstanceGroup

    env = make(rate_rps=0.001)
    scenario = env.scenario
    small = scenario.with_overrides(
        instances=tuple(InstanceGroup(g.config, 1) for g in scenario.instances), max_instances=4,
    )
    env = ScalingEnv(small, scaling_window_s=2.0)
    env.reset(seed=0)
    assert env.action_masks().reshape(2, 3)[:, REMOVE].tolist() == [True, True]
    _, _, _, _, info = env.step(np.array([REMOVE, REMOVE]))
    assert info["invalid_action"]
    assert [i.lifecycle for i in env.cluster.instances.values()] == [Lifecycle.SERVING, Lifecycle.SERVING]
    env.step(np.array([REMOVE, HOLD]))
    assert env.action_masks().reshape(2, 3)[:, REMOVE].tolist() == [False, False]  # one serving left


def test_strict_raises_on_masked_action():
    env = ScalingEnv("default", strict=True, episode_requests=50)
    env.reset(seed=0)
    with pytest.raises(InvalidActionError):
        env.step(np.array([ADD, HOLD]))


@pytest.mark.parametrize("action", [np.array([3, 1]), np.array([-1, 1]), np.array([1, 1, 1]), np.array([1])])
def test_out_of_space_action_raises(action):
    env = make()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="outside the action space"):
        env.step(action)


def test_episode_runs_to_truncation_and_every_request_ends():
    env = make(episode_requests=150)
    obs, _ = env.reset(seed=4)
    steps = 0
    while True:
        obs, reward, terminated, truncated, info = env.step(np.array([HOLD, HOLD]))
        steps += 1
        assert not terminated
        assert all(np.isfinite(v).all() and env.observation_space[k].contains(v) for k, v in obs.items())
        if truncated:
            break
    assert sorted(o.request_id for o in env.cluster.outcomes) == list(range(150))
    assert info["episode_metrics"]["completed"] + info["episode_metrics"]["rejected"] == 150
    assert steps == int(np.ceil(info["time_s"] / 2.0))


@pytest.mark.parametrize("window", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_window_raises(window):
    with pytest.raises(ValueError, match="scaling_window_s"):
        ScalingEnv("default", scaling_window_s=window)


def test_scaling_unit_rejects_bad_definitions():
    from envs.scenario import ScalingUnit
    from simulator.instance import InstanceConfig, Role

    aggregated = InstanceConfig(gpu="A100-80GB", model="Llama-3.1-8B")
    decode = InstanceConfig(gpu="A100-80GB", model="Llama-3.1-8B", role=Role.DECODE)
    assert ScalingUnit("pair", (aggregated, aggregated)).gpu_counts() == {"A100-80GB": 2}
    with pytest.raises(ValueError, match="routing_weight of 'x' must be positive and finite, got nan"):
        ScalingUnit("x", (aggregated,), float("nan"))
    with pytest.raises(ValueError, match="entry \\(first\\) instance cannot be decode-only"):
        ScalingUnit("x", (decode, aggregated))
    with pytest.raises(ValueError, match="scaling unit 'x' has no instance"):
        ScalingUnit("x", ())


def test_routing_between_windows_is_least_outstanding():
    env = make(rate_rps=50.0)
    env.reset(seed=0)
    env.step(np.array([HOLD, HOLD]))
    loads = {i: inst.num_requests for i, inst in env.cluster.instances.items()}
    expected = min(loads, key=lambda i: (loads[i], i))
    assert env.cluster.router(env.cluster, None) == expected


def test_reference_tokens_per_usd_prices_each_window_against_the_reference():
    env = make(rate_rps=20.0, scaling_window_s=5.0, reward="cost", reference_tokens_per_usd=2e6)
    env.reset(seed=0)
    cost_before, seen = 0.0, 0
    for _ in range(4):
        _, reward, _, _, info = env.step(np.array([HOLD, HOLD]))
        finished = env.cluster.outcomes[seen:]
        seen = len(env.cluster.outcomes)
        good_tokens = sum(o.output_tokens for o in finished if meets_slo(o))
        spent = info["cost_usd"] - cost_before
        cost_before = info["cost_usd"]
        assert reward == pytest.approx((good_tokens - 2e6 * spent) / 1000.0, rel=1e-9, abs=1e-9)
    with pytest.raises(ValueError, match="reference_tokens_per_usd must be a positive finite number, got -1.0"):
        make(reward="cost", reference_tokens_per_usd=-1.0)
    with pytest.raises(ValueError, match="apply to reward='cost' only, got reward='slo'"):
        make(reward="slo", reference_tokens_per_usd=2e6)


def waiting(env):
    return sum(len(i.waiting) for i in env.cluster.instances.values())


def test_waiting_potential_shapes_each_window_and_sums_to_zero():
    plain = make(rate_rps=40.0, reward="cost")
    shaped = make(rate_rps=40.0, reward="cost", waiting_potential=0.5)
    plain.reset(seed=3)
    shaped.reset(seed=3)
    totals, most_waiting, truncated = [0.0, 0.0], 0, False
    while not truncated:
        before = waiting(shaped)
        _, plain_reward, _, _, _ = plain.step(np.array([HOLD, HOLD]))
        _, shaped_reward, _, truncated, _ = shaped.step(np.array([HOLD, HOLD]))
        assert shaped_reward - plain_reward == pytest.approx(0.5 * (before - waiting(shaped)), abs=1e-9)
        totals[0] += plain_reward
        totals[1] += shaped_reward
        most_waiting = max(most_waiting, before)
    assert most_waiting > 0
    assert totals[1] == pytest.approx(totals[0], abs=1e-6)  # nothing waits at either end


@pytest.mark.parametrize("bad", [-0.5, float("nan"), float("inf")])
def test_bad_waiting_potential_raises(bad):
    with pytest.raises(ValueError, match="waiting_potential must be a finite number >= 0"):
        make(reward="cost", waiting_potential=bad)
    with pytest.raises(ValueError, match="apply to reward='cost' only, got reward='latency'"):
        make(reward="latency", waiting_potential=0.5)


def test_one_unit_mode_space_and_mask_layout():
    env = make(action="one_unit", rate_rps=0.001)
    obs, _ = env.reset(seed=0)
    assert env.action_space == gym.spaces.Discrete(5)  # hold, add A100, add L40S, remove A100, remove L40S
    per_kind = make(rate_rps=0.001)
    per_kind.reset(seed=0)
    grid = per_kind.action_masks().reshape(2, 3)
    assert env.action_masks().tolist() == [True, *grid[:, ADD].tolist(), *grid[:, REMOVE].tolist()]
    assert obs["action_mask"].shape == (5,)


def test_one_unit_actions_replay_the_per_kind_trajectory_bit_for_bit():
    one_unit, per_kind = make(action="one_unit"), make()
    pairs = [(1, [ADD, HOLD]), (0, [HOLD, HOLD]), (4, [HOLD, REMOVE]), (2, [HOLD, ADD]), (3, [REMOVE, HOLD])]
    one_unit.reset(seed=4)
    per_kind.reset(seed=4)
    for index, choices in pairs * 2:
        a = one_unit.step(index)
        b = per_kind.step(np.array(choices))
        assert a[1] == b[1] and a[4]["invalid_action"] == b[4]["invalid_action"]
        assert np.array_equal(a[0]["instances"], b[0]["instances"])
        assert np.array_equal(a[0]["context"], b[0]["context"])
    assert sorted(one_unit.cluster.instances) == sorted(per_kind.cluster.instances)


def test_one_unit_mask_is_exact_where_per_kind_masks_miss_a_joint_limit():
    """One A100 and one L40S free: each add fits alone, both together do not fit the one free slot."""
    options = {"gpu_inventory": {"A100-80GB": 5, "L40S": 5}, "max_instances": 9, "rate_rps": 0.001}
    per_kind, one_unit = make(**options), make(action="one_unit", **options)
    per_kind.reset(seed=0)
    one_unit.reset(seed=0)
    assert per_kind.action_masks().reshape(2, 3)[:, ADD].tolist() == [True, True]
    assert per_kind.step(np.array([ADD, ADD]))[4]["invalid_action"]
    mask = one_unit.action_masks()
    assert mask[1] and mask[2]
    assert not one_unit.step(2)[4]["invalid_action"]
    assert one_unit.action_masks()[1:3].tolist() == [False, False]  # the slot is taken now


def test_one_unit_mask_never_allows_an_invalid_action():
    env = make(action="one_unit", gpu_inventory={"A100-80GB": 6, "L40S": 5}, max_instances=10, rate_rps=0.5)
    env.reset(seed=1)
    rng = np.random.default_rng(0)
    for _ in range(40):
        mask = env.action_masks()
        assert mask[0]
        _, _, _, truncated, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        assert not info["invalid_action"]
        if truncated:
            break


def test_unknown_action_mode_raises():
    with pytest.raises(ValueError, match="unknown action mode 'one'"):
        make(action="one")


@pytest.mark.parametrize("backend", ["compiled", "python"])
def test_unit_lifecycle_codes_and_counts_are_each_units_lifecycle(backend):
    """``unit_lifecycle_codes`` (vector operations on the instance arrays) is ``unit_lifecycle``
    of every unit, and ``_lifecycle_counts`` counts them per kind: over random masked windows of
    GPU-combo units (an entry and decode instances), through starting, serving, draining (also
    with the entry stopped and a decode instance still busy) and stopped, on either engine."""
    from envs.random_policy import random_masked_action
    from simulator.instance_arrays import LIFECYCLE_CODES

    env = gym.make("servegym/Scaling-v0", scenario="cauchy_autoscaling", backend=backend).unwrapped
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    states, entry_stopped = set(), 0
    for _ in range(60):
        codes = env.unit_lifecycle_codes().tolist()
        lifecycles = [env.unit_lifecycle(u) for u in env._deployed]
        assert codes == [LIFECYCLE_CODES[lifecycle.value] for lifecycle in lifecycles]
        expected = np.zeros((len(env.units), 3), dtype=np.int64)
        for unit, lifecycle in zip(env._deployed, lifecycles):
            if lifecycle != Lifecycle.STOPPED:
                expected[unit.kind, ("serving", "starting", "draining").index(lifecycle.value)] += 1
        np.testing.assert_array_equal(env._lifecycle_counts(), expected)
        states |= set(codes)
        entry_stopped += sum(lifecycle == Lifecycle.DRAINING and env.cluster.instances[u.instance_ids[0]].lifecycle
                             == Lifecycle.STOPPED for u, lifecycle in zip(env._deployed, lifecycles))
        _, _, _, truncated, _ = env.step(random_masked_action(env.action_space, env.action_masks(), rng))
        if truncated:
            break
    assert states == set(LIFECYCLE_CODES.values()) and entry_stopped > 0
