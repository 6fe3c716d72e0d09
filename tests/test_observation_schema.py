"""The named observation schema (``envs.schema``): decoding an env's observation gives the raw
values the simulator holds, encoding and decoding are inverse, the docstring tables come from
the schema, the mask is computed once per step, and bad names or values raise."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

import envs
from envs.observation import freeness
from envs.schema import Block, Field, ObservationSchema, ratio, signed_ratio
from envs.random_policy import random_masked_action
from simulator.headroom import freeness_full, freeness_normal

ROUTING, TIER, MIGRATION, SCALING, CASCADE = (f"servegym/{n}-v0" for n in ("Routing", "Tier", "Migration", "Scaling", "Cascade"))


def run(env: gym.Env, steps: int, seed: int = 0):
    """(observation, env) after each of ``steps`` random masked steps."""
    rng = np.random.default_rng(seed)
    observation, _ = env.reset(seed=seed)
    for _ in range(steps):
        yield observation
        observation, _, terminated, truncated, _ = env.step(
            random_masked_action(env.action_space, env.unwrapped.action_masks(), rng))
        if terminated or truncated:
            observation, _ = env.reset()


@pytest.mark.parametrize(("env_id", "scenario"), [(ROUTING, "pascal"), (ROUTING, "multitier"), (MIGRATION, "default")])
def test_decoded_instance_features_are_the_simulators_values(env_id, scenario):
    env = gym.make(env_id, scenario=scenario)
    unwrapped = env.unwrapped
    busy = 0
    for observation in run(env, 120):
        view = unwrapped.schema.decode(observation)
        cluster = unwrapped.cluster
        for slot, instance in enumerate(cluster.instances.values()):
            counts = {"waiting": len(instance.waiting), "running": len(instance.running),
                      "swapped": len(instance.swapped)}
            for name, value in counts.items():
                assert view.instances[name][slot] == value, (name, slot)
            tiers = [0] * unwrapped.scenario.num_tiers
            for seq in instance.sequences():
                tiers[min(seq.tier, len(tiers) - 1)] += 1
            assert [view.instances[f"tier_{k}"][slot] for k in range(len(tiers))] == tiers
            pending = sum(s.prefill_target_tokens - s.kv_tokens for s in instance.waiting)
            assert view.instances["pending_prefill_tokens"][slot] == pytest.approx(pending, rel=1e-5, abs=1e-3)
            used = instance.kv_used_blocks_now()
            assert view.instances["kv_used_fraction"][slot] == pytest.approx(used / instance.kv.total_blocks, rel=1e-6)
            assert view.instances["kv_capacity"][slot] == pytest.approx(instance.kv.capacity_tokens, rel=1e-5)
            for name, value in (("freeness", freeness(instance)), ("freeness_normal", freeness_normal(instance)),
                                ("freeness_full", freeness_full(instance, unwrapped.features.default_headroom))):
                decoded = view.instances[name][slot]
                assert decoded == value if math.isinf(value) else decoded == pytest.approx(value, rel=1e-4, abs=1e-4)
            busy += used > 0
        assert view.context["arrived"] == cluster.arrived
    assert busy > 50


def test_decoded_context_and_mask_name_what_the_env_computed():
    env = gym.make(ROUTING, scenario="pascal")
    unwrapped = env.unwrapped
    phase_changes = 0
    for observation in run(env, 200):
        view = unwrapped.schema.decode(observation)
        decision = unwrapped._decision
        assert view.context["is_arrival"] == (decision.kind == "route")
        assert view.context["prompt_tokens"] == pytest.approx(decision.seq.prompt_tokens, rel=1e-5)
        assert view.context["tier"] == decision.seq.tier
        if decision.kind == "phase":
            phase_changes += 1
            assert view.context["source_slot"] == list(unwrapped.cluster.instances).index(decision.instance_id)
        else:
            assert view.context["source_slot"] == -1
        np.testing.assert_array_equal(view.mask("instance"), unwrapped.action_masks())
    assert phase_changes > 0
    scaling = gym.make(SCALING, scenario="default", gpu_inventory={"A100-80GB": 6, "L40S": 6}, max_instances=12)
    for observation in run(scaling, 20):
        view = scaling.unwrapped.schema.decode(observation)
        counts = scaling.unwrapped._lifecycle_counts()
        assert view.context["serving_units"].tolist() == counts[:, 0].tolist()
        assert view.context["starting_units"].tolist() == counts[:, 1].tolist()
        np.testing.assert_array_equal(view.mask("choice").reshape(-1), scaling.unwrapped.action_masks())


@pytest.mark.parametrize("env_id", sorted(envs.ENV_IDS))
def test_encode_then_decode_gives_the_raw_values_back(env_id):
    env = gym.make(env_id, scenario="cascadeserve" if env_id == CASCADE else "multitier")
    schema = env.unwrapped.schema
    rng = np.random.default_rng(1)
    slots = schema.max_instances
    instances = {}
    for f in schema.instance_fields:
        if f.unit == "flag":
            instances[f.name] = rng.integers(0, 2, slots).astype(bool)
        elif f.integer:
            instances[f.name] = rng.integers(0, 9_000, slots)
        elif f.encoding.kind == "identity":
            instances[f.name] = rng.uniform(0, 1, slots)
        else:
            instances[f.name] = rng.uniform(-50 if f.encoding.kind == "signed_ratio" else 0, 5e4, slots)
    instances["freeness"][0] = -math.inf
    instances["kv_blocks_per_request"][1] = math.inf
    context = {}
    for name in schema.context_names:
        f = schema.context_field(name)
        size = len(schema.context_positions(name))
        if f.encoding.kind == "one_hot":
            context[name] = int(rng.integers(-1, size))
        elif f.unit == "flag":
            context[name] = rng.integers(0, 2, size).astype(bool)
        elif f.integer:
            scale = f.encoding.scale if f.encoding.kind == "linear" else 9_000
            context[name] = rng.integers(0, int(scale) + 1, size)
        else:
            high = f.encoding.scale if f.encoding.kind == "linear" else 100.0
            context[name] = rng.uniform(0, min(high, 1.0) if f.encoding.kind == "identity" else high, size)
        if f.scalar and f.encoding.kind != "one_hot" and name not in schema._block_fields:
            context[name] = context[name][0]
    observation = schema.encode(instances, context)
    assert env.observation_space.contains(observation)
    view = schema.decode(observation)
    for name, raw in instances.items():
        decoded = view.instances[name]
        if schema.instance_field(name).integer or schema.instance_field(name).unit == "flag":
            np.testing.assert_array_equal(decoded, raw, err_msg=name)
        else:
            np.testing.assert_allclose(decoded, raw, rtol=2e-4, atol=1e-5, err_msg=name)
    for name, raw in context.items():
        f = schema.context_field(name)
        if f.integer or f.unit == "flag" or f.encoding.kind == "one_hot":
            np.testing.assert_array_equal(view.context[name], raw, err_msg=name)
        else:
            np.testing.assert_allclose(view.context[name], raw, rtol=2e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("env_id", sorted(envs.ENV_IDS))
def test_docstring_tables_come_from_the_schema(env_id):
    env = gym.make(env_id, scenario="cascadeserve" if env_id == CASCADE else "multitier")
    doc = type(env.unwrapped).__doc__
    tables = doc[doc.index("## Observation tables"):]
    schema = env.unwrapped.schema
    for f in schema.instance_fields[:28]:
        assert f"| ``{f.name}``: {f.description} | {f.unit} |" in tables
    for name in schema.context_names:
        f = schema.context_field(name)
        assert f"| ``{name}``: {f.description} | {f.unit} | {f.encoding.formula(f.scale_text)} |" in tables
    for part in schema.mask_parts:
        assert f"| ``{part.name}`` |" in tables


@pytest.mark.parametrize("env_id", sorted(envs.ENV_IDS))
def test_the_mask_is_computed_once_per_step(env_id, monkeypatch):
    env = gym.make(env_id, scenario="cascadeserve" if env_id == CASCADE else "default")
    unwrapped = env.unwrapped
    calls = []
    compute = type(unwrapped).compute_action_mask
    monkeypatch.setattr(type(unwrapped), "compute_action_mask", lambda self: calls.append(1) or compute(self))
    steps = 0
    for observation in run(env, 30):
        for _ in range(3):
            np.testing.assert_array_equal(unwrapped.action_masks().astype(np.float32), observation["action_mask"])
        steps += 1
    assert len(calls) == steps + 1  # once at reset and once per step, however often it is asked for
    with pytest.raises(ValueError, match="read-only"):
        unwrapped.action_masks()[0] = False


def test_schema_errors_name_the_bad_value():
    schema = gym.make(ROUTING).unwrapped.schema
    with pytest.raises(KeyError, match="no instance feature 'queue'"):
        schema.instance_column("queue")
    with pytest.raises(KeyError, match="no context field 'qps'"):
        schema.context_positions("qps")
    with pytest.raises(ValueError, match=r"missing \['tier'\]"):
        schema.encode_context({name: 0 for name in schema.context_names if name != "tier"})
    with pytest.raises(ValueError, match=r"unknown \['qps'\]"):
        schema.encode(context={"qps": 1.0})
    with pytest.raises(ValueError, match="tier index 5 outside"):
        schema.encode(context={"tier": 5})
    with pytest.raises(KeyError, match="no mask part 'source'"):
        schema.decode(schema.encode()).mask("source")
    with pytest.raises(ValueError, match="unknown encoding 'log'"):
        Field("x", "s", type(ratio(1.0))("log"), "x")
    with pytest.raises(ValueError, match="scale must be positive and finite, got 0"):
        ratio(0.0)
    with pytest.raises(ValueError, match="duplicate field name 'a'"):
        a = Field("a", "s", ratio(1.0), "a")
        ObservationSchema("test", 1, (), (a, Block("b", 2, (a,))), ())


def test_signed_ratio_decodes_zero_and_the_saturated_ends_without_warnings():
    """x / (scale + |x|) inverted: 0 -> 0, ±0.5 -> ±scale, ±1 (float32 saturation) -> ±inf,
    and no numpy warning (a 0 beside a saturated entry once made 0 * inf)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        decoded = signed_ratio(4.0).decode(np.array([-1.0, -0.5, 0.0, 0.5, 1.0], dtype=np.float32))
    assert decoded.tolist() == [-math.inf, -4.0, 0.0, 4.0, math.inf]


def test_squash_by_hand():
    from envs.observation import squash

    assert (squash(0.0, 4.0), squash(3.0, 1.0), squash(1.0, 3.0)) == (0.0, 0.75, 0.25)
