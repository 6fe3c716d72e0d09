"""Prefix caching seen by the envs (the schema's cache columns, the routed request's cached
prefix per instance) and the cache-aware router baselines' rules, checked on hand-made loads."""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

import baselines
import envs  # noqa: F401  (registers the IDs)
from agents.rollout import run_episode
from envs.random_policy import random_masked_action

CACHE_COLUMNS = {"cache_occupancy", "prefix_hit_rate", "prefix_match_tokens"}


def instance_columns(env) -> set[str]:
    return {f.name for f in env.unwrapped.schema.instance_fields}


def test_only_scenarios_that_cache_observe_the_cache_and_only_routing_sees_the_match():
    # pascal's engine (vllm-0.6) does not cache prefixes; default's and mooncake's (vllm-v1) do
    assert not CACHE_COLUMNS & instance_columns(gym.make("servegym/Routing-v0", scenario="pascal"))
    assert CACHE_COLUMNS <= instance_columns(gym.make("servegym/Routing-v0", scenario="default"))
    assert CACHE_COLUMNS <= instance_columns(gym.make("servegym/Routing-v0", scenario="mooncake"))
    tier = instance_columns(gym.make("servegym/Tier-v0", scenario="mooncake"))
    assert {"cache_occupancy", "prefix_hit_rate"} <= tier and "prefix_match_tokens" not in tier


def test_routing_observes_each_instances_cached_prefix_of_the_arriving_request():
    # by hand from the Python engine's prefix caches (the compiled one replays its trajectories bit for bit)
    env = gym.make("servegym/Routing-v0", scenario="mooncake", episode_requests=300, backend="python")
    unwrapped = env.unwrapped
    observation, _ = env.reset(seed=3)
    rng = np.random.default_rng(0)
    checked = matched = 0
    for _ in range(250):
        view = unwrapped.schema.decode(observation)
        seq = unwrapped.routed_request()
        ids = unwrapped.slot_instance_ids()
        for slot, instance_id in enumerate(ids):
            cache = unwrapped.cluster.instances[instance_id].prefix_cache
            gpu, host, _ = cache.match(seq)
            expected = (gpu + host) * seq.block_tokens
            assert view.instances["prefix_match_tokens"][slot] == pytest.approx(expected, rel=1e-5, abs=1e-3)
            assert view.instances["cache_occupancy"][slot] == pytest.approx(
                cache.entry_blocks / cache.kv.total_blocks, abs=1e-6)
            rate = (cache.hit_tokens + cache.host_hit_tokens) / cache.query_tokens if cache.query_tokens else 0.0
            assert view.instances["prefix_hit_rate"][slot] == pytest.approx(rate, abs=1e-6)
            checked += 1
            matched += expected > 0
        mask = unwrapped.action_masks()
        observation, *_ = env.step(random_masked_action(env.action_space, mask, rng))
    assert checked == 250 * 8 and matched > 100  # requests found their prefixes somewhere


def view_of(prompt: float, **columns: list[float]) -> SimpleNamespace:
    """A decoded observation of a few instances (the columns the routers read)."""
    count = len(next(iter(columns.values())))
    defaults = {name: [0.0] * count for name in ("waiting", "running", "swapped", "kv_used_fraction",
                                                 "pending_prefill_tokens", "cache_occupancy", "prefix_match_tokens")}
    defaults["kv_capacity"] = [1e5] * count
    instances = {name: np.array(values, dtype=float) for name, values in {**defaults, **columns}.items()}
    return SimpleNamespace(instances=instances, context={"prompt_tokens": prompt})


@pytest.fixture(scope="module")
def env():
    return gym.make("servegym/Routing-v0", scenario="mooncake")


