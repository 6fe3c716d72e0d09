"""servegym/Migration-v0: live migration between instances, periodic and at </think>."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from sb3_contrib import MaskablePPO
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import envs  # noqa: F401  (registers the IDs)
from envs.base import InvalidActionError
from envs.migration import MigrationEnv, migration_candidate
from envs.presets import make_scenario
from envs.scenario import InstanceGroup, Scenario
from simulator.instance import InstanceConfig
from simulator.kv_blocks import blocks_for_tokens
from simulator.request import SLO, Request
from simulator.sequence import Residency

ENGINE = "vidur-2024"  # the hand-computed expectations here use its latency model and batching

MODEL = "Llama-3.1-8B"
SMALL = dict(episode_requests=200)
REASONING = dict(episode_requests=40, lengths="servegen_deepseek_r1", rate_rps=2.0, slo_by_tier=(SLO(ttft_s=60.0),))


@dataclasses.dataclass(frozen=True)
class ScriptedScenario(Scenario):
    """A scenario whose episode is a fixed list of requests (hand-checkable states)."""

    script: tuple[Request, ...] = ()

    def requests(self, rng: np.random.Generator) -> list[Request]:
        return [dataclasses.replace(r) for r in self.script]


def scripted(requests: list[tuple[float, int, int, int]], configs: list[InstanceConfig], max_instances: int = 0,
             num_tiers: int = 1) -> ScriptedScenario:
    """``requests`` as (arrival_s, prompt, output, tier); one instance per config."""
    base = make_scenario("default", num_tiers=num_tiers, tier_weights=(1.0,) * num_tiers)
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(Scenario)}
    slo = SLO(ttft_s=1.0, tbt_s=0.06)
    fields.update(
        instances=tuple(InstanceGroup(c, 1) for c in configs),
        gpu_inventory={},
        max_instances=max_instances,
        episode_requests=len(requests),
    )
    script = tuple(Request(i, a, p, o, tier=t, slo=slo) for i, (a, p, o, t) in enumerate(requests))
    return ScriptedScenario(**fields, script=script)


A100 = InstanceConfig(engine=ENGINE, gpu="A100-80GB", model=MODEL)
NOOP = np.array([3, 3])  # max_instances = 3 below


def after_first_step(scenario: ScriptedScenario, **kwargs) -> MigrationEnv:
    """Reset, then one no-op interval (0.5 s) so prefills are done and requests decode."""
    env = MigrationEnv(scenario, migration_interval_s=0.5, **kwargs)
    env.reset(seed=0)
    env.step(NOOP)
    return env


# Round-robin: requests 0, 2 -> instance 0; 1, 3 -> instance 1. All decode for ~20 s.
RUNNING = [(0.000, 400, 3000, 1), (0.001, 200, 3000, 0), (0.002, 100, 3000, 0), (0.003, 300, 3000, 1)]


def test_running_migration_moves_one_request_live_and_conserves_tokens():
    # reads each request's KV blocks, which only the Python engine exposes
    env = after_first_step(scripted(RUNNING, [A100, A100], max_instances=3, num_tiers=2), backend="python")
    source, target = env.cluster.instances[0], env.cluster.instances[1]
    assert [s.request_id for s in source.running] == [0, 2] and len(target.running) == 2
    # Lowest priority first (tier 1 over tier 0), before smaller KV: request 0, not request 2.
    moving = migration_candidate(source)
    assert moving.request_id == 0
    mask = env.action_masks()
    assert mask[[0, 1, 3]].all() and not mask[2]  # sources: both instances, slot 2 is empty
    assert mask[4 + 0] and mask[4 + 1] and not mask[4 + 2] and mask[4 + 3]
    _, _, _, _, info = env.step(np.array([0, 1]))
    assert not info["invalid_action"]
    assert [s.request_id for s in source.running] == [2]
    assert sorted(s.request_id for s in target.running) == [0, 1, 3]
    assert info["migrations_started"] == info["migrations_done"] == 1
    assert moving.instance_id == 1 and moving.num_migrations == 1
    # Its KV came along: decode invariant holds and the destination holds its blocks.
    target.sync()
    assert moving.kv_tokens == moving.prompt_tokens + moving.generated_tokens - 1
    assert moving.blocks == blocks_for_tokens(moving.kv_tokens + 1, 16)
    source.sync()
    assert source.kv.used_blocks == source.running[0].blocks
    assert target.kv.used_blocks == sum(s.blocks for s in target.running)
    done = False
    while not done:
        _, _, terminated, truncated, info = env.step(NOOP)
        done = terminated or truncated
    outcome = {o.request_id: o for o in env.cluster.outcomes}[0]
    assert outcome.completed and outcome.instance_id == 1 and outcome.output_tokens == 3000
    assert moving.generated_tokens == 3000


def test_queued_request_is_picked_first_and_moves_at_once():
    one_at_a_time = dataclasses.replace(A100, max_batch_size=1)
    # Round-robin: 0, 2 -> instance 0 (2 waits), 1, 3 -> instance 1 (3 waits).
    env = after_first_step(scripted(RUNNING, [one_at_a_time, one_at_a_time], max_instances=3, num_tiers=2))
    source, target = env.cluster.instances[0], env.cluster.instances[1]
    assert [s.request_id for s in source.waiting] == [2] and [s.request_id for s in target.waiting] == [3]
    assert migration_candidate(source).request_id == 2  # queued before running
    before = (source.num_requests, target.num_requests)
    env.step(np.array([0, 1]))
    assert (source.num_requests, target.num_requests) == (before[0] - 1, before[1] + 1)
    assert source.waiting == [] and sorted(s.request_id for s in target.waiting) == [2, 3]
    assert env.cluster.migrations_started == env.cluster.migrations_done == 1


def test_noop_changes_nothing():
    def trace(actions):
        env = MigrationEnv(scripted(RUNNING, [A100, A100], max_instances=3, num_tiers=2), migration_interval_s=0.5)
        obs, _ = env.reset(seed=0)
        out = []
        for action in actions:
            obs, reward, *_ = env.step(np.array(action))
            out.append((obs, reward, env.cluster.migrations_started))
        return out

    plain = trace([[3, 3]] * 8)
    for other in (trace([[0, 3]] * 8), trace([[3, 1]] * 8)):
        for (obs_a, r_a, m_a), (obs_b, r_b, m_b) in zip(plain, other):
            assert r_a == r_b and m_a == m_b == 0
            for key in obs_a:
                np.testing.assert_array_equal(obs_a[key], obs_b[key])


def test_invalid_pairs_fall_back_with_penalty_and_strict_raises():
    # 0.1909 * 80 GiB - 16,060,522,496 B weights - 192,937,984 B activations = 144,724,656 B
    # = 1,104 tokens of 131,072 B: 69 blocks.
    small_kv = dataclasses.replace(A100, memory_utilization=0.1909)
    requests = [(0.0, 400, 3000, 0), (0.001, 300, 700, 0)]

    def make(**kwargs):
        return after_first_step(scripted(requests, [A100, small_kv], max_instances=3), invalid_action_penalty=2.5,
                                **kwargs)

    reference = make()
    _, r_noop, *_, info_noop = reference.step(NOOP)
    assert not info_noop["invalid_action"]
    for action in ([0, 0], [2, 1], [0, 1]):  # same instance; empty slot; 3,400 tokens > the target's capacity
        env = make()
        _, reward, *_, info = env.step(np.array(action))
        assert info["invalid_action"] and env.cluster.migrations_started == 0
        assert reward == pytest.approx(r_noop - 2.5)
        strict = make(strict=True)
        with pytest.raises(InvalidActionError, match="masked out"):
            strict.step(np.array(action))


def test_out_of_space_actions_and_bad_arguments_raise():
    env = MigrationEnv(**SMALL)
    env.reset(seed=0)
    assert env.action_space == gym.spaces.MultiDiscrete([9, 9])
    with pytest.raises(ValueError, match="outside the action space"):
        env.step(np.array([9, 0]))
    with pytest.raises(ValueError, match="outside the action space"):
        env.step(np.array([0, 1, 2]))
    with pytest.raises(ValueError, match=r"unknown mode 'sometimes'; known: \['periodic', 'phase'\]"):
        MigrationEnv(mode="sometimes")
    with pytest.raises(ValueError, match=r"unknown router 'random'; known: \['round_robin', 'least_loaded', 'llumnix'\]"):
        MigrationEnv(router="random")
    with pytest.raises(ValueError, match="migration_interval_s must be a positive number, got -1"):
        MigrationEnv(migration_interval_s=-1.0)
    with pytest.raises(ValueError, match="mode='phase' needs a reasoning scenario"):
        MigrationEnv(mode="phase")
    with pytest.raises(ValueError, match="no meaning in mode='phase'"):
        MigrationEnv(mode="phase", migration_interval_s=0.1, **REASONING)


def test_interval_defaults_and_least_loaded_routing():
    assert MigrationEnv().migration_interval_s == 0.5  # the default scenario's coarser interval
    custom = dataclasses.replace(scripted(RUNNING, [A100]), name="custom")
    assert MigrationEnv(custom).migration_interval_s == 0.05  # Llumnix's polling interval
    # Request 0 (1 output token) is done before request 1 arrives: least-loaded sends 1 to the
    # now empty instance 0, round-robin to instance 1.
    requests = [(0.0, 50, 1, 0), (0.3, 50, 5, 0)]
    for router, expected in (("least_loaded", 0), ("round_robin", 1)):
        env = MigrationEnv(scripted(requests, [A100, A100]), router=router, migration_interval_s=0.5)
        env.reset(seed=0)
        done = False
        while not done:
            *_, terminated, truncated, _ = env.step(np.array([2, 2]))
            done = terminated or truncated
        assert {o.request_id: o.instance_id for o in env.cluster.outcomes}[1] == expected


def test_registered_and_passes_both_env_checkers():
    env = gym.make("servegym/Migration-v0", **SMALL)
    check_env(env.unwrapped)
    sb3_check_env(env.unwrapped)
    check_env(MigrationEnv(mode="phase", **REASONING))


def masked_random_rollout(env: MigrationEnv, seed: int, steps: int = 40):
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    split = env.noop_index + 1
    trace = []
    for _ in range(steps):
        mask = env.action_masks()
        action = np.array([rng.choice(np.flatnonzero(mask[:split])), rng.choice(np.flatnonzero(mask[split:]))])
        obs, reward, terminated, truncated, info = env.step(action)
        trace.append((obs, reward))
        if terminated or truncated:
            break
    return trace


def test_same_seed_same_trajectory():
    a = masked_random_rollout(MigrationEnv(**SMALL), seed=5)
    b = masked_random_rollout(MigrationEnv(**SMALL), seed=5)
    c = masked_random_rollout(MigrationEnv(**SMALL), seed=6)
    for (obs_a, r_a), (obs_b, r_b) in zip(a, b):
        assert r_a == r_b
        for key in obs_a:
            np.testing.assert_array_equal(obs_a[key], obs_b[key])
    assert any(not np.array_equal(x[0]["instances"], y[0]["instances"]) for x, y in zip(a, c))


def test_random_masked_episode_conserves_requests_and_stays_in_bounds():
    env = MigrationEnv(**SMALL, num_tiers=3, priorities="uniform", tier_weights=(4.0, 2.0, 1.0))
    obs, _ = env.reset(seed=1)
    rng = np.random.default_rng(1)
    split = env.noop_index + 1
    done = False
    while not done:
        for key, value in obs.items():
            assert env.observation_space[key].contains(value), key
            assert np.isfinite(value).all()
        mask = env.action_masks()
        action = np.array([rng.choice(np.flatnonzero(mask[:split])), rng.choice(np.flatnonzero(mask[split:]))])
        obs, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    assert truncated and not terminated
    assert info["migrations_started"] > 0
    assert info["migrations_started"] == info["migrations_done"] + info["migrations_aborted"]
    outcomes = env.cluster.outcomes
    assert sorted(o.request_id for o in outcomes) == list(range(200))
    assert all(o.completed for o in outcomes)


def test_phase_mode_decides_each_think_end_and_moves_only_when_asked():
    env = MigrationEnv(mode="phase", **REASONING)
    env.reset(seed=1)
    split = env.noop_index + 1
    decisions = moved = 0
    done = False
    while not done:
        decision = env.phase_decision
        mask = env.action_masks()
        source_slot = list(env.cluster.instances).index(decision.instance_id)
        assert np.flatnonzero(mask[:split]).tolist() == [source_slot, env.noop_index]
        destination = (source_slot + 1) % env.noop_index
        move = decisions % 2 == 0
        _, _, terminated, truncated, info = env.step(np.array([source_slot, destination if move else env.noop_index]))
        assert not info["invalid_action"]
        decisions += 1
        moved += move
        done = terminated or truncated
    assert decisions == 40  # every ServeGen request reasons, then answers
    outcomes = env.cluster.outcomes
    assert len(outcomes) == 40 and all(o.completed for o in outcomes)
    assert sum(o.num_migrations for o in outcomes) == moved


def test_maskable_ppo_trains_briefly():
    env = MigrationEnv(**SMALL)
    MaskablePPO("MultiInputPolicy", env, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu").learn(1024)


@pytest.mark.parametrize("backend", ["compiled", "python"])
@pytest.mark.parametrize("mode", ["periodic", "phase"])
def test_the_candidate_table_is_each_slots_candidate(mode, backend):
    """``observed_candidates`` (one engine call per observation) holds, slot by slot, what
    ``candidate(slot)`` gives: queued or not, prompt + generated tokens, KV tokens and tier, -1s
    where none; the mask's sources are its rows with a candidate. Over a random masked episode
    with live migrations in flight (excluded from the table) on either engine."""
    options = (dict(episode_requests=120, num_tiers=3, priorities="uniform", tier_weights=(4.0, 2.0, 1.0),
                    migration_interval_s=0.05)
               if mode == "periodic" else REASONING)
    env = MigrationEnv(mode=mode, backend=backend, **options)
    env.reset(seed=2)
    rng = np.random.default_rng(2)
    split, seen, in_flight = env.noop_index + 1, set(), 0
    done = False
    while not done:
        table = env.observed_candidates()
        for slot, row in enumerate(table.tolist()):
            seq = env.candidate(slot)
            queued = mode == "periodic" and seq is not None and seq.residency == Residency.QUEUED
            assert row == ([-1] * 4 if seq is None else [int(queued), seq.prefill_target_tokens, seq.kv_tokens, seq.tier])
            seen.add(row[0])
        mask = env.action_masks()
        assert mask[:split - 1].tolist() == (table[:, 0] >= 0).tolist()
        in_flight += len(env.live_migrations_in_flight())
        action = np.array([rng.choice(np.flatnonzero(mask[:split])), rng.choice(np.flatnonzero(mask[split:]))])
        _, _, _, done, _ = env.step(action)
    assert seen == ({-1, 0, 1} if mode == "periodic" else {-1, 0})
    assert in_flight > 0 or mode == "phase"
