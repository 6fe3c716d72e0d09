"""Llumnix baselines: K-tier headroom (eq. 3), freeness dispatch (§3.4), ΔF migration (§3.5),
F_normal auto-scaling (§3.6) and their public-Llumnix variants, on hand-built observations and
short episodes."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

import baselines
import envs  # noqa: F401  (registers the IDs)
from agents.rollout import evaluate, run_episode
from baselines.llumnix import freeness_from_features, nearest_levels
from baselines.llumnix_migration import rebalance_pair
from baselines.llumnix_scaling import band_decision
from envs.observation import FREENESS_SCALE, signed_squash
from envs.scaling import ADD, HOLD, REMOVE
from simulator.headroom import freeness_full, freeness_normal

TIER, ROUTING, MIGRATION, SCALING = (f"servegym/{n}-v0" for n in ("Tier", "Routing", "Migration", "Scaling"))
SHORT = {"scenario": "multitier", "episode_requests": 300}
SCALING_ROOM = {"scenario": "default", "episode_requests": 150, "scaling_window_s": 2.0,
                "gpu_inventory": {"A100-80GB": 5, "L40S": 5}, "max_instances": 10}


def encoded(env: gym.Env, instances: dict, context: dict | None = None, mask=None) -> dict[str, np.ndarray]:
    """An observation from raw values by name (per slot, padded with 0), through the env's schema."""
    schema = env.unwrapped.schema
    padded = {name: np.pad(np.asarray(v, dtype=float), (0, schema.max_instances - len(v))) for name, v in instances.items()}
    return schema.encode(padded, context, None if mask is None else np.asarray(mask, dtype=np.float32))


# ----------------------------------------------------------------------------- headroom
def test_k4_headroom_is_eq3_and_the_tier_actions_map_to_it():
    expected = 0.2 * np.exp(-np.arange(4))  # λ = 3 / (K − 1) = 1 at K = 4 (Fig. 3)
    assert expected.tolist() == pytest.approx([0.2, 0.0735759, 0.0270671, 0.0099574], rel=1e-5)
    assert expected.sum() == pytest.approx(0.311, abs=5e-4)  # "total headroom 31.1% of M"
    continuous = gym.make(TIER, scenario="multitier", continuous=True)
    action, _ = baselines.make("llumnix", continuous).predict(continuous.reset(seed=0)[0])
    assert continuous.unwrapped.action_to_fractions(action) == pytest.approx(expected, rel=1e-6)
    discrete = gym.make(TIER, scenario="multitier")
    obs, _ = discrete.reset(seed=0)
    for name, levels, fractions in (
        ("llumnix", [2, 1, 0, 0], [0.2, 0.1, 0.0, 0.0]),  # 0.2 / 0.0736 / 0.0271 / 0.0100 to the 0.1 grid
        ("llumnix_binary", [2, 0, 0, 0], [0.2, 0.0, 0.0, 0.0]),
        ("no_priority", [0, 0, 0, 0], [0.0, 0.0, 0.0, 0.0]),
    ):
        action, _ = baselines.make(name, discrete).predict(obs)
        assert action.tolist() == levels
        assert discrete.unwrapped.action_to_fractions(action) == pytest.approx(fractions)
        _, _, _, _, info = discrete.step(action)
        assert info["headroom_fractions"] == pytest.approx(fractions) and not info["invalid_action"]


def test_nearest_levels_rejects_budgets_outside_the_tier_env_range():
    assert nearest_levels(np.array([0.04, 0.06, 0.4])).tolist() == [0, 1, 4]
    with pytest.raises(ValueError, match="0.5"):
        nearest_levels(np.array([0.1, 0.5]))


# ----------------------------------------------------------------------------- dispatch
def dispatch_observation(env: gym.Env) -> dict[str, np.ndarray]:
    """Four slots: F_normal 50 / 40 / 44 / (idle), M/B 100 / 100 / 200 / -, tiers {0} / {3} / {1} / {}."""
    return encoded(
        env,
        {"freeness_normal": [50.0, 40.0, 44.0, math.inf], "kv_blocks_per_request": [100.0, 100.0, 200.0, math.inf],
         "tier_0": [1, 0, 0, 0], "tier_3": [0, 1, 0, 0], "tier_1": [0, 0, 1, 0]},
        {"is_arrival": True},
        mask=[1, 1, 1, 0],  # slot 3 (idle) not routable, e.g. still starting
    )