def test_sglang_follows_the_match_above_the_threshold_else_the_smallest_tree_else_balances(env):
    policy = baselines.make("sglang_cache_aware", env)
    valid = np.ones(3, dtype=bool)
    view = view_of(1000, prefix_match_tokens=[0, 400, 200], running=[5, 9, 1])
    assert policy.route(view, valid) == 1  # 0.4 > 0.3: longest match
    assert list(policy.tree_tokens[:3]) == [0, 600, 0]  # its tree grew by what it did not share
    view = view_of(1000, prefix_match_tokens=[0, 200, 100], running=[5, 9, 1])
    assert policy.route(view, valid) == 0  # 0.2 <= 0.3: smallest tree (0 and 2 tie at 0: the lower)
    view = view_of(1000, prefix_match_tokens=[0, 900, 0], running=[0, 70, 3])
    assert policy.route(view, valid) == 0  # 70 - 0 > 64 and 70 > 1.5 x 0: least loaded
    policy.reset()
    assert not policy.tree_tokens.any()


def test_dynamo_minimises_uncached_prompt_plus_active_blocks(env):
    policy = baselines.make("dynamo_kv", env)
    valid = np.ones(2, dtype=bool)
    # instance 0: 800 cached, 60,000 tokens active; instance 1: nothing cached, 50,000 active
    view = view_of(1000, prefix_match_tokens=[800, 0], kv_used_fraction=[0.6, 0.5])
    assert policy.route(view, valid) == 1  # (200 + 60,000 + 1000) > (1000 + 50,000 + 1000)
    heavy = baselines.make("dynamo_kv", env, kv_overlap_score_weight=20.0)
    view = view_of(1000, prefix_match_tokens=[800, 0], kv_used_fraction=[0.1, 0.08])
    assert heavy.route(view, valid) == 0  # 20 x 200 + 10,000 + 1000 < 20 x 1000 + 8,000 + 1000


def test_llmd_sums_weighted_prefix_queue_and_kv_scores(env):
    policy = baselines.make("llmd_scorers", env)
    valid = np.ones(3, dtype=bool)
    view = view_of(1000, prefix_match_tokens=[1000, 0, 500], waiting=[4, 0, 2], kv_used_fraction=[0.5, 0.5, 0.0])
    # scores: 3 x (1, 0, 0.5) + 2 x (0, 1, 0.5) + 2 x (0.5, 0.5, 1) = (4, 3, 4.5)
    assert policy.route(view, valid) == 2
    assert policy.route(view, np.array([True, True, False])) == 0  # the queue score spans the candidates only


def test_production_stack_picks_among_the_longest_matches_at_random(env):
    policy = baselines.make("production_stack_prefix", env, seed=5)
    valid = np.ones(4, dtype=bool)
    view = view_of(1000, prefix_match_tokens=[512, 0, 512, 100], running=[50, 0, 0, 0])
    picks = {policy.route(view, valid) for _ in range(40)}
    assert picks == {0, 2}  # load plays no part
    view = view_of(1000, prefix_match_tokens=[0, 0, 0, 0])
    assert {policy.route(view, valid) for _ in range(60)} == {0, 1, 2, 3}


def test_cache_aware_policies_refuse_scenarios_without_prefix_caching():
    pascal = gym.make("servegym/Routing-v0", scenario="pascal")  # vllm-0.6: no prefix caching
    for name in ("sglang_cache_aware", "dynamo_kv", "llmd_scorers", "production_stack_prefix"):
        with pytest.raises(ValueError, match="reads prefix_match_tokens, which scenario 'pascal' does not observe"):
            baselines.make(name, pascal)


def test_a_cache_aware_router_finds_more_of_the_reusable_prefixes_than_least_loaded():
    env = gym.make("servegym/Routing-v0", scenario="mooncake", episode_requests=600)
    hits = {name: run_episode(env, baselines.make(name, env), seed=11)["prefix_cache_hit_rate"]
            for name in ("least_outstanding", "sglang_cache_aware")}
    assert hits["sglang_cache_aware"] > 1.5 * hits["least_outstanding"]
