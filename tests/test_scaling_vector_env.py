"""The native vector env of servegym/Scaling-v0 (envs.scaling_vector through envs.vector and
agents.vec_env): env by env, the trajectories of single envs seeded alike, bit for bit (float32
observations and masks, float64 rewards, step infos, episode metrics and outcomes), whatever the
threads, with actions that include masked-out ones and per-kind actions that break the joint limits
(the fallback and its penalty), units that are added, start up, drain and stop, GPU combos (Cauchy
§3.1) placed in place on idle members; at each episode's end the env's Python cluster holds the single
env's instances, GPUs, dollars, units, slots and combos.
Configurations the kernel does not cover and bad actions raise, naming them."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from servegym_core import _core

import envs  # noqa: F401  (registers the IDs)
from envs import make_scenario
from envs.native_pool import NotCoveredError
from envs.scaling import ADD, REMOVE
from envs.scaling_vector import scaling_kernel_spec
from envs.scenario import Scenario
from envs.vector import NativeVectorEnv
from tests.vector_checks import (
    assert_same_metrics,
    assert_same_observation,
    assert_same_outcomes,
    assert_sb3_vec_env_matches_dummy,
)

SCALING = "servegym/Scaling-v0"
STEP_INFO = ("time_s", "finished", "slo_met", "cost_usd", "invalid_action")
ROOM = {"gpu_inventory": {"A100-80GB": 6, "L40S": 6}, "max_instances": 12}
"""``default`` with room to add: 12 GPUs and slots for its 8 instances."""


class OwnScenario(Scenario):
    """A scenario type of one's own: it may deploy units in ways the kernel does not know."""


def random_actions(rng: np.random.Generator, masks: np.ndarray, space: gym.Space, one_unit: bool) -> np.ndarray:
    """Per env: 70 % of the time an action the mask allows (per kind: each kind's choice among its
    valid ones, which together may still break the joint limits), else any action in the space."""
    actions = []
    for mask in masks.astype(bool):
        if rng.random() < 0.7:
            if one_unit:
                actions.append(int(rng.choice(np.flatnonzero(mask))))
            else:
                actions.append([int(rng.choice(np.flatnonzero(row))) for row in mask.reshape(-1, 3)])
        else:
            actions.append(space.sample())
    return np.array(actions, dtype=np.int64)


def cluster_state(env: Any) -> tuple:
    """What the episode's end leaves in an env (unwrapped) and its cluster: dollars, GPUs held
    and in use, instances and their states, stops, units and slots."""
    cluster = env.cluster
    combos = (list(cluster.combos), dict(cluster._combo_of), cluster.in_place_dispatches) if hasattr(cluster, "combos") else ()
    return (cluster.cost_usd(), dict(cluster._held), dict(cluster.gpus_in_use), dict(cluster._stopped_at_s),
            [(i, instance.lifecycle, instance.config) for i, instance in cluster.instances.items()],
            [(unit.kind, unit.instance_ids) for unit in env._deployed], list(env._slots), env._until_s, combos)