def test_dispatch_picks_the_highest_freeness_under_each_headroom_schedule():
    env = gym.make(ROUTING, scenario="multitier")
    obs = dispatch_observation(env)
    # no headroom: F = 50, 40, 44; binary (tier 0 charges 0.2 M): 50 - 20 = 30, 40, 44;
    # K-tier eq. 3: 30, 40 - 100 * 0.00996 = 39.0, 44 - 200 * 0.0736 = 29.3
    expected = {"no_priority": 0, "llumnix_binary": 2, "llumnix": 1}
    for name, slot in expected.items():
        policy = baselines.make(name, env)
        assert policy.predict(obs)[0] == slot, name
    llumnix = baselines.make("llumnix", env)
    freeness = llumnix.freeness(llumnix.decode(obs))
    assert freeness[:3] == pytest.approx([30.0, 40.0 - 100 * 0.2 * math.exp(-3), 44.0 - 200 * 0.2 * math.exp(-1)], rel=1e-5)
    assert freeness[3] == math.inf  # idle: infinitely free, whatever the budgets
    obs["action_mask"][:] = [1, 0, 1, 1]
    assert baselines.make("llumnix", env).predict(obs)[0] == 3  # the idle instance wins once routable
    obs["action_mask"][:] = [1, 0, 1, 0]
    assert baselines.make("llumnix", env).predict(obs)[0] == 0  # 30 > 29.3 among the valid slots


def test_freeness_from_features_keeps_infinite_freeness():
    values = freeness_from_features(
        np.array([10.0, math.inf, -math.inf]), np.array([5.0, math.inf, 5.0]),
        np.array([[True, True], [True, False], [True, True]]), np.array([0.2, 0.1]),
    )
    assert values.tolist() == [10.0 - 5.0 * 0.3, math.inf, -math.inf]


def test_observation_freeness_features_match_envs_headroom_and_routing_matches_the_env_rule():
    routed = gym.make(ROUTING, **SHORT)
    policy = baselines.make("llumnix", routed)
    obs, _ = routed.reset(seed=3)
    cluster = routed.unwrapped.cluster
    headroom = routed.unwrapped.features.default_headroom
    schema = routed.unwrapped.schema
    checked = 0
    for _ in range(200):
        for slot, instance in enumerate(cluster.instances.values()):
            row = obs["instances"][slot]
            full = signed_squash(freeness_full(instance, headroom), FREENESS_SCALE)
            assert row[schema.instance_column("freeness_full")] == pytest.approx(full, abs=1e-6)
            normal = signed_squash(freeness_normal(instance), FREENESS_SCALE)
            assert row[schema.instance_column("freeness_normal")] == pytest.approx(normal, abs=1e-6)
            checked += math.isfinite(freeness_full(instance, headroom))
        obs, *_ = routed.step(policy.predict(obs)[0])
    assert checked > 100  # busy instances, not only idle ones, were compared
    # the same arrivals under Migration-v0's in-env Llumnix router (envs.tier.freest_instance)
    # and under the observation-reading policy land on the same instances
    in_env = gym.make(MIGRATION, router="llumnix", **SHORT)
    noop = np.array([4, 4])
    run_episode(in_env, type("Noop", (), {"predict": lambda self, o, **k: (noop, None)})(), seed=3)
    run_episode(routed, policy, seed=3)
    placed = {o.request_id: o.instance_id for o in routed.unwrapped.cluster.outcomes}
    assert placed == {o.request_id: o.instance_id for o in in_env.unwrapped.cluster.outcomes}
    assert len(set(placed.values())) == 4


