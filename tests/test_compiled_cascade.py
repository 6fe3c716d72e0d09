"""A model cascade in the compiled engine (``simulator.compiled_cascade``) gives the Python engine's
outcomes field by field, floats bit for bit, ``quality`` included, and the same counters:

- on seeded families side by side with ``Cluster`` under the same ``CascadeRouter`` setup, each
  with a proof that it exercises what it is named for: two and three stages, judge signals on and
  off, thresholds changed by ``every`` ticks and between ``advance`` calls, the entry stage
  switched, judge latency 0 with completions and judgements tied in time, preemption under memory
  pressure (the carried preemption counts);
- stepped by ``advance`` with the outcomes and clock equal at every stop.

A ``CascadeRouter`` subclass or another completion hook runs in Python between the engine's
events; errors are those of the Python engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from simulator.cluster import Cluster
from simulator.compiled import CompiledCluster
from simulator.instance import InstanceConfig
from simulator.outcome import RequestOutcome
from simulator.request import Request
from simulator.routers.cascade import CascadeRouter
from tests.test_compiled_engine import counters, outcome_mismatches

TWO = ("Llama-3.1-8B", "Llama-3.1-70B")
THREE = ("Llama-2-7B", "Llama-2-13B", "Llama-3.1-70B")
TP = {"Llama-3.1-70B": 4}
GPU = "A100-80GB"


def _config(model: str, **fields: Any) -> InstanceConfig:
    return InstanceConfig(**{"gpu": GPU, "model": model, "tp": TP.get(model, 1), "engine": "vidur-2024", **fields})


def _requests(rng: np.random.Generator, models: tuple[str, ...], count: int, rate_rps: float,
              pairs: bool = False) -> list[Request]:
    """Poisson arrivals with log-uniform lengths and a uniform score per model; with ``pairs``,
    each arrival twice at the same time with the same lengths (tied completions)."""
    arrivals = np.cumsum(rng.exponential(1.0 / rate_rps, count))
    requests = []
    for i in range(count):
        prompt, output = int(np.exp(rng.uniform(np.log(20), np.log(800)))), int(np.exp(rng.uniform(np.log(2), np.log(300))))
        for copy in range(2 if pairs else 1):
            scores = {model: _score(rng) for model in models}
            requests.append(Request(len(requests), float(arrivals[i]), prompt, output, quality_by_model=scores))
    return requests


def _score(rng: np.random.Generator) -> float:
    """A score or signal in [0, 100]; half of them on a grid of 5s, where thresholds fall too
    (a signal equal to its threshold is accepted)."""
    return float(rng.integers(0, 21) * 5) if rng.random() < 0.5 else float(rng.uniform(0.0, 100.0))


def _signals(rng: np.random.Generator, requests: list[Request], models: tuple[str, ...]) -> dict[int, dict[str, float]]:
    return {r.request_id: {m: _score(rng) for m in models} for r in requests}


def _thresholds(rng: np.random.Generator, stages: int) -> list[float]:
    """Each 0 (accept all), 100 (forward all) or in between, on the scores' grid or not."""
    return [float(rng.choice([0.0, 100.0, _score(rng)], p=[0.15, 0.15, 0.7])) for _ in range(stages - 1)]


def _cluster(cls: type[Cluster], router: CascadeRouter, pools: list[tuple[InstanceConfig, int]]) -> Cluster:
    cluster = cls({GPU: sum(config.num_gpus * count for config, count in pools)}, **router.cluster_options())
    for config, count in pools:
        for _ in range(count):
            cluster.deploy(config, ready_now=True)
    return cluster


# A case builds a cluster of `cls` from the seed's generator, serves it and returns it.
Case = Callable[[type[Cluster], np.random.Generator], Cluster]


def _two_stages(cls: type[Cluster], rng: np.random.Generator) -> Cluster:
    router = CascadeRouter(TWO, [float(rng.uniform(20, 80))])
    cluster = _cluster(cls, router, [(_config(TWO[0]), 2), (_config(TWO[1]), 1)])
    cluster.run(_requests(rng, TWO, 80, 15.0))
    return cluster