def replay(kwargs: dict, seed: int, num_envs: int, episodes: int, num_threads: int | None = None) -> dict[str, int]:
    """Step NativeVectorEnv and num_envs single envs (seeds seed ..) with the same random actions
    until `episodes` episodes ended, asserting every step equal; returns what was exercised."""
    rng = np.random.default_rng(seed)
    singles = [gym.make(SCALING, **kwargs) for _ in range(num_envs)]
    singles[0].action_space.seed(seed)  # random_actions samples it
    vector = NativeVectorEnv(num_envs, env_id=SCALING, num_threads=num_threads, **kwargs)
    ended_states: dict[int, tuple] = {}
    end_episode = vector.pool.end_episode

    def recorded(i: int) -> dict[str, Any]:
        final = end_episode(i)
        ended_states[i] = cluster_state(vector.pool.envs[i])
        return final

    vector.pool.end_episode = recorded
    obs, _ = vector.reset(seed=seed)
    for i, env in enumerate(singles):
        assert_same_observation({k: v[i] for k, v in obs.items()}, env.reset(seed=seed + i)[0])
    one_unit = kwargs.get("action") == "one_unit"
    seen = {"ended": 0, "steps": 0, "invalid": 0, "added": 0, "removed": 0, "stopped": 0, "in_place": 0}
    while seen["ended"] < episodes:
        actions = random_actions(rng, obs["action_mask"], singles[0].action_space, one_unit)
        obs, rewards, terminated, truncated, infos = vector.step(actions)
        seen["steps"] += 1
        for i, env in enumerate(singles):
            choices = env.unwrapped.per_kind_choices(actions[i])
            s_obs, s_reward, s_terminated, s_truncated, s_info = env.step(actions[i])
            assert rewards[i] == s_reward and np.signbit(rewards[i]) == np.signbit(s_reward)
            seen["invalid"] += s_info["invalid_action"]
            if not s_info["invalid_action"]:
                seen["added"] += choices.count(ADD)
                seen["removed"] += choices.count(REMOVE)
            assert (terminated[i], truncated[i]) == (s_terminated, s_truncated)
            if s_truncated:
                seen["ended"] += 1
                final = infos["final_info"]
                assert_same_observation(infos["final_obs"][i], s_obs)
                for key in STEP_INFO:
                    assert np.array_equal(final[key][i], s_info[key]), key
                metrics = final["episode_metrics"]
                ours = {k: v[i] for k, v in metrics.items() if not k.startswith("_") and metrics[f"_{k}"][i]}
                assert_same_metrics(ours, s_info["episode_metrics"])
                assert_same_outcomes(final["episode_outcomes"][i], s_info["episode_outcomes"])
                assert ended_states.pop(i) == cluster_state(env.unwrapped)
                seen["stopped"] += len(env.unwrapped.cluster._stopped_at_s)
                seen["in_place"] += getattr(env.unwrapped.cluster, "in_place_dispatches", 0)
                s_obs, s_info = env.reset()
            for key in STEP_INFO:
                assert np.array_equal(infos[key][i], s_info[key]), key
            assert_same_observation({k: v[i] for k, v in obs.items()}, s_obs)
    vector.close()
    return seen


@pytest.mark.parametrize("kwargs", [
    {"reward": "cost", "action": "per_kind", "invalid_action_penalty": 0.5},
    {"reward": "cost", "action": "one_unit", "reference_tokens_per_usd": 7.5e6, "waiting_potential": 0.5},
    {"reward": "slo", "action": "per_kind", "provisioning_s": 3.0},
    {"reward": "latency", "action": "one_unit"},
])
def test_one_env_gives_the_single_envs_trajectory(kwargs: dict) -> None:
    kwargs = {"episode_requests": 200, "backend": "compiled", **ROOM, **kwargs}
    seen = replay(kwargs, seed=3, num_envs=1, episodes=2)
    assert seen["added"] > 0 and seen["removed"] > 0 and seen["stopped"] > 0
    assert seen["invalid"] > 0


def test_three_envs_on_two_threads() -> None:
    kwargs = {"episode_requests": 150, "backend": "compiled", **ROOM, "gpu_inventory": {"A100-80GB": 5, "L40S": 6}}
    seen = replay(kwargs, seed=11, num_envs=3, episodes=4, num_threads=2)
    assert seen["added"] > 0 and seen["removed"] > 0 and seen["invalid"] > 0


def test_reasoning_scenario_matches() -> None:
    """pascal: reasoning requests and its tiers' SLOs under scaling."""
    seen = replay({"scenario": "pascal", "episode_requests": 80, "backend": "compiled"}, seed=0, num_envs=1, episodes=1)
    assert seen["removed"] > 0


@pytest.mark.parametrize(("instance_scheduler", "reward", "action"), [
    ("opportunistic", "cost", "one_unit"),
    ("basic_rr", "slo", "per_kind"),
])
def test_gpu_combo_units_match(instance_scheduler: str, reward: str, action: str) -> None:
    """cauchy_autoscaling: units of GPU combos, placed in place on idle members (opportunistic)
    or prefilled and handed to decode instances in turn (basic_rr), inside the kernel."""
    kwargs = {"scenario": "cauchy_autoscaling", "episode_requests": 1500, "backend": "compiled",
              "instance_scheduler": instance_scheduler, "reward": reward, "action": action}
    seen = replay(kwargs, seed=2, num_envs=2, episodes=3, num_threads=2)
    assert seen["added"] > 0 and seen["removed"] > 0 and seen["stopped"] > 0
    assert (seen["in_place"] > 0) == (instance_scheduler == "opportunistic")