# ----------------------------------------------------------------------------- migration
def test_rebalance_pair_needs_a_gap_of_theta():
    everyone = np.ones(3, dtype=bool)
    assert rebalance_pair(np.array([0.0, 0.3, 0.1]), everyone, everyone, 0.3) == (0, 1)  # ΔF = 0.3 exactly
    assert rebalance_pair(np.array([0.0, 0.2999, 0.1]), everyone, everyone, 0.3) is None
    assert rebalance_pair(np.array([5.0, math.inf, 2.0]), everyone, everyone, 0.3) == (2, 1)  # idle destination
    assert rebalance_pair(np.array([math.inf, math.inf]), np.ones(2, bool), np.ones(2, bool), 0.3) is None
    assert rebalance_pair(np.array([-math.inf, 7.0, 9.0]), everyone, everyone, 0.3) == (0, 2)  # draining source
    only_first = np.array([True, False, False])
    assert rebalance_pair(np.array([8.0, 1.0, 9.0]), only_first, everyone, 0.3) == (0, 2)  # slot 1 has nothing to give
    assert rebalance_pair(np.array([8.0, 1.0, 9.0]), everyone, np.zeros(3, bool), 0.3) is None


def migration_observation(env: gym.Env, freeness: list[float], running_kv_tokens: float | None = None) -> dict[str, np.ndarray]:
    """Four serving slots with a queued candidate each (or, with ``running_kv_tokens``, a running
    one of that KV size on every slot), KV 90% used on slot 3 and 10% on the others."""
    n = 4
    queued = running_kv_tokens is None
    return encoded(
        env,
        {"serving": [1.0] * n, "freeness_full": freeness, "kv_capacity": [100_000.0] * n,
         "kv_used_fraction": [0.1, 0.1, 0.1, 0.9]},
        {"has_queued_candidate": [queued] * n, "has_running_candidate": [not queued] * n,
         "candidate_kv_tokens": [200.0 if queued else running_kv_tokens] * n},
    )


def test_llumnix_migration_pairs_least_free_with_freest_and_checks_room():
    env = gym.make(MIGRATION, scenario="multitier")
    policy = baselines.make("llumnix_migration", env)
    obs = migration_observation(env, [12.0, 3.0, 6.0, 20.0])
    assert policy.predict(obs)[0].tolist() == [1, 3]
    obs = migration_observation(env, [3.1, 3.0, 3.2, 3.25])  # ΔF = 0.25 < 0.3
    assert policy.predict(obs)[0].tolist() == [4, 4]
    # a running candidate of 20,000 tokens: slot 3 has 10,000 free tokens, the others 90,000
    obs = migration_observation(env, [12.0, 3.0, 6.0, 20.0], running_kv_tokens=20_000.0)
    assert policy.predict(obs)[0].tolist() == [1, 0]
    obs["action_mask"][1] = 0.0  # slot 1 has nothing to give: the next least free source
    assert policy.predict(obs)[0].tolist() == [2, 0]


def test_public_migration_moves_from_below_three_to_above_three_blocks_per_request():
    env = gym.make(MIGRATION, scenario="multitier")
    policy = baselines.make("llumnix_migration_public", env)
    schema = env.unwrapped.schema

    def observation(freeness_normal: list[float]) -> dict[str, np.ndarray]:
        obs = migration_observation(env, [0.0] * 4)
        # migration freeness = F_normal - 1% of M / B: with M / B = 100, 1 block per request less
        raw = {"kv_blocks_per_request": [100.0] * 4, "freeness_normal": freeness_normal}
        for name, values in raw.items():
            obs["instances"][:4, schema.instance_column(name)] = schema.instance_field(name).encoding.encode(values)
        return obs

    obs = observation([3.5, 2.0, 4.5, 10.0])
    assert policy.predict(obs)[0].tolist() == [1, 3]  # 2.5 and 1.0 are below 3: the least free, 1.0, to 9.0
    obs["action_mask"][1] = 0.0
    assert policy.predict(obs)[0].tolist() == [0, 3]  # slot 1 has nothing to give: 2.5 is next
    assert policy.predict(observation([4.5, 4.2, 4.5, 10.0]))[0].tolist() == [4, 4]  # nobody below 3 blocks per request


