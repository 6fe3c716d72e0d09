"""The native vector env of servegym/Migration-v0 (envs.migration_vector through envs.vector and
agents.vec_env), mode="periodic": env by env, the trajectories of single envs seeded alike, bit
for bit (float32 observations and masks, float64 rewards, step infos with the migration counters,
episode metrics), whatever the threads, with actions that include masked-out and refused pairs (the
fallback and its penalty) and live migrations of running requests; configurations the kernel does
not cover and bad actions raise, naming them."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the IDs)
from envs.native_pool import NotCoveredError
from envs.scenario import InstanceGroup, Scenario
from envs.scenarios.multitier import PAPER_KV_BLOCKS, multitier
from envs.vector import NativeVectorEnv
from simulator.kv_blocks import blocks_for_tokens
from tests.vector_checks import (
    assert_same_metrics,
    assert_same_observation,
    assert_same_outcomes,
    assert_sb3_vec_env_matches_dummy,
)

MIGRATION = "servegym/Migration-v0"
STEP_INFO = ("time_s", "finished", "slo_met", "cost_usd", "invalid_action", "migrations_started", "migrations_done",
             "migrations_aborted")
SMALL = {"episode_requests": 60, "backend": "compiled", "invalid_action_penalty": 0.25}


def random_actions(rng: np.random.Generator, masks: np.ndarray) -> np.ndarray:
    """Per env: half the time a pair the mask allows (a no-op, or a source and a destination,
    which may still be refused: the same instance, no KV room), else any pair in the space."""
    slots = masks.shape[1] // 2
    actions = rng.integers(0, slots, size=(len(masks), 2))
    for i, mask in enumerate(masks):
        if rng.random() < 0.5:
            actions[i] = rng.choice(np.flatnonzero(mask[:slots])), rng.choice(np.flatnonzero(mask[slots:]))
    return actions


def count_kv_refusals(env: gym.Env, seen: dict[str, int]) -> None:
    """Count, in `seen`, the pairs the single env refuses for KV: no room now for a running
    request's blocks, or a request over the destination's capacity whose KV would fit there now
    (so only the capacity check refuses it)."""
    refusal = env._refusal

    def counted(seq, source, target):
        reason = refusal(seq, source, target)
        seen["no_kv_room"] += reason is not None and "has no room" in reason
        fits_now = target.kv.can_admit(blocks_for_tokens(seq.kv_tokens + 1, target.kv.block_size))
        seen["over_kv_capacity"] += reason is not None and "KV capacity" in reason and fits_now
        return reason

    env._refusal = counted


def replay(kwargs: dict, seed: int, num_envs: int, episodes: int, num_threads: int | None = None) -> dict[str, int]:
    """Step NativeVectorEnv and num_envs single envs (seeds seed ..) with the same random actions
    until `episodes` episodes ended, asserting every step equal; returns what was exercised."""
    rng = np.random.default_rng(seed)
    singles = [gym.make(MIGRATION, **kwargs) for _ in range(num_envs)]
    vector = NativeVectorEnv(num_envs, env_id=MIGRATION, num_threads=num_threads, **kwargs)
    obs, _ = vector.reset(seed=seed)
    for i, env in enumerate(singles):
        assert_same_observation({k: v[i] for k, v in obs.items()}, env.reset(seed=seed + i)[0])
    seen = {"ended": 0, "steps": 0, "rewarded": 0, "finished": 0, "invalid": 0, "started": 0, "live": 0, "queued": 0,
            "refused": 0, "no_kv_room": 0, "over_kv_capacity": 0}
    for env in singles:
        count_kv_refusals(env.unwrapped, seen)
    while seen["ended"] < episodes:
        actions = random_actions(rng, obs["action_mask"])
        obs, rewards, terminated, truncated, infos = vector.step(actions)
        seen["steps"] += 1
        for i, env in enumerate(singles):
            source, destination = actions[i]
            table = env.unwrapped.observed_candidates()
            allowed = env.unwrapped.action_masks()
            moved = source < len(table) and destination < len(table)  # neither is the no-op
            s_obs, s_reward, s_terminated, s_truncated, s_info = env.step(actions[i])
            assert rewards[i] == s_reward and np.signbit(rewards[i]) == np.signbit(s_reward)
            seen["rewarded"] += s_reward != 0.0
            seen["finished"] += s_info["finished"]
            seen["invalid"] += s_info["invalid_action"]
            if moved and not s_info["invalid_action"]:
                seen["live" if table[source, 0] == 0 else "queued"] += 1
            seen["refused"] += bool(moved and allowed[source] and allowed[len(table) + 1 + destination]
                                    and s_info["invalid_action"])
            assert (terminated[i], truncated[i]) == (s_terminated, s_truncated)
            if s_truncated:
                seen["ended"] += 1
                seen["started"] += s_info["migrations_started"]
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


@pytest.mark.parametrize(("scenario", "router", "reward"), [
    ("default", "round_robin", "slo"),
    ("default", "least_loaded", "latency"),
    ("multitier", "llumnix", "slo"),
    ("multitier", "round_robin", "latency"),
])
def test_one_env_gives_the_single_envs_trajectory(scenario: str, router: str, reward: str) -> None:
    kwargs = {"scenario": scenario, "router": router, "reward": reward, **SMALL}
    seen = replay(kwargs, seed=3, num_envs=1, episodes=2)
    assert seen["rewarded"] > 0 and seen["finished"] == 2 * SMALL["episode_requests"]
    assert seen["invalid"] > 0 and seen["refused"] > 0 and seen["live"] > 0


def test_queued_and_live_migrations_and_refused_pairs_match() -> None:
    """A longer multitier episode: queued requests move at once, running ones live (their stages
    run inside the kernel), and pairs the mask allows are refused (the same instance, no KV room)."""
    kwargs = {"scenario": "multitier", "router": "llumnix", **SMALL, "episode_requests": 300}
    seen = replay(kwargs, seed=5, num_envs=1, episodes=1)
    assert seen["queued"] > 0 and seen["live"] > 0 and seen["refused"] > 0


def small_and_large_kv_pools() -> Scenario:
    """multitier with the paper's 128-block KV pool (2,048 tokens) on two replicas and a 64-block
    one (1,024 tokens) on the other two: under LongWriter's long outputs (1,330 tokens on
    average) destinations run out of room for a running request's KV, and requests that grew on
    a large pool are over a small one's capacity while their KV so far would fit it."""
    scenario = multitier(kv_blocks=PAPER_KV_BLOCKS)
    large = scenario.instances[0].config
    small = dataclasses.replace(large, kv_blocks=64)
    return dataclasses.replace(scenario, instances=(InstanceGroup(config=large, count=2),
                                                    InstanceGroup(config=small, count=2)))