def _three_stages_ticks(cls: type[Cluster], rng: np.random.Generator) -> Cluster:
    router = CascadeRouter(THREE, [50.0, 50.0], judge_latency_s=float(rng.uniform(0.05, 0.5)))
    cluster = _cluster(cls, router, [(_config(THREE[0]), 1), (_config(THREE[1]), 1), (_config(THREE[2]), 1)])
    requests = _requests(rng, THREE, 80, 12.0)
    router.set_judge_signals(_signals(rng, requests, THREE))
    ticks = np.random.default_rng(rng.integers(1 << 32))

    def retune(c: Cluster) -> None:
        router.set_thresholds(_thresholds(ticks, 3))

    cluster.every(float(rng.uniform(0.2, 1.0)), retune)
    cluster.run(requests)
    return cluster


def _stepped_entry_switch(cls: type[Cluster], rng: np.random.Generator) -> Cluster:
    """Thresholds, the entry stage and the judge signals changed between ``advance`` calls."""
    router = CascadeRouter(THREE, [60.0, 40.0])
    cluster = _cluster(cls, router, [(_config(THREE[0]), 2), (_config(THREE[1]), 1), (_config(THREE[2]), 1)])
    requests = _requests(rng, THREE, 90, 15.0)
    cluster.submit(requests)
    until_s = 0.0
    while cluster.pending_requests():
        until_s += float(rng.uniform(0.1, 1.0))
        cluster.advance(until_s)
        router.set_thresholds(_thresholds(rng, 3))
        router.set_entry_stage(int(rng.integers(0, 3)))
        if rng.random() < 0.3:
            router.set_judge_signals(None if rng.random() < 0.3 else _signals(rng, requests, THREE))
    return cluster


def _tied_judges(cls: type[Cluster], rng: np.random.Generator) -> Cluster:
    """Judge latency 0 and identical requests on identical instances: completions, judgements
    and forwards fall at the same times."""
    router = CascadeRouter(TWO, [float(rng.uniform(30, 70))], judge_latency_s=0.0)
    cluster = _cluster(cls, router, [(_config(TWO[0]), 2), (_config(TWO[1]), 2)])
    cluster.run(_requests(rng, TWO, 40, 8.0, pairs=True))
    return cluster


def _memory_pressure(cls: type[Cluster], rng: np.random.Generator) -> Cluster:
    preemption = str(rng.choice(["swap", "recompute"]))
    small = _config(TWO[0], preemption=preemption, kv_blocks=int(rng.integers(60, 120)), max_batch_size=16)
    large = _config(TWO[1], preemption=preemption, kv_blocks=int(rng.integers(60, 120)), max_batch_size=16)
    router = CascadeRouter(TWO, [float(rng.uniform(40, 80))], judge_latency_s=float(rng.choice([0.0, 0.27])))
    cluster = _cluster(cls, router, [(small, 1), (large, 1)])
    cluster.run(_requests(rng, TWO, 70, 20.0))
    return cluster


def _forwarded(outcomes: list[RequestOutcome], stage_ids: set[int]) -> int:
    return sum(o.instance_id in stage_ids for o in outcomes)


FAMILIES: dict[str, tuple[Case, Callable[[Cluster], bool]]] = {
    "two_stages": (_two_stages, lambda c: 0 < _forwarded(c.outcomes, {2}) < len(c.outcomes)),
    "three_stages_ticks": (_three_stages_ticks, lambda c: _forwarded(c.outcomes, {2}) > 0
                           and len({o.quality for o in c.outcomes}) > 1),
    "stepped_entry_switch": (_stepped_entry_switch,
                             lambda c: all(_forwarded(c.outcomes, ids) for ids in ({0, 1}, {2}, {3}))),
    "tied_judges": (_tied_judges, lambda c: len({o.finish_s for o in c.outcomes}) < len(c.outcomes)
                    and _forwarded(c.outcomes, {2, 3}) > 0),
    "memory_pressure": (_memory_pressure, lambda c: any(o.num_preemptions and o.instance_id == 1 for o in c.outcomes)),
}
SEEDS = range(8)


