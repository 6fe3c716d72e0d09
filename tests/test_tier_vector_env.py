"""The native vector env of servegym/Tier-v0 (envs.tier_vector through envs.vector and
agents.vec_env): env by env, the trajectories of single envs seeded alike, bit for bit (float32
observations, float64 rewards, step infos with the budgets in force, episode metrics), whatever
the threads; configurations the kernel does not cover and bad levels raise, naming them."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the IDs)
from envs.native_pool import NotCoveredError
from envs.vector import NativeVectorEnv
from tests.vector_checks import (
    assert_same_metrics,
    assert_same_observation,
    assert_same_outcomes,
    assert_sb3_vec_env_matches_dummy,
)

TIER = "servegym/Tier-v0"
STEP_INFO = ("time_s", "finished", "slo_met", "cost_usd", "invalid_action", "headroom_fractions")
SMALL = {"episode_requests": 60, "backend": "compiled"}


def replay(kwargs: dict, seed: int, num_envs: int, episodes: int, num_threads: int | None = None) -> dict[str, int]:
    """Step NativeVectorEnv and num_envs single envs (seeds seed ..) with the same random levels
    until `episodes` episodes ended, asserting every step equal; returns what was exercised."""
    rng = np.random.default_rng(seed)
    singles = [gym.make(TIER, **kwargs) for _ in range(num_envs)]
    vector = NativeVectorEnv(num_envs, env_id=TIER, num_threads=num_threads, **kwargs)
    obs, _ = vector.reset(seed=seed)
    for i, env in enumerate(singles):
        assert_same_observation({k: v[i] for k, v in obs.items()}, env.reset(seed=seed + i)[0])
    seen = {"ended": 0, "steps": 0, "rewarded": 0, "finished": 0, "rejected": 0}
    while seen["ended"] < episodes:
        actions = rng.integers(0, 5, size=vector.action_space.shape)
        obs, rewards, terminated, truncated, infos = vector.step(actions)
        seen["steps"] += 1
        for i, env in enumerate(singles):
            s_obs, s_reward, s_terminated, s_truncated, s_info = env.step(actions[i])
            assert rewards[i] == s_reward and np.signbit(rewards[i]) == np.signbit(s_reward)
            seen["rewarded"] += s_reward != 0.0
            seen["finished"] += s_info["finished"]
            assert (terminated[i], truncated[i]) == (s_terminated, s_truncated)
            if s_truncated:
                seen["ended"] += 1
                seen["rejected"] += s_info["episode_metrics"]["rejected"]
                final = infos["final_info"]
                assert_same_observation(infos["final_obs"][i], s_obs)
                for key in STEP_INFO:
                    assert np.array_equal(final[key][i], s_info[key]), key
                metrics = final["episode_metrics"]
                assert_same_metrics({k: v[i] for k, v in metrics.items() if not k.startswith("_")}, s_info["episode_metrics"])
                assert len(final["episode_outcomes"][i]) == len(s_info["episode_outcomes"]) == kwargs["episode_requests"]
                assert_same_outcomes(final["episode_outcomes"][i], s_info["episode_outcomes"])
                s_obs, s_info = env.reset()
            for key in STEP_INFO:
                assert np.array_equal(infos[key][i], s_info[key]), key
            assert_same_observation({k: v[i] for k, v in obs.items()}, s_obs)
    vector.close()
    return seen


@pytest.mark.parametrize("reward", ["slo", "latency"])
@pytest.mark.parametrize("scenario", ["multitier", "default", "pascal"])
def test_one_env_gives_the_single_envs_trajectory(scenario: str, reward: str) -> None:
    seen = replay({"scenario": scenario, "reward": reward, **SMALL}, seed=3, num_envs=1, episodes=2)
    assert seen["rewarded"] > 0 and seen["finished"] == 2 * SMALL["episode_requests"]


@pytest.mark.parametrize("reward", ["slo", "latency"])
def test_rejected_requests_count_as_finished_not_completed(reward: str) -> None:
    """Azure's code prompts on multitier's model: some exceed its context and are rejected at
    arrival, so a tier's finished and completed counts (attainment, mean TTFT) differ; at 40 req/s
    (not multitier's burst) some intervals have both rejections and completions of one tier."""
    kwargs = {"scenario": "multitier", "lengths": "azure_code", "rate_rps": 40.0, "reward": reward, **SMALL,
              "episode_requests": 150}
    seen = replay(kwargs, seed=3, num_envs=1, episodes=1)
    assert 0 < seen["rejected"] < seen["finished"]


def test_several_tiers_by_override_and_three_envs_on_two_threads() -> None:
    kwargs = {"scenario": "default", "num_tiers": 3, "priorities": "uniform", "tier_weights": (4, 2, 1), **SMALL}
    seen = replay(kwargs, seed=11, num_envs=3, episodes=5, num_threads=2)
    assert seen["rewarded"] > 0


def test_threads_do_not_change_results() -> None:
    runs = []
    for threads in (1, 3):
        vector = NativeVectorEnv(3, env_id=TIER, num_threads=threads, scenario="multitier", **SMALL)
        assert vector.pool.core.num_threads == threads
        obs, _ = vector.reset(seed=7)
        rng = np.random.default_rng(0)
        trace = [obs["instances"], obs["context"]]
        for _ in range(60):
            obs, rewards, _, truncated, infos = vector.step(rng.integers(0, 5, size=vector.action_space.shape))
            trace += [obs["instances"], obs["context"], rewards, truncated, infos["headroom_fractions"]]
        runs.append(trace)
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b, strict=True)


def test_sb3_vec_env_gives_dummy_vec_env_results() -> None:
    kwargs = {"scenario": "multitier", **SMALL}
    tiers = gym.make(TIER, **kwargs).action_space.shape[0]
    assert_sb3_vec_env_matches_dummy(TIER, kwargs, STEP_INFO, lambda rng, masks: rng.integers(0, 5, size=(2, tiers)))


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"continuous": True}, "continuous=True"),
    ({"reward": "cost"}, "reward='cost' \\(covered: slo, latency\\)"),
    ({"backend": "python"}, "backend='python'"),
    ({"render_mode": "ansi"}, "render_mode='ansi'"),
    ({"scenario": "cauchy_autoscaling"}, "scenario type ComboScalingScenario"),
])
def test_configurations_not_covered_raise_naming_them(kwargs: dict, named: str) -> None:
    kwargs = {"scenario": "default", "episode_requests": 24, "backend": "compiled", **kwargs}
    with pytest.raises(NotCoveredError, match=f"does not cover {named}"):
        NativeVectorEnv(2, env_id=TIER, **kwargs)


def test_bad_levels_raise_naming_them_before_any_env_steps() -> None:
    vector = NativeVectorEnv(2, env_id=TIER, scenario="multitier", **SMALL)
    first, _ = vector.reset(seed=0)
    tiers = vector.single_action_space.shape[0]
    levels = np.zeros((2, tiers), dtype=np.int64)
    levels[1, tiers - 1] = 5
    with pytest.raises(ValueError, match=f"level 5 of env 1 tier {tiers - 1} is outside \\[0, 5\\)"):
        vector.step(levels)
    with pytest.raises(ValueError, match=f"need 2 x {tiers} integer levels .* got shape \\(2,\\)"):
        vector.step(np.array([0, 0]))
    with pytest.raises(ValueError, match="of float64"):
        vector.step(np.zeros((2, tiers)))
    np.testing.assert_array_equal(vector.pool.context, first["context"])  # nothing was stepped