def test_kv_refusals_match() -> None:
    """A pair the mask allows but the destination's KV refuses (no room for the running
    request's blocks now, or the request over its capacity) falls back alike in the kernel."""
    kwargs = {"scenario": small_and_large_kv_pools(), "router": "llumnix", **SMALL, "rate_rps": 5.0,
              "lengths": "longwriter"}
    seen = replay(kwargs, seed=0, num_envs=1, episodes=1)
    assert seen["no_kv_room"] > 0 and seen["over_kv_capacity"] > 0


def test_three_envs_on_two_threads() -> None:
    kwargs = {"scenario": "multitier", "router": "llumnix", **SMALL}
    seen = replay(kwargs, seed=11, num_envs=3, episodes=4, num_threads=2)
    assert seen["invalid"] > 0 and seen["started"] > 0


def test_sb3_vec_env_gives_dummy_vec_env_results() -> None:
    kwargs = {"scenario": "multitier", "router": "llumnix", **SMALL}
    assert_sb3_vec_env_matches_dummy(MIGRATION, kwargs, STEP_INFO, random_actions)


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"scenario": "pascal", "mode": "phase"}, "mode='phase'"),
    ({"strict": True}, "strict=True"),
    ({"reward": "cost"}, "reward='cost' \\(covered: slo, latency\\)"),
    ({"backend": "python"}, "backend='python'"),
    ({"render_mode": "ansi"}, "render_mode='ansi'"),
])
def test_configurations_not_covered_raise_naming_them(kwargs: dict, named: str) -> None:
    kwargs = {"scenario": "default", "episode_requests": 24, "backend": "compiled", **kwargs}
    with pytest.raises(NotCoveredError, match=f"does not cover {named}"):
        NativeVectorEnv(2, env_id=MIGRATION, **kwargs)


def test_bad_actions_raise_naming_them_before_any_env_steps() -> None:
    vector = NativeVectorEnv(2, env_id=MIGRATION, scenario="multitier", **SMALL)
    first, _ = vector.reset(seed=0)
    slots = vector.single_action_space.nvec[0]
    actions = np.zeros((2, 2), dtype=np.int64)
    actions[1, 1] = slots
    with pytest.raises(ValueError, match=f"destination slot {slots} of env 1 is outside \\[0, {slots - 1}\\]"):
        vector.step(actions)
    actions[1, 1] = -1
    with pytest.raises(ValueError, match="destination slot -1 of env 1"):
        vector.step(actions)
    with pytest.raises(ValueError, match="need 2 \\(source, destination\\) integer pairs .* got shape \\(2,\\)"):
        vector.step(np.array([0, 0]))
    with pytest.raises(ValueError, match="of float64"):
        vector.step(np.zeros((2, 2)))
    np.testing.assert_array_equal(vector.pool.context, first["context"])  # nothing was stepped