def _both(case: Case, seed: int, family: str) -> tuple[Cluster, Cluster]:
    python = case(Cluster, np.random.default_rng([seed, list(FAMILIES).index(family)]))
    compiled = case(CompiledCluster, np.random.default_rng([seed, list(FAMILIES).index(family)]))
    return python, compiled


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_cascades_give_the_python_engines_outcomes(family, seed):
    case, exercised = FAMILIES[family]
    python, compiled = _both(case, seed, family)
    assert compiled._cascade is not None  # the engine ran the cascade, not Python
    found = outcome_mismatches(python.outcomes, compiled.outcomes)
    assert not found, f"{family} seed {seed}: {len(found)} mismatches:\n" + "\n".join(found[:10])
    assert counters(compiled) == counters(python)
    assert all(not np.isnan(o.quality) for o in python.outcomes)
    assert exercised(python), f"{family} seed {seed} does not exercise its feature"


def test_the_tied_family_ties_a_judgement_with_another_completion():
    """Latency 0: a judgement runs at its completion's time; identical pairs complete together,
    so a forwarded request's first stage ends at the same time as another request's."""
    python, _ = _both(_tied_judges, 0, "tied_judges")
    finishes = [o.finish_s for o in python.outcomes]
    assert any(finishes.count(t) >= 2 for t in finishes)


@pytest.mark.parametrize("seed", range(3))
def test_stepping_gives_the_python_engines_outcomes_and_clock_at_every_stop(seed):
    def stops(cls: type[Cluster]) -> list[tuple[float, int, float]]:
        rng = np.random.default_rng(seed)
        router = CascadeRouter(TWO, [50.0])
        cluster = _cluster(cls, router, [(_config(TWO[0]), 1), (_config(TWO[1]), 1)])
        cluster.submit(_requests(rng, TWO, 40, 10.0))
        seen = []
        while cluster.pending_requests():
            cluster.advance(cluster.events.now_s + float(rng.uniform(0.05, 0.5)))
            router.set_thresholds([float(rng.uniform(0.0, 100.0))])
            seen.append((cluster.events.now_s, len(cluster.outcomes), sum(o.quality for o in cluster.outcomes)))
        return seen

    assert stops(CompiledCluster) == stops(Cluster)


class QuietCascade(CascadeRouter):
    """A subclass: the engine cannot know what it overrides, so Python runs it."""


@pytest.mark.parametrize("make_options", [
    lambda router: QuietCascade(router.models, router.thresholds).cluster_options(),
    lambda router: {"router": router.route, "completion_hook": lambda c, i, s: router.on_complete(c, i, s)},
], ids=["subclass", "another_hook"])
def test_anything_but_a_cascade_routers_own_methods_runs_in_python_with_the_same_outcomes(make_options):
    def serve(cls: type[Cluster]) -> Cluster:
        router = CascadeRouter(TWO, [50.0])
        cluster = cls({GPU: 5}, **make_options(router))
        cluster.deploy(_config(TWO[0]), ready_now=True)
        cluster.deploy(_config(TWO[1]), ready_now=True)
        cluster.run(_requests(np.random.default_rng(3), TWO, 30, 10.0))
        return cluster

    python, compiled = serve(Cluster), serve(CompiledCluster)
    assert compiled.router_spec.name == "external" and compiled._cascade is None
    assert not outcome_mismatches(python.outcomes, compiled.outcomes)
    assert _forwarded(python.outcomes, {1}) > 0


def _small_cluster(cls: type[Cluster], router: CascadeRouter, large: int = 1) -> Cluster:
    return _cluster(cls, router, [(_config(TWO[0]), 1), (_config(TWO[1]), large)])