# ----------------------------------------------------------------------------- scaling
def test_band_decision_holds_on_the_edges():
    assert band_decision(-0.5, -0.5, 1.5) == HOLD
    assert band_decision(np.nextafter(-0.5, -1.0), -0.5, 1.5) == ADD
    assert band_decision(1.5, -0.5, 1.5) == HOLD
    assert band_decision(np.nextafter(1.5, 2.0), -0.5, 1.5) == REMOVE
    assert band_decision(math.inf, -0.5, 1.5) == REMOVE
    with pytest.raises(ValueError, match="NaN"):
        band_decision(math.nan, -0.5, 1.5)


def scaling_observation(env: gym.Env, name: str, values: list[float]) -> dict[str, np.ndarray]:
    return encoded(env, {"serving": [1.0] * len(values), name: values})


def test_scaling_averages_the_serving_instances_and_respects_the_mask():
    env = gym.make(SCALING, **SCALING_ROOM)  # two kinds: A100, then L40S
    paper = baselines.make("llumnix_scaling", env)
    assert paper.predict(scaling_observation(env, "freeness_normal", [-1.0, -0.2]))[0].tolist() == [ADD, HOLD]  # mean -0.6
    assert paper.predict(scaling_observation(env, "freeness_normal", [-1.0, 0.2]))[0].tolist() == [HOLD, HOLD]  # -0.4
    assert paper.predict(scaling_observation(env, "freeness_normal", [1.0, 2.2]))[0].tolist() == [HOLD, REMOVE]  # 1.6
    obs = scaling_observation(env, "freeness_normal", [-1.0, -0.2])
    obs["action_mask"][ADD] = 0.0  # no A100 left: add an L40S instance
    assert paper.predict(obs)[0].tolist() == [HOLD, ADD]
    obs["action_mask"][3 + ADD] = 0.0
    assert paper.predict(obs)[0].tolist() == [HOLD, HOLD]
    public = baselines.make("llumnix_scaling_public", env)
    assert public.predict(scaling_observation(env, "freeness", [5.0, 12.0]))[0].tolist() == [ADD, HOLD]  # 8.5 < 10
    assert public.predict(scaling_observation(env, "freeness", [50.0, 80.0]))[0].tolist() == [HOLD, REMOVE]  # 65 > 60
    assert public.predict(scaling_observation(env, "freeness", [10.0, 60.0]))[0].tolist() == [HOLD, HOLD]


# ----------------------------------------------------------------------------- episodes
@pytest.mark.parametrize(
    ("name", "env_id", "options"),
    [
        ("llumnix", TIER, SHORT),
        ("llumnix", ROUTING, SHORT),
        ("llumnix_binary", TIER, {**SHORT, "continuous": True}),
        ("llumnix_binary", ROUTING, SHORT),
        ("no_priority", ROUTING, SHORT),
        ("llumnix_migration", MIGRATION, {**SHORT, "router": "llumnix"}),
        ("llumnix_migration_public", MIGRATION, {**SHORT, "router": "llumnix"}),
        ("llumnix_scaling", SCALING, SCALING_ROOM),
        ("llumnix_scaling_public", SCALING, SCALING_ROOM),
    ],
)
def test_each_policy_runs_an_episode_without_invalid_actions(name, env_id, options):
    (metrics,) = evaluate(name, env_id, [0], **options)
    assert metrics["invalid_actions"] == 0
    assert metrics["completed"] + metrics["rejected"] == options["episode_requests"]
    if name == "llumnix_migration":
        assert metrics["migrations"] > 0  # a 1,250 req/s burst unbalances freeness


def test_bad_options_and_envs_are_refused():
    migration = gym.make(MIGRATION, scenario="multitier")
    with pytest.raises(ValueError, match="-1"):
        baselines.make("llumnix_migration", migration, gap_blocks=-1.0)
    with pytest.raises(ValueError, match="nan"):
        baselines.make("llumnix_migration_public", migration, threshold_blocks=math.nan)
    with pytest.raises(ValueError, match="Migration-v0"):
        baselines.make("llumnix", migration)
    scaling = gym.make(SCALING, **SCALING_ROOM)
    with pytest.raises(ValueError, match="must be below"):
        baselines.make("llumnix_scaling", scaling, scale_out_below=2.0, scale_in_above=1.0)
    with pytest.raises(ValueError, match="phase"):
        baselines.make("llumnix_migration", gym.make(MIGRATION, scenario="pascal", mode="phase"))
