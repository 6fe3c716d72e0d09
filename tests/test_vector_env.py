"""The native vector env of servegym/Routing-v0 (envs.vector, agents.vec_env; Tier-v0's in
test_tier_vector_env.py): env by env, the trajectories of single envs seeded alike, bit for bit,
whatever the threads; configurations the kernel does not cover and bad actions raise, naming them."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the IDs)
from envs.base import InvalidActionError
from envs.vector import NativeVectorEnv, NotCoveredError
from tests.vector_checks import (
    assert_same_metrics,
    assert_same_observation,
    assert_same_outcomes,
    assert_sb3_vec_env_matches_dummy,
)

STEP_INFO = ("time_s", "finished", "slo_met", "cost_usd", "invalid_action")
SMALL = {"episode_requests": 24, "backend": "compiled"}


def choose(rng: np.random.Generator, mask: np.ndarray) -> int:
    """A valid action or (half the time, when there is one) a masked-out one."""
    valid, invalid = np.flatnonzero(mask), np.flatnonzero(~mask)
    pool = invalid if invalid.size and rng.random() < 0.5 else valid
    return int(rng.choice(pool))


def replay(kwargs: dict, seed: int, num_envs: int, episodes: int, num_threads: int | None = None) -> dict[str, int]:
    """Step NativeVectorEnv and num_envs single envs (seeds seed ..) with the same actions until
    `episodes` episodes ended, asserting every step equal; returns what was exercised."""
    rng = np.random.default_rng(seed)
    singles = [gym.make("servegym/Routing-v0", **kwargs) for _ in range(num_envs)]
    vector = NativeVectorEnv(num_envs, num_threads=num_threads, **kwargs)
    obs, _ = vector.reset(seed=seed)
    single_obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(singles)]
    for i in range(num_envs):
        assert_same_observation({k: v[i] for k, v in obs.items()}, single_obs[i])
    seen = {"ended": 0, "invalid": 0, "steps": 0, "phase": 0, "rewarded": 0}
    while seen["ended"] < episodes:
        masks = vector.action_masks()
        actions = np.array([choose(rng, masks[i]) for i in range(num_envs)])
        obs, rewards, terminated, truncated, infos = vector.step(actions)
        seen["steps"] += 1
        for i, env in enumerate(singles):
            np.testing.assert_array_equal(masks[i], env.unwrapped.action_masks())
            s_obs, s_reward, s_terminated, s_truncated, s_info = env.step(int(actions[i]))
            assert rewards[i] == s_reward and type(s_reward) is float
            seen["rewarded"] += s_reward + s_info["invalid_action"] != 0.0  # more than the penalty (1.0)
            assert (terminated[i], truncated[i]) == (s_terminated, s_truncated)
            seen["invalid"] += s_info["invalid_action"]
            seen["phase"] += s_obs["context"][env.unwrapped.schema.context_positions("is_phase_change")[0]] == 1.0
            if s_truncated:
                seen["ended"] += 1
                final = infos["final_info"]
                assert_same_observation(infos["final_obs"][i], s_obs)
                for key in STEP_INFO:
                    assert final[key][i] == s_info[key], key
                metrics = final["episode_metrics"]  # gymnasium's dict of arrays, with its "_name" masks
                assert_same_metrics({k: v[i] for k, v in metrics.items() if not k.startswith("_")}, s_info["episode_metrics"])
                assert len(final["episode_outcomes"][i]) == len(s_info["episode_outcomes"]) == kwargs["episode_requests"]
                assert_same_outcomes(final["episode_outcomes"][i], s_info["episode_outcomes"])
                s_obs, s_info = env.reset()
            for key in STEP_INFO:
                assert infos[key][i] == s_info[key], key
            assert_same_observation({k: v[i] for k, v in obs.items()}, s_obs)
    vector.close()
    return seen


@pytest.mark.parametrize(("scenario", "slots"), [("default", 10), ("multitier", 6), ("pascal", 10), ("cauchy", 24)])
def test_one_env_gives_the_single_envs_trajectory(scenario: str, slots: int) -> None:
    """More slots than instances: masked-out actions (the fallback and its penalty) occur."""
    seen = replay({"scenario": scenario, "max_instances": slots, **SMALL}, seed=3, num_envs=1, episodes=2)
    assert seen["invalid"] > 0
    if scenario == "pascal":
        assert seen["phase"] > 0  # phase-change decisions (place_answering) too


def test_four_envs_give_four_single_envs_trajectories() -> None:
    replay({"scenario": "default", **SMALL}, seed=11, num_envs=4, episodes=6)


@pytest.mark.parametrize("reward", ["slo_dense", "slo_balance", "latency_dense", "latency_balance"])
@pytest.mark.parametrize(("scenario", "slots"), [("default", 10), ("pascal", 10)])
def test_dense_rewards_give_the_single_envs_rewards(reward: str, scenario: str, slots: int) -> None:
    kwargs = {"scenario": scenario, "max_instances": slots, "reward": reward, **SMALL, "episode_requests": 60,
              "rate_rps": 40.0}
    seen = replay(kwargs, seed=5, num_envs=2, episodes=2)
    assert seen["rewarded"] > 0


def test_threads_do_not_change_results() -> None:
    runs = []
    for threads in (1, 4):
        vector = NativeVectorEnv(4, num_threads=threads, scenario="default", **SMALL)
        assert vector.pool.core.num_threads == threads
        obs, _ = vector.reset(seed=7)
        rng = np.random.default_rng(0)
        trace = [obs["instances"]]
        for _ in range(80):
            masks = vector.action_masks()
            obs, rewards, _, truncated, _ = vector.step(np.array([choose(rng, m) for m in masks]))
            trace += [obs["instances"], obs["context"], obs["action_mask"], rewards, truncated]
        runs.append(trace)
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b, strict=True)


def test_sb3_vec_env_gives_dummy_vec_env_results() -> None:
    kwargs = {"scenario": "default", **SMALL}
    assert_sb3_vec_env_matches_dummy("servegym/Routing-v0", kwargs, STEP_INFO,
                                      lambda rng, masks: np.array([choose(rng, m) for m in masks]))


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"reward": "latency"}, "reward='latency'"),
    ({"reward": "cost"}, "reward='cost'"),
    ({"backend": "python"}, "backend='python'"),
    ({"render_mode": "ansi"}, "render_mode='ansi'"),
    ({"env_id": "servegym/Cascade-v0"}, "env_id 'servegym/Cascade-v0' \\(covered: servegym/Routing-v0, "
     "servegym/Tier-v0, servegym/Migration-v0, servegym/Scaling-v0\\)"),
    ({"scenario": "cauchy_autoscaling"}, "scenario type ComboScalingScenario"),
])
def test_configurations_not_covered_raise_naming_them(kwargs: dict, named: str) -> None:
    kwargs = {"scenario": "default", "episode_requests": 24, "backend": "compiled", **kwargs}
    with pytest.raises(NotCoveredError, match=f"does not cover {named}"):
        NativeVectorEnv(2, **kwargs)


def test_bad_actions_raise_naming_them() -> None:
    vector = NativeVectorEnv(2, scenario="default", **SMALL)
    vector.reset(seed=0)
    with pytest.raises(ValueError, match="action 8 of env 1 is outside Discrete\\(8\\)"):
        vector.step(np.array([0, 8]))
    with pytest.raises(ValueError, match="action -1 of env 0"):
        vector.step(np.array([-1, 0]))
    with pytest.raises(ValueError, match="need 2 integers .* got shape \\(3,\\)"):
        vector.step(np.array([0, 0, 0]))
    with pytest.raises(ValueError, match="got shape \\(2,\\) of float64"):
        vector.step(np.array([0.0, 1.0]))
    strict = NativeVectorEnv(1, scenario="default", max_instances=10, strict=True, **SMALL)
    first, _ = strict.reset(seed=0)
    masked = int(np.flatnonzero(~strict.action_masks()[0])[0])
    with pytest.raises(InvalidActionError, match=f"action {masked} of env 0 is masked out"):
        strict.step(np.array([masked]))
    np.testing.assert_array_equal(strict.pool.context[0], first["context"][0])  # nothing was stepped


def test_reward_not_covered_is_named_by_its_name() -> None:
    with pytest.raises(NotCoveredError, match="reward='ttft_dense' \\(covered: slo, slo_dense, slo_balance, "
                                              "latency_dense, latency_balance\\)"):
        NativeVectorEnv(1, scenario="default", reward="ttft_dense", **SMALL)


def test_an_observation_field_the_kernel_does_not_write_raises_naming_it(monkeypatch) -> None:
    import envs.observation as observation
    from envs.schema import IDENTITY, Field

    extra = Field("new_column", "flag", IDENTITY, "a column added to envs.observation")
    monkeypatch.setattr(observation, "INSTANCE_FIELDS", observation.INSTANCE_FIELDS + (extra,))
    with pytest.raises(NotCoveredError, match="instance field 'new_column' \\(the kernel writes 'tier_0' there\\)"):
        NativeVectorEnv(1, scenario="default", **SMALL)


def test_a_cluster_that_calls_python_raises_at_reset(monkeypatch) -> None:
    """The kernel steps engines without the GIL: a Python phase router there is refused."""
    from envs.routing import RoutingEnv

    monkeypatch.setattr(RoutingEnv, "cluster_options",
                        lambda self: {"router": None, "external_phase_decisions": True,
                                      "phase_router": lambda cluster, seq, instance: instance.instance_id})
    vector = NativeVectorEnv(1, scenario="pascal", **SMALL)
    with pytest.raises(NotCoveredError, match="a phase router in the cluster"):
        vector.reset(seed=0)
