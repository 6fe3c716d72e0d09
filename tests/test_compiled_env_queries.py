"""The compiled engine's batch answers to what the envs ask between steps equal the Python
engine's, on seeded runs stepped to random times: every instance's migration candidate in one
call (``Cluster.migration_candidates``, Migration-v0), Scaling-v0's weighted units routed inside
the engine (``simulator.routers.units``, router ``units``), and a config deployed again after
the submit from its first instance (including one whose scheduler options changed in place)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simulator.cluster import Cluster, MigrationConfig
from simulator.compiled import CompiledCluster
from simulator.instance import InstanceConfig, Lifecycle
from simulator.request import Request
from simulator.routers.units import WeightedUnitRouter
from simulator.sequence import Residency
from tests.test_compiled_engine import _arrays, _config, _requests, _side_by_side, counters, outcome_mismatches


@pytest.mark.parametrize("seed", range(3))
def test_migration_candidates_of_every_instance_follow_the_python_engine(seed):
    """At every stop both engines give the same table (queued, prompt + generated tokens, KV
    tokens, tier; -1s for none) for every instance, with and without excluded request ids; each
    row is the instance's own ``migration_candidate``. Candidates migrate now and then, so that
    queued and running candidates, empty instances and exclusions that change the answer all occur."""
    rng = np.random.default_rng([seed, 43])
    config = _config(rng, scheduler="priority", kv_blocks=int(rng.integers(200, 400)), preemption="swap")
    requests = _requests(rng, 150, 30.0, (20, 800), (50, 400))
    clusters = _side_by_side(lambda cls: cls({"A100-80GB": 4}, router="round_robin", track_arrays=True,
                                             migration=MigrationConfig(last_stage_max_blocks=4)), config, 4, requests)
    python, compiled = clusters
    ids = [0, 1, 2, 3]
    seen = {"queued": 0, "running": 0, "none": 0, "excluded": 0}
    while python.pending_requests():
        until_s = python.events.now_s + float(rng.exponential(0.05))
        assert python.advance(until_s) is None and compiled.advance(until_s) is None
        plain = [c.migration_candidates(ids) for c in clusters]
        assert plain[0].dtype == plain[1].dtype == np.int64 and plain[0].shape == (4, 4)
        np.testing.assert_array_equal(plain[1], plain[0])
        running_ids = [s.request_id for i in ids for s in python.instances[i].running]
        excluded = set(rng.choice(running_ids, size=len(running_ids) // 2, replace=False).tolist()) if running_ids else set()
        tables = [c.migration_candidates(ids, excluded) for c in clusters]
        np.testing.assert_array_equal(tables[1], tables[0])
        for instance_id, row in zip(ids, tables[0].tolist()):
            seq = python.instances[instance_id].migration_candidate(excluded)
            expected = [-1] * 4 if seq is None else [int(seq.residency == Residency.QUEUED), seq.prompt_tokens
                                                     + seq.generated_tokens, seq.kv_tokens, seq.tier]
            assert row == expected
        seen["queued"] += int((tables[0][:, 0] == 1).sum())
        seen["running"] += int((tables[0][:, 0] == 0).sum())
        seen["none"] += int((tables[0][:, 0] == -1).sum())
        seen["excluded"] += int((tables[0] != plain[0]).any())
        loads = [python.instances[i].num_requests for i in ids]
        source, target = int(np.argmax(loads)), int(np.argmin(loads))
        if source != target and rng.random() < 0.3:
            candidates = [c.instances[source].migration_candidate() for c in clusters]
            if candidates[0] is not None:
                assert [c.migrate(s, target) for c, s in zip(clusters, candidates)] in ([True] * 2, [False] * 2)
    assert all(seen.values()), seen
    found = outcome_mismatches(python.outcomes, compiled.outcomes)
    assert not found, f"{len(found)} mismatches:\n" + "\n".join(found[:10])


def test_migration_candidates_name_an_unknown_instance():
    rng = np.random.default_rng(5)
    for cluster in _side_by_side(lambda cls: cls({"A100-80GB": 1}, track_arrays=True), _config(rng), 1,
                                 _requests(rng, 5, 10.0, (20, 40), (5, 10))):
        with pytest.raises((KeyError, IndexError), match="7"):
            cluster.migration_candidates([0, 7])


@pytest.mark.parametrize("seed", range(3))
def test_weighted_units_are_routed_in_the_engine_as_in_python(seed):
    """Units of one or two instances with unequal weights; between stops a unit's weight changes,
    a unit is added (an instance deployed, starting up) or one drained and dropped. The compiled
    cluster routes them in C++ (router ``units``); the clock, lifecycles and arrays agree at every
    stop, the outcomes and counters at the end, and every unit's entry takes requests."""
    rng = np.random.default_rng([seed, 47])
    config = _config(rng, scheduler="priority", kv_blocks=int(rng.integers(200, 400)))
    requests = _requests(rng, 160, 25.0, (20, 800), (10, 300))
    units: list[tuple[tuple[int, ...], float]] = [((0,), 1.0), ((1, 2), 2.5), ((3,), 0.5)]
    router = WeightedUnitRouter(lambda: list(units))
    clusters = _side_by_side(lambda cls: cls({"A100-80GB": 8}, router=router, track_arrays=True, provisioning_s=0.5),
                             config, 4, requests)
    python, compiled = clusters
    assert compiled.router_spec.name == "units"
    changes = {"weight": 0, "added": 0, "dropped": 0}
    while python.pending_requests():
        until_s = python.events.now_s + float(rng.exponential(0.25))
        assert python.advance(until_s) is None and compiled.advance(until_s) is None
        state = [(c.events.now_s, [i.lifecycle for i in c.instances.values()], _arrays(c)) for c in clusters]
        assert state[1] == state[0]
        action = rng.random()
        if action < 0.15:
            index = int(rng.integers(0, len(units)))
            units[index] = (units[index][0], float(rng.uniform(0.25, 4.0)))
            changes["weight"] += 1
        elif action < 0.3 and sum(python.gpus_in_use.values()) < 8:
            new = {c.deploy(config) for c in clusters}
            assert len(new) == 1
            units.append(((new.pop(),), float(rng.uniform(0.5, 2.0))))
            changes["added"] += 1
        elif action < 0.4 and len(units) > 2:
            index = int(rng.integers(0, len(units)))
            for instance_id in units.pop(index)[0]:
                if python.instances[instance_id].lifecycle in (Lifecycle.SERVING, Lifecycle.STARTING):
                    for c in clusters:
                        c.drain(instance_id)
            changes["dropped"] += 1
    assert all(changes.values()), changes
    found = outcome_mismatches(python.outcomes, compiled.outcomes)
    assert not found, f"{len(found)} mismatches:\n" + "\n".join(found[:10])
    assert counters(compiled) == counters(python)
    assert {0, 1, 3} <= {o.instance_id for o in compiled.outcomes}
    assert 2 not in {o.instance_id for o in compiled.outcomes}  # a second member takes no arrival of its own