def test_sb3_vec_env_gives_dummy_vec_env_results() -> None:
    kwargs = {"episode_requests": 120, "backend": "compiled", **ROOM}
    space = gym.make(SCALING, **kwargs).action_space
    space.seed(0)
    assert_sb3_vec_env_matches_dummy(SCALING, kwargs, STEP_INFO,
                                      lambda rng, masks: random_actions(rng, masks, space, one_unit=False))


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"scenario": OwnScenario(**vars(make_scenario("default")))}, "scenario type OwnScenario"),
    ({"strict": True}, "strict=True"),
    ({"reward": "slo_dense"}, "reward='slo_dense' \\(covered: slo, latency, cost\\)"),
    ({"backend": "python"}, "backend='python'"),
    ({"render_mode": "ansi"}, "render_mode='ansi'"),
])
def test_configurations_not_covered_raise_naming_them(kwargs: dict, named: str) -> None:
    kwargs = {"episode_requests": 24, "backend": "compiled", **kwargs}
    with pytest.raises(NotCoveredError, match=f"does not cover {named}"):
        NativeVectorEnv(2, env_id=SCALING, **kwargs)


@pytest.mark.parametrize("action", ["per_kind", "one_unit"])
def test_bad_actions_raise_naming_them_before_any_env_steps(action: str) -> None:
    vector = NativeVectorEnv(2, env_id=SCALING, episode_requests=40, backend="compiled", action=action, **ROOM)
    first, _ = vector.reset(seed=0)
    if action == "per_kind":
        actions = np.ones((2, 2), dtype=np.int64)
        actions[1, 1] = 3
        with pytest.raises(ValueError, match="action 3 of env 1 \\(kind 1\\) is outside \\[0, 3\\)"):
            vector.step(actions)
        with pytest.raises(ValueError, match="need 2 x 2 integer actions .* got shape \\(2,\\)"):
            vector.step(np.array([1, 1]))
    else:
        with pytest.raises(ValueError, match="action 5 of env 0 is outside \\[0, 5\\)"):
            vector.step(np.array([5, 0]))
        with pytest.raises(ValueError, match="action -1 of env 1"):
            vector.step(np.array([[0], [-1]]))
    with pytest.raises(ValueError, match="of float64"):
        vector.step(np.zeros((2, 2) if action == "per_kind" else 2))
    np.testing.assert_array_equal(vector.pool.context, first["context"])  # nothing was stepped


@pytest.mark.parametrize(("field", "value", "message"), [
    ("window_s", 0.0, "window_s must be > 0"),
    ("reward", 3, "reward code 3 is not one the kernel computes"),
    ("kind_offsets", [0, 1], "kind_offsets must run from 0 to len\\(kind_configs\\)"),
    ("kind_offsets", [0, 0, 2], "a unit kind has no config"),
    ("kind_configs", [0, 2], "kind_configs names no config"),
    ("ctx_serving_units", [0], "per-kind fields need kinds positions"),
    ("gpu_inventory", [4], "a config's gpu_type is not in gpu_inventory"),
    ("kind_weights", [], "no unit kind"),
])
def test_the_kernel_refuses_a_spec_that_does_not_fit(field: str, value: Any, message: str) -> None:
    """The core checks the spec Python gives it (two kinds on ``default``) and names what is wrong."""
    spec = scaling_kernel_spec(gym.make(SCALING, backend="compiled").unwrapped)
    assert spec.kind_offsets == [0, 1, 2] and spec.kind_configs == [0, 1] and spec.window_s == 1.0
    _core.ScalingVectorEngine(spec, 1)
    setattr(spec, field, value)
    with pytest.raises(ValueError, match=message):
        _core.ScalingVectorEngine(spec, 1)


def test_adopting_what_the_engine_does_not_hold_raises_naming_it() -> None:
    """``CompiledCluster.adopt`` takes in only instances the engine already holds, and
    ``adopt_release`` only instances that hold GPUs."""
    env = gym.make(SCALING, backend="compiled", episode_requests=20, **ROOM).unwrapped
    env.reset(seed=0)
    cluster = env.cluster
    with pytest.raises(ValueError, match="the engine holds no instance 8 to adopt"):
        cluster.adopt(env.units[0].configs[0], 0.0)
    with pytest.raises(ValueError, match="instance 9 holds no GPUs to release"):
        cluster.adopt_release(9, 1.0)
    assert len(cluster.instances) == 8 and sum(cluster.gpus_in_use.values()) == 8