@pytest.mark.parametrize("cls", [Cluster, CompiledCluster])
def test_missing_scores_and_signals_raise_naming_the_request_and_model(cls):
    router = CascadeRouter(TWO, [50.0])
    with pytest.raises(ValueError, match="request 0 has no quality score for Llama-3.1-8B"):
        _small_cluster(cls, router).run([Request(0, 0.0, 10, 5)])
    router.set_judge_signals({5: {TWO[0]: 1.0}})
    with pytest.raises(ValueError, match="request 0 has no judge signal for Llama-3.1-8B"):
        _small_cluster(cls, router).run([Request(0, 0.0, 10, 5, quality_by_model={TWO[0]: 1.0, TWO[1]: 2.0})])
    router.set_judge_signals(None)
    with pytest.raises(ValueError, match="request 0 has no quality score for Llama-3.1-70B"):
        _small_cluster(cls, router).run([Request(0, 0.0, 10, 5, quality_by_model={TWO[0]: 1.0})])


@pytest.mark.parametrize("cls", [Cluster, CompiledCluster])
def test_no_instance_of_the_next_stage_raises_naming_it(cls):
    router = CascadeRouter(TWO, [50.0])
    cluster = _small_cluster(cls, router, large=0)
    with pytest.raises(RuntimeError, match="no serving instance of Llama-3.1-70B for cascade stage 1"):
        cluster.run([Request(0, 0.0, 10, 5, quality_by_model={TWO[0]: 1.0, TWO[1]: 2.0})])


@pytest.mark.parametrize("cls", [Cluster, CompiledCluster])
def test_a_request_pinned_to_a_model_outside_the_stage_raises(cls):
    router = CascadeRouter(TWO, [50.0])
    cluster = _small_cluster(cls, router)
    with pytest.raises(ValueError, match="instance 0 serves Llama-3.1-8B, request needs Llama-2-7B"):
        cluster.run([Request(0, 0.0, 10, 5, model="Llama-2-7B", quality_by_model={TWO[0]: 1.0, TWO[1]: 2.0})])


def test_changes_the_engine_cannot_follow_raise():
    router = CascadeRouter(TWO, [50.0])
    cluster = _small_cluster(CompiledCluster, router)
    cluster.submit(_requests(np.random.default_rng(0), TWO, 5, 10.0))
    router.judge_latency_s = 1.0
    with pytest.raises(ValueError, match="judge_latency_s changed from 0.27 to 1.0 after the workload was submitted"):
        cluster.advance()
    other = _small_cluster(CompiledCluster, CascadeRouter(TWO, [50.0]))
    other.completion_hook = lambda c, i, s: True
    with pytest.raises(ValueError, match="a completion hook replaced after construction"):
        other.run([Request(0, 0.0, 10, 5)])


@pytest.mark.parametrize("cls", [Cluster, CompiledCluster])
def test_a_python_event_at_the_judges_time_runs_before_it_if_scheduled_before_it(cls):
    """Events at one time run in the order they were scheduled: a threshold raised at the
    judgement's time by an event scheduled before the completion forwards the request; one
    scheduled after the completion comes too late for it."""
    def serve(raise_at: Callable[[Cluster, CascadeRouter, float], None] | None) -> RequestOutcome:
        router = CascadeRouter(TWO, [50.0])
        cluster = _small_cluster(cls, router)
        if raise_at is not None:
            raise_at(cluster, router, judged_s)
        (outcome,) = cluster.run([Request(0, 0.0, 100, 20, quality_by_model={TWO[0]: 60.0, TWO[1]: 90.0})])
        return outcome

    judged_s = float("nan")
    alone = serve(None)
    judged_s = alone.finish_s  # the stage-0 completion + the judge latency
    assert (alone.instance_id, alone.quality) == (0, 60.0)

    def before(cluster: Cluster, router: CascadeRouter, at_s: float) -> None:
        cluster.events.schedule(at_s, lambda _: router.set_thresholds([70.0]))

    def after(cluster: Cluster, router: CascadeRouter, at_s: float) -> None:
        later = lambda _: cluster.events.schedule(at_s, lambda _: router.set_thresholds([70.0]))  # noqa: E731
        cluster.events.schedule(at_s - 0.1, later)  # after the completion, before the judgement

    forwarded = serve(before)
    assert (forwarded.instance_id, forwarded.quality) == (1, 90.0) and forwarded.finish_s > judged_s
    kept = serve(after)
    assert (kept.instance_id, kept.quality, kept.finish_s) == (0, 60.0, judged_s)