def _units_cluster(cls: type[Cluster], weight: float, lifecycle_of_entry: str) -> Cluster:
    rng = np.random.default_rng(3)
    cluster = cls({"A100-80GB": 2}, router=WeightedUnitRouter(lambda: [((0,), weight), ((1,), 1.0)]), track_arrays=True)
    for _ in range(2):
        cluster.deploy(_config(rng, scheduler="fcfs"), ready_now=True)
    cluster.submit(_requests(rng, 5, 10.0, (20, 40), (5, 10)))
    if lifecycle_of_entry == "drained":
        cluster.drain(0)
        cluster.drain(1)
    return cluster


def test_no_serving_unit_raises_naming_the_request_on_both_engines():
    for cls in (Cluster, CompiledCluster):
        with pytest.raises(RuntimeError, match="no serving unit can take request 100"):
            _units_cluster(cls, 1.0, "drained").advance()


@pytest.mark.parametrize("case", ["decode-only entry", "entry of another model"])
def test_a_unit_entry_that_cannot_take_the_request_raises_as_in_python(case):
    """The Python engine's dispatch refuses what a unit router picks wrongly; so does the engine."""
    message = ("instance 0 is decode-only and cannot take new requests" if case == "decode-only entry"
               else "instance 0 serves Llama-3.1-8B, request needs Llama-2-7B")
    for cls in (Cluster, CompiledCluster):
        cluster = cls({"A100-80GB": 1}, router=WeightedUnitRouter(lambda: [((0,), 1.0)]), track_arrays=True)
        cluster.deploy(InstanceConfig(gpu="A100-80GB", model="Llama-3.1-8B", engine="vidur-2024",
                                      role="decode" if case == "decode-only entry" else "aggregated"), ready_now=True)
        model = None if case == "decode-only entry" else "Llama-2-7B"
        cluster.submit([Request(1, 0.0, 10, 5, model=model)])
        with pytest.raises(ValueError, match=message):
            cluster.advance()


@pytest.mark.parametrize("weight", [0.0, -1.0, float("inf"), float("nan")])
def test_the_engine_refuses_a_unit_weight_that_is_not_positive_and_finite(weight):
    with pytest.raises(ValueError, match="unit 0: routing weight .* is not positive and finite"):
        _units_cluster(CompiledCluster, weight, "serving").advance()


def test_units_the_engine_cannot_read_raise_naming_them():
    cluster = _units_cluster(CompiledCluster, 1.0, "serving")
    engine: Any = cluster._engine
    with pytest.raises(ValueError, match="unit 1 has no instance"):
        engine.set_units([0, 1, 1], [0], [1.0, 1.0])
    with pytest.raises(ValueError, match="3 offsets for 1 units of 1 instances"):
        engine.set_units([0, 1, 1], [0], [1.0])
    with pytest.raises(ValueError, match="unknown instance 9"):
        engine.set_units([0, 1], [9], [1.0])


@pytest.mark.parametrize("seed", range(2))
def test_a_config_deployed_again_after_the_submit_serves_as_in_python_even_with_changed_options(seed):
    """Scaling deploys the same config object again and again: the compiled cluster reuses the
    first instance's settings then, unless the config's scheduler options (a dict, the one part
    of a frozen config that can change in place) changed meanwhile, as here between the third and
    fourth deploy (Sarathi's chunk size). The outcomes and counters equal the Python engine's."""
    rng = np.random.default_rng([seed, 53])
    config = InstanceConfig(gpu="A100-80GB", model="Llama-3.1-8B", engine="vidur-2024", scheduler="sarathi",
                            scheduler_options={"chunk_tokens": 512})
    requests = _requests(rng, 160, 40.0, (200, 2000), (10, 200))
    clusters = _side_by_side(lambda cls: cls({"A100-80GB": 6}, track_arrays=True), config, 1, requests)
    python, compiled = clusters
    deployed = 0
    while python.pending_requests():
        until_s = python.events.now_s + 0.5
        assert python.advance(until_s) is None and compiled.advance(until_s) is None
        if deployed < 5:
            if deployed == 3:
                config.scheduler_options["chunk_tokens"] = 64
            assert len({c.deploy(config, ready_now=True) for c in clusters}) == 1
            deployed += 1
    found = outcome_mismatches(python.outcomes, compiled.outcomes)
    assert not found, f"{len(found)} mismatches:\n" + "\n".join(found[:10])
    assert counters(compiled) == counters(python)
    assert {o.instance_id for o in compiled.outcomes} == set(range(6))
