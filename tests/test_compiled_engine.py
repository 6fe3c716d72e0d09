"""The compiled engine (``simulator.compiled.CompiledCluster``) gives ``Cluster.run``'s outcomes field
by field, floats bit for bit (NaN equal to NaN), and the same counters (final clock, iterations
and busy time per instance, truncations, cost):

- on seeded random workloads and configurations of each family below, each with a proof that it
  exercises what it is named for (preemptions by swap or by recompute, prompts beyond the token
  budget, Sarathi chunks, context caps and rejections, KV-capacity rejections, several routers and
  GPU types, Llumnix-K dispatch with tier headroom over two models, one iteration per event, rr
  and PASCAL time-sharing, the engine's frontend time, pipelines with several microbatches in
  flight, routers written in Python), and prefix caching under every scheduler
  over shared prompts and multi-turn sessions, with and without a host tier (cache counters too);
- on every simulator golden case inside the compiled subset (``tests/sim_golden``), counters
  included, by running the case's own code with ``CompiledCluster`` in place of ``Cluster``;
- on ``simulator_speed``'s runs (a) and (d) at full size (10,000 and 12,031 requests);
- stepped decision by decision (``router=None``, ``advance`` to random times), with the
  observation arrays equal at every stop.

A configuration outside the subset raises a ``ValueError`` naming what is not compiled.
"""

from __future__ import annotations

import dataclasses
import math
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from servegym_core import _core

from experiments.benchmarks import simulator_speed
from simulator.cluster import Cluster, MigrationConfig
from simulator.compiled import CompiledCluster
from simulator.compiled_combos import CompiledComboCluster
from simulator.headroom import default_headroom_fractions
from simulator.instance import InstanceConfig, Lifecycle
from simulator.outcome import RequestOutcome
from simulator.request import SLO, Request
from simulator.sequence import Residency
from simulator.routers import make_router
from simulator.routers.gpu_share import GpuShareRouter
from simulator.workloads.arrivals import PoissonArrivals
from simulator.workloads.prefix_sharing import SessionSpec, SharedPromptSpec, session_requests, shared_prompt_requests
from tests.sim_golden import features, matrix, speed
from tests.sim_golden.cases import CASES_BY_NAME
from tests.sim_golden.table import DATA_DIR, mismatches, read, summary, table

FIELDS = tuple(field.name for field in dataclasses.fields(RequestOutcome))


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types; floats by bit pattern, any NaN equal to any NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def outcome_mismatches(python: list[RequestOutcome], compiled: list[RequestOutcome]) -> list[str]:
    """Each difference, naming the request id and the field (outcomes compared in recorded order)."""
    found = [] if len(python) == len(compiled) else [f"{len(python)} outcomes in Python, {len(compiled)} compiled"]
    for ours, theirs in zip(python, compiled):
        if ours.request_id != theirs.request_id:
            found.append(f"outcome order: request {ours.request_id} in Python where compiled has {theirs.request_id}")
            break
        found += [f"request {ours.request_id}: {name}: python {getattr(ours, name)!r}, compiled {getattr(theirs, name)!r}"
                  for name in FIELDS if not _same(getattr(ours, name), getattr(theirs, name))]
    return found


CACHE_COUNTERS = ("query_tokens", "hit_tokens", "host_hit_tokens", "evicted_blocks", "host_dropped_blocks",
                  "entry_blocks", "host_blocks")


def counters(cluster: Cluster) -> dict[str, Any]:
    instances = cluster.instances.values()
    return {"end_s": cluster.events.now_s, "cost_usd": cluster.cost_usd(), "context_truncated": cluster.context_truncated,
            "iterations": [i.iterations for i in instances], "busy_s": [i.busy_time_s for i in instances],
            "kv_blocks": [(i.kv.used_blocks, i.kv.cached_blocks) for i in instances],
            "prefix_cache": [None if i.prefix_cache is None else [getattr(i.prefix_cache, name) for name in CACHE_COUNTERS]
                             for i in instances]}


def test_the_comparison_names_the_request_and_field_and_compares_floats_by_bits():
    outcome = RequestOutcome(7, 0, 0, 0.5, 10, 4, 0, 0.6, 0.7, 0.7, math.nan, 0.9, 0.05, 0.0, 0, 0, ((0.7, 1),), SLO())
    assert outcome_mismatches([outcome], [dataclasses.replace(outcome)]) == []
    assert outcome_mismatches([outcome], [dataclasses.replace(outcome, reasoning_end_s=-math.nan)]) == []
    off = dataclasses.replace(outcome, finish_s=0.9 * (1 + 2**-52))
    assert outcome_mismatches([outcome], [off]) == [f"request 7: finish_s: python 0.9, compiled {off.finish_s!r}"]
    assert outcome_mismatches([outcome], [dataclasses.replace(outcome, max_tbt_s=-0.0, token_curve=((0.7, 1.0),))]) == [
        "request 7: max_tbt_s: python 0.05, compiled -0.0",
        "request 7: token_curve: python ((0.7, 1),), compiled ((0.7, 1.0),)"]
    assert outcome_mismatches([outcome], []) == ["1 outcomes in Python, 0 compiled"]


# ----------------------------------------------------------------- seeded random families
@dataclasses.dataclass(frozen=True)
class Setup:
    """One differential case: pools of (config, count), cluster options and the requests."""

    pools: list[tuple[InstanceConfig, int]]
    options: dict[str, Any]
    requests: list[Request]
    router_factory: Callable[[], Any] | None = None
    """A router with state of its own, made afresh for each cluster (in place of ``options``')."""


def _requests(rng: np.random.Generator, count: int, rate_rps: float, prompt: tuple[int, int], output: tuple[int, int],
              reasoning_share: float = 0.3, sessions: int = 0) -> list[Request]:
    """Poisson arrivals, log-uniform prompt and output lengths, tiers 0-2, some reasoning, SLOs."""
    arrivals = np.cumsum(rng.exponential(1.0 / rate_rps, count))
    prompts = np.exp(rng.uniform(np.log(prompt[0]), np.log(prompt[1]), count)).astype(int)
    outputs = np.exp(rng.uniform(np.log(output[0]), np.log(output[1]), count)).astype(int)
    requests = []
    for i in range(count):
        out = int(outputs[i])
        thinks = out > 1 and rng.random() < reasoning_share
        requests.append(Request(
            request_id=100 + i, arrival_s=float(arrivals[i]), prompt_tokens=int(prompts[i]), output_tokens=out,
            reasoning_tokens=int(rng.integers(1, out)) if thinks else 0, tier=int(rng.integers(0, 3)),
            slo=SLO(ttft_s=1.0, tbt_s=0.1), session_id=int(rng.integers(0, sessions)) if sessions else None))
    return requests


def _config(rng: np.random.Generator, **fields: Any) -> InstanceConfig:
    return InstanceConfig(**{"gpu": "A100-80GB", "model": "Llama-3.1-8B", "engine": "vidur-2024",
                             "scheduler": str(rng.choice(["fcfs", "priority", "sarathi"])), **fields})


def _swap_pressure(rng: np.random.Generator) -> Setup:
    block_size = int(rng.choice([8, 16, 32]))
    config = _config(rng, preemption="swap", kv_blocks=int(rng.integers(1500, 2500)) // block_size,
                     max_batch_size=int(rng.integers(8, 33)), block_size=block_size)
    return Setup([(config, 2)], {"router": "round_robin"}, _requests(rng, 60, 20.0, (20, 600), (50, 500)))


def _recompute_pressure(rng: np.random.Generator) -> Setup:
    config = _config(rng, preemption="recompute", kv_blocks=int(rng.integers(90, 200)),
                     max_batch_size=int(rng.integers(8, 33)), scheduler_options={})
    config = dataclasses.replace(config, scheduler_options={"chunk_tokens": 128} if config.scheduler == "sarathi" else {})
    return Setup([(config, 2)], {"router": "least_loaded"}, _requests(rng, 60, 12.0, (20, 600), (20, 400)))


def _long_prompts(rng: np.random.Generator) -> Setup:
    config = _config(rng, scheduler=str(rng.choice(["fcfs", "priority"])), max_batched_tokens=int(rng.integers(128, 512)),
                     preemption=str(rng.choice(["swap", "recompute"])), kv_blocks=int(rng.integers(300, 600)))
    return Setup([(config, 2)], {"router": "round_robin"}, _requests(rng, 50, 8.0, (50, 3000), (5, 200)))


def _chunked(rng: np.random.Generator) -> Setup:
    config = _config(rng, scheduler="sarathi", scheduler_options={"chunk_tokens": int(rng.integers(32, 300))},
                     preemption=str(rng.choice(["swap", "recompute"])), kv_blocks=int(rng.integers(150, 400)),
                     max_batch_size=int(rng.integers(4, 24)))
    return Setup([(config, 2)], {"router": "least_loaded"}, _requests(rng, 60, 10.0, (50, 1500), (10, 300)))


def _context(rng: np.random.Generator) -> Setup:
    """OpenLlama-3B's 2,048-token context: prompts beyond it rejected, outputs past it capped."""
    config = _config(rng, model="OpenLlama-3B", gpu=str(rng.choice(["A100-80GB", "L40S"])),
                     preemption=str(rng.choice(["swap", "recompute"])))
    return Setup([(config, 2)], {"router": "round_robin"}, _requests(rng, 40, 6.0, (100, 2600), (50, 1500)))


def _kv_capacity(rng: np.random.Generator) -> Setup:
    config = _config(rng, kv_blocks=int(rng.integers(40, 70)), preemption=str(rng.choice(["swap", "recompute"])))
    return Setup([(config, 1)], {"router": "round_robin"}, _requests(rng, 40, 5.0, (20, 1200), (5, 500)))


def _mixed_pools(rng: np.random.Generator) -> Setup:
    """Four GPU types, two models, TP 2 on one pool; least-loaded or session-affinity routing."""
    model = str(rng.choice(["Llama-3.1-8B", "Llama-2-7B"]))
    pools = [(_config(rng, gpu="A100-80GB", model=model), 2), (_config(rng, gpu="H100-80GB", model=model, tp=2), 1),
             (_config(rng, gpu="L40S", model=model, kv_blocks=300, preemption="swap"), 1),
             (_config(rng, gpu="A10", model=model, engine="vllm-0.6"), 1)]
    router = str(rng.choice(["least_loaded", "session_affinity"]))
    return Setup(pools, {"router": router}, _requests(rng, 80, 25.0, (20, 2000), (5, 400), sessions=12))


def _one_iteration_per_event(rng: np.random.Generator) -> Setup:
    config = _config(rng, kv_blocks=int(rng.integers(100, 250)), preemption=str(rng.choice(["swap", "recompute"])))
    return Setup([(config, 2)], {"router": "round_robin", "coalesce": False, "record_token_curves": True},
                 _requests(rng, 30, 8.0, (20, 800), (5, 200), reasoning_share=0.5))


def _frontend(rng: np.random.Generator) -> Setup:
    """vLLM V1: its frontend time before a request joins a queue, chunked prefill, prefix caching
    on (with nothing to share: no request carries block hashes), its CPU time per iteration."""
    config = InstanceConfig(gpu=str(rng.choice(["H100-80GB", "A100-80GB"])), model="Llama-3.1-8B", engine="vllm-v1",
                            kv_blocks=int(rng.integers(200, 600)), prefix_caching=bool(rng.integers(0, 2)))
    return Setup([(config, 2)], {"router": "least_loaded", "record_token_curves": True},
                 _requests(rng, 50, 15.0, (20, 3000), (5, 300)))


def _time_sharing(rng: np.random.Generator) -> Setup:
    """rr and PASCAL: small quanta, PASCAL's demotion of long reasoning, memory pressure."""
    scheduler = str(rng.choice(["rr", "pascal"]))
    options = {"quantum_tokens": int(rng.integers(8, 64))}
    if scheduler == "pascal":
        options["demotion_kv_tokens"] = int(rng.integers(200, 800))
    config = _config(rng, scheduler=scheduler, scheduler_options=options, kv_blocks=int(rng.integers(80, 200)),
                     preemption=str(rng.choice(["swap", "recompute"])), max_batch_size=int(rng.integers(4, 12)))
    return Setup([(config, 2)], {"router": str(rng.choice(["round_robin", "session_affinity"])),
                                 "record_token_curves": bool(rng.integers(0, 2))},
                 _requests(rng, 50, 10.0, (20, 900), (20, 300), reasoning_share=0.5, sessions=8))


def _llumnix(rng: np.random.Generator) -> Setup:
    """Llumnix-K dispatch (freeness with per-tier headroom) over two models, some requests naming
    theirs; the priority scheduler under memory pressure."""
    fractions = default_headroom_fractions(3) if rng.random() < 0.7 else np.zeros(3)
    pools = [(_config(rng, scheduler="priority", kv_blocks=int(rng.integers(90, 160)), preemption=str(
        rng.choice(["swap", "recompute"]))), 2), (_config(rng, model="Llama-2-7B", kv_blocks=300), 2)]
    requests = [dataclasses.replace(r, model=str(rng.choice(["Llama-3.1-8B", "Llama-2-7B"])) if rng.random() < 0.3 else None)
                for r in _requests(rng, 80, 30.0, (20, 1200), (50, 400))]
    return Setup(pools, {"router": make_router("llumnix", headroom_fractions=fractions)}, requests)


def _shared_prefixes(rng: np.random.Generator, scheduler: str) -> Setup:
    """Prefix caching over shared system prompts or multi-turn sessions (hashes over the answers
    too), with or without a host tier, under memory pressure; hash blocks of one to four KV blocks."""
    options = {"sarathi": {"chunk_tokens": int(rng.integers(64, 300))}, "rr": {"quantum_tokens": int(rng.integers(8, 64))},
               "pascal": {"quantum_tokens": int(rng.integers(8, 64)), "demotion_kv_tokens": int(rng.integers(200, 800))}}
    block_tokens = int(rng.choice([16, 32, 64]))
    config = _config(rng, scheduler=scheduler, scheduler_options=options.get(scheduler, {}), prefix_caching=True,
                     host_cache_gb=float(rng.choice([0.0, 0.05, 0.5])), kv_blocks=int(rng.integers(70, 180)),
                     preemption=str(rng.choice(["swap", "recompute"])), max_batch_size=int(rng.integers(4, 24)))
    if rng.random() < 0.5:
        spec = SharedPromptSpec(groups=int(rng.integers(2, 6)), prompts_per_group=int(rng.integers(4, 10)),
                                prefix_tokens=int(rng.integers(4, 20)) * 32, question_tokens=int(rng.integers(8, 96)),
                                output_tokens=1)
        requests = shared_prompt_requests(spec, PoissonArrivals(float(rng.uniform(5.0, 25.0))), rng,
                                          block_tokens=block_tokens)
        requests = [dataclasses.replace(r, output_tokens=int(o)) for r, o in
                    zip(requests, rng.integers(8, 200, len(requests)))]
    else:
        spec = SessionSpec(conversation_rate_rps=float(rng.uniform(2.0, 6.0)), min_turns=2, max_turns=4,
                           common_prefix_tokens=256, context_mean_tokens=300.0, context_median_ratio=0.8,
                           context_max_tokens=800, message_min_tokens=16, message_max_tokens=64, answer_min_tokens=16,
                           answer_max_tokens=96, think_time_s=float(rng.uniform(0.5, 3.0)))
        requests = session_requests(spec, int(rng.integers(8, 16)), rng, block_tokens=block_tokens)
    thinks = rng.random(len(requests)) < 0.3
    requests = [dataclasses.replace(r, tier=int(rng.integers(0, 3)), slo=SLO(ttft_s=1.0, tbt_s=0.1),
                                    reasoning_tokens=r.output_tokens // 2 if think and r.output_tokens > 1 else 0)
                for r, think in zip(requests, thinks)]
    router = str(rng.choice(["round_robin", "least_loaded", "session_affinity"]))
    return Setup([(config, 2)], {"router": router, "record_token_curves": bool(rng.integers(0, 2))}, requests)


def _mixed_caching(rng: np.random.Generator) -> Setup:
    """Requests with block hashes over two prefix-caching instances and one without a cache, which
    serves them without looking their prefixes up; every scheduler (``rr`` and ``pascal`` plan
    each admission through the cache check, the others only on a caching instance)."""
    setup = _shared_prefixes(rng, str(rng.choice(["fcfs", "priority", "sarathi", "rr", "pascal"])))
    config = setup.pools[0][0]
    plain = dataclasses.replace(config, prefix_caching=False, host_cache_gb=0.0)
    return dataclasses.replace(setup, pools=[*setup.pools, (plain, 1)],
                               options={**setup.options, "router": str(rng.choice(["round_robin", "least_loaded"]))})


def _pipelines(rng: np.random.Generator) -> Setup:
    """PP 2-4 with 2 to pp microbatches in flight, every scheduler, under memory pressure (so
    sequences in flight hold blocks while the next microbatch forms), a prefix cache at times."""
    pp = int(rng.integers(2, 5))
    scheduler = str(rng.choice(["fcfs", "priority", "sarathi", "rr", "pascal"]))
    options = {"sarathi": {"chunk_tokens": int(rng.integers(64, 300))}, "rr": {"quantum_tokens": int(rng.integers(8, 64))},
               "pascal": {"quantum_tokens": int(rng.integers(8, 64)), "demotion_kv_tokens": int(rng.integers(200, 800))}}
    config = _config(rng, pp=pp, microbatches_in_flight=int(rng.integers(2, pp + 1)), scheduler=scheduler,
                     scheduler_options=options.get(scheduler, {}), kv_blocks=int(rng.integers(90, 250)),
                     preemption=str(rng.choice(["swap", "recompute"])), max_batch_size=int(rng.integers(8, 33)),
                     prefix_caching=bool(rng.integers(0, 2)))
    return Setup([(config, 2)], {"router": str(rng.choice(["round_robin", "least_loaded"])),
                                 "record_token_curves": bool(rng.integers(0, 2))},
                 _requests(rng, 60, 15.0, (20, 1200), (10, 300), reasoning_share=0.4))


def _python_router_pools(rng: np.random.Generator) -> list[tuple[InstanceConfig, int]]:
    return [(_config(rng, gpu="A100-80GB", kv_blocks=int(rng.integers(150, 400)), preemption="swap"), 2),
            (_config(rng, gpu="H100-80GB", kv_blocks=int(rng.integers(150, 400))), 2)]


def _gpu_share_router(rng: np.random.Generator) -> Setup:
    """A router written in Python with state of its own, called at each arrival between the
    compiled engine's events: GPU shares by prompt length (``GpuShareRouter``)."""
    return Setup(_python_router_pools(rng), {}, _requests(rng, 70, 20.0, (20, 900), (10, 300)), lambda: GpuShareRouter(
        {"short": {"A100-80GB": 3.0, "H100-80GB": 1.0}, "long": {"A100-80GB": 1.0, "H100-80GB": 2.0}},
        lambda request: "short" if request.prompt_tokens < 300 else "long"))


def _lambda_router(rng: np.random.Generator) -> Setup:
    """A Python function reading the instances' views: the fewest requests, the highest id on ties."""
    def router(cluster: Cluster, seq: Any) -> int:
        return min(cluster.routable_ids(), key=lambda i: (cluster.instances[i].num_requests, -i))
    return Setup(_python_router_pools(rng), {"router": router}, _requests(rng, 70, 20.0, (20, 900), (10, 300)))


FAMILIES: dict[str, tuple[Callable[[np.random.Generator], Setup], Callable[[list[RequestOutcome], Setup], bool]]] = {
    "swap_pressure": (_swap_pressure, lambda out, s: any(o.num_preemptions and o.preempted_s > 0 for o in out)),
    "recompute_pressure": (_recompute_pressure, lambda out, s: any(o.num_preemptions for o in out)),
    "long_prompts": (_long_prompts, lambda out, s: any(
        o.completed and o.prompt_tokens > s.pools[0][0].max_batched_tokens for o in out)),
    "chunked": (_chunked, lambda out, s: any(
        o.completed and o.prompt_tokens > s.pools[0][0].scheduler_options["chunk_tokens"] for o in out)),
    "context": (_context, lambda out, s: {"exceeds_context"} <= {o.rejected_reason for o in out} and any(
        o.completed and o.prompt_tokens + o.output_tokens == 2048 for o in out)),
    "kv_capacity": (_kv_capacity, lambda out, s: any(o.rejected_reason == "exceeds_kv_capacity" for o in out)),
    "mixed_pools": (_mixed_pools, lambda out, s: len({o.instance_id for o in out} & {0, 2, 3, 4}) >= 3),
    "one_iteration_per_event": (_one_iteration_per_event, lambda out, s: any(
        o.completed and o.reasoning_tokens and len(o.token_curve) == o.output_tokens for o in out)),
    "time_sharing": (_time_sharing, lambda out, s: any(o.num_preemptions for o in out)),
    "llumnix": (_llumnix, lambda out, s: len({o.instance_id for o in out}) == 4 and any(
        o.num_preemptions for o in out) and all(o.instance_id in ((0, 1) if r.model == "Llama-3.1-8B" else (2, 3))
                                                for o, r in zip(sorted(out, key=lambda o: o.request_id), s.requests)
                                                if r.model and o.completed)),
    "frontend": (_frontend, lambda out, s: all(o.first_scheduled_s - o.arrival_s >= 0.017 for o in out)),
    "gpu_share_router": (_gpu_share_router, lambda out, s: len({o.instance_id for o in out}) == 4),
    "lambda_router": (_lambda_router, lambda out, s: len({o.instance_id for o in out}) == 4),
    "pipelines": (_pipelines, lambda out, s: any(o.num_preemptions for o in out)),
    "mixed_caching": (_mixed_caching, lambda out, s: {o.instance_id for o in out} == {0, 1, 2}),
}
SEEDS = range(6)


def _serve(cls: type[Cluster], setup: Setup) -> tuple[Cluster, list[RequestOutcome]]:
    inventory: dict[str, int] = {}
    for config, count in setup.pools:
        inventory[config.gpu] = inventory.get(config.gpu, 0) + count * config.num_gpus
    options = setup.options if setup.router_factory is None else {**setup.options, "router": setup.router_factory()}
    cluster = cls(inventory, **options)
    for config, count in setup.pools:
        for _ in range(count):
            cluster.deploy(config, ready_now=True)
    return cluster, cluster.run(setup.requests)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_random_workloads_give_the_python_engines_outcomes(family, seed):
    build, exercised = FAMILIES[family]
    setup = build(np.random.default_rng([seed, list(FAMILIES).index(family)]))
    python, expected = _serve(Cluster, setup)
    compiled, got = _serve(CompiledCluster, setup)
    found = outcome_mismatches(expected, got)
    assert not found, f"{family} seed {seed}: {len(found)} mismatches:\n" + "\n".join(found[:10])
    assert counters(compiled) == counters(python)
    assert exercised(expected, setup), f"{family} seed {seed} does not exercise its feature"


CACHE_SCHEDULERS = ("fcfs", "priority", "sarathi", "rr", "pascal")
CACHE_SEEDS = range(3)


def _cache_setup(scheduler: str, seed: int) -> Setup:
    return _shared_prefixes(np.random.default_rng([seed, 100 + CACHE_SCHEDULERS.index(scheduler)]), scheduler)


@pytest.mark.parametrize("seed", CACHE_SEEDS)
@pytest.mark.parametrize("scheduler", CACHE_SCHEDULERS)
def test_prefix_caching_gives_the_python_engines_outcomes_and_cache_counters(scheduler, seed):
    setup = _cache_setup(scheduler, seed)
    python, expected = _serve(Cluster, setup)
    compiled, got = _serve(CompiledCluster, setup)
    found = outcome_mismatches(expected, got)
    assert not found, f"{scheduler} seed {seed}: {len(found)} mismatches:\n" + "\n".join(found[:10])
    assert counters(compiled) == counters(python)
    assert sum(i.prefix_cache.hit_tokens for i in python.instances.values()) > 0, "no prefix was shared"


def test_the_prefix_caching_cases_preempt_evict_and_load_from_the_host_tier():
    """The proof that the cases above exercise the cache under pressure: for every scheduler,
    some case preempts; over all of them, entries are evicted, some into a host tier that later
    serves a hit, and a host tier overflows."""
    totals = []
    for scheduler in CACHE_SCHEDULERS:
        for seed in CACHE_SEEDS:
            python, outcomes = _serve(Cluster, _cache_setup(scheduler, seed))
            caches = [i.prefix_cache for i in python.instances.values()]
            totals.append((scheduler, sum(o.num_preemptions for o in outcomes),
                           *(sum(getattr(c, name) for c in caches)
                             for name in ("evicted_blocks", "host_hit_tokens", "host_dropped_blocks"))))
    assert {s for s, preempted, *_ in totals if preempted} == set(CACHE_SCHEDULERS)
    assert all(sum(row[k] for row in totals) > 0 for k in (2, 3, 4)), totals


# ----------------------------------------------------------------- decisions and arrays between events
DECISION_FAMILIES = ("swap_pressure", "recompute_pressure", "chunked", "time_sharing", "mixed_pools", "pipelines")


def _stepped(cls: type[Cluster], setup: Setup) -> Cluster:
    inventory: dict[str, int] = {}
    for config, count in setup.pools:
        inventory[config.gpu] = inventory.get(config.gpu, 0) + count * config.num_gpus
    options = {k: v for k, v in setup.options.items() if k != "router"}
    cluster = cls(inventory, router=None, track_arrays=True, external_phase_decisions=True, **options)
    for config, count in setup.pools:
        for _ in range(count):
            cluster.deploy(config, ready_now=True)
    cluster.submit(setup.requests)
    return cluster


def _arrays(cluster: Cluster) -> tuple[list[list[int]], list[list[int]]]:
    rows = len(cluster.instances)
    return cluster.arrays.table[:rows].tolist(), cluster.arrays.tier_table[:rows, :cluster.arrays.tiers].tolist()


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("family", DECISION_FAMILIES)
def test_route_decisions_clock_steps_and_arrays_follow_the_python_engine(family, seed):
    """Both engines stepped side by side with ``router=None`` and external phase decisions:
    ``advance`` to seeded random times, every arrival and every end of reasoning answered by the
    same rule (a hash over the instances that accept it: the answering phase stays or moves with
    a KV transfer). At every stop the clock, the decision, the arrivals, the outcomes so far and
    the observation arrays (every column of every instance, tiers too) are equal."""
    build, _ = FAMILIES[family]
    setup = build(np.random.default_rng([seed, 50 + DECISION_FAMILIES.index(family)]))
    python, compiled = _stepped(Cluster, setup), _stepped(CompiledCluster, setup)
    rng = np.random.default_rng(seed)
    stops = decisions = moves = stays = 0
    seen = np.zeros(7, dtype=np.int64)  # the largest queue and KV columns met at a stop
    while python.pending_requests():
        until_s = python.events.now_s + float(rng.exponential(0.4))
        ours, theirs = python.advance(until_s), compiled.advance(until_s)
        stops += 1
        assert (python.events.now_s, python.arrived, len(python.outcomes)) == (
            compiled.events.now_s, compiled.arrived, len(compiled.outcomes)), f"stop {stops}"
        assert _arrays(compiled) == _arrays(python), f"stop {stops} at {python.events.now_s} s"
        assert compiled.routable_ids() == python.routable_ids()
        seen = np.maximum(seen, compiled.arrays.table[:, :7].max(axis=0))
        if ours is None:
            assert theirs is None
            continue
        assert theirs is not None and (theirs.kind, theirs.instance_id) == (ours.kind, ours.instance_id)
        assert theirs.seq.request is ours.seq.request
        assert (theirs.seq.generated_tokens, theirs.seq.kv_tokens) == (ours.seq.generated_tokens, ours.seq.kv_tokens)
        ids = np.flatnonzero(python.accepting(ours.seq, new_request=ours.kind == "route")).tolist()
        target = ids[(ours.seq.request.request_id * 7 + ours.seq.request.prompt_tokens + stops) % len(ids)]
        if ours.kind == "route":
            python.dispatch(ours.seq, target)
            compiled.dispatch(theirs.seq, target)
            decisions += 1
        else:
            python.place_answering(ours.seq, target)
            compiled.place_answering(theirs.seq, target)
            moves += target != ours.instance_id
            stays += target == ours.instance_id
    assert compiled.advance() is None and compiled.pending_requests() == 0
    assert decisions == len(setup.requests) and stops > decisions
    assert moves and stays, (moves, stays)
    assert (seen[[0, 1, 3, 4, 5]] > 0).all() and (family != "swap_pressure" or seen[2] > 0 and seen[6] > 0), seen
    found = outcome_mismatches(python.outcomes, compiled.outcomes)
    assert not found, f"{family} seed {seed}: {len(found)} mismatches:\n" + "\n".join(found[:10])
    assert counters(compiled) == counters(python)


def _side_by_side(make: Callable[[type[Cluster]], Cluster], config: InstanceConfig, count: int,
                  requests: list[Request]) -> list[Cluster]:
    """A Python and a compiled cluster made alike, ``count`` instances of ``config`` serving the
    requests submitted."""
    clusters = []
    for cls in (Cluster, CompiledCluster):
        cluster = make(cls)
        for _ in range(count):
            cluster.deploy(config, ready_now=True)
        cluster.submit(requests)
        clusters.append(cluster)
    return clusters


def _routing(router: str) -> Any:
    return make_router("llumnix", headroom_fractions=default_headroom_fractions(3)) if router == "llumnix" else router


@pytest.mark.parametrize("router", ["round_robin", "least_loaded", "llumnix"])
@pytest.mark.parametrize("seed", range(2))
def test_roles_outside_gpu_combos_route_new_requests_as_the_python_engine(router, seed):
    """Prefill-only and decode-only instances without a decode router: a built-in router sends
    new requests to every instance but the decode-only one (``Cluster.routable_ids``), which a
    prefill-only instance then serves whole; the same outcomes and counters on both engines."""
    rng = np.random.default_rng([seed, 41])
    pools = [(_config(rng, role="aggregated"), 1), (_config(rng, role="prefill"), 2), (_config(rng, role="decode"), 1)]
    setup = Setup(pools, {}, _requests(rng, 80, 20.0, (20, 800), (10, 200)), router_factory=lambda: _routing(router))
    python, expected = _serve(Cluster, setup)
    compiled, got = _serve(CompiledCluster, setup)
    found = outcome_mismatches(expected, got)
    assert not found, f"{router} seed {seed}: {len(found)} mismatches:\n" + "\n".join(found[:10])
    assert counters(compiled) == counters(python)
    assert {o.instance_id for o in got} == {0, 1, 2}  # never 3, the decode-only instance
    assert all(o.completed for o in got)


@pytest.mark.parametrize("seed", range(3))
def test_instances_starting_up_before_the_submit_follow_the_python_engine(seed):
    """Two instances serve from the start, two are deployed before the submit with their start-up
    time (``deploy(ready_now=False)``) around an ``every()`` tick scheduled in between: the
    starting ones take requests only once started, at the same times on both engines; the
    lifecycles, the GPUs in use and the cost agree at every stop, and the outcomes at the end."""
    rng = np.random.default_rng([seed, 43])
    config = _config(rng, kv_blocks=int(rng.integers(150, 300)))
    requests = _requests(rng, 100, 30.0, (20, 800), (10, 200))
    provisioning_s = float(rng.uniform(0.0, 1.0))
    ticks: dict[type, list[float]] = {}
    clusters = []
    for cls in (Cluster, CompiledCluster):
        cluster = cls({"A100-80GB": 4}, router="least_loaded", provisioning_s=provisioning_s)
        cluster.deploy(config, ready_now=True)
        cluster.deploy(config)
        cluster.every(0.5, lambda c, seen=ticks.setdefault(cls, []): seen.append(c.events.now_s))
        cluster.deploy(config, ready_now=True)
        cluster.deploy(config)
        cluster.submit(requests)
        clusters.append(cluster)
    python, compiled = clusters
    starts = []
    while python.pending_requests():
        until_s = python.events.now_s + float(rng.exponential(0.3))
        assert python.advance(until_s) is None and compiled.advance(until_s) is None
        state = [(c.events.now_s, [i.lifecycle for i in c.instances.values()], dict(c.gpus_in_use), c.cost_usd())
                 for c in clusters]
        assert state[1] == state[0]
        starts.append(state[0][1])
    assert starts[0][1] == Lifecycle.STARTING and starts[-1][1] == Lifecycle.SERVING
    found = outcome_mismatches(python.outcomes, compiled.outcomes)
    assert not found, f"seed {seed}: {len(found)} mismatches:\n" + "\n".join(found[:10])
    assert counters(compiled) == counters(python)
    assert ticks[CompiledCluster] == ticks[Cluster] and len(ticks[Cluster]) > 2
    assert {o.instance_id for o in python.outcomes} == {0, 1, 2, 3}


@pytest.mark.parametrize("seed", range(3))
def test_python_events_scheduled_before_the_submit_run_as_in_the_python_engine(seed):
    """Events scheduled through ``events.schedule`` before the submit, between ``every()`` ticks
    and a deploy with a start-up delay, some at equal times: each runs at the same simulated time
    and in the same order on both engines; one drains an instance and one deploys another, so the
    outcomes show it."""
    rng = np.random.default_rng([seed, 47])
    config = _config(rng, kv_blocks=int(rng.integers(150, 300)))
    requests = _requests(rng, 100, 30.0, (20, 800), (10, 200))
    times = sorted(rng.uniform(0.1, 2.0, 4).round(1))
    runs: dict[type, list[tuple[str, float]]] = {}
    clusters = []
    for cls in (Cluster, CompiledCluster):
        seen = runs.setdefault(cls, [])
        cluster = cls({"A100-80GB": 4}, router="least_loaded")
        for _ in range(2):
            cluster.deploy(config, ready_now=True)
        cluster.events.schedule(times[0], lambda name, c=cluster: seen.append((name, c.events.now_s)), "first")
        cluster.every(0.5, lambda c: seen.append(("tick", c.events.now_s)))
        cluster.events.schedule(times[1], lambda _, c=cluster: c.drain(0))
        cluster.deploy(config)
        cluster.events.schedule(times[2], lambda _, c=cluster: c.deploy(config, ready_now=True))
        cluster.events.schedule(times[2], lambda name, c=cluster: seen.append((name, c.events.now_s)), "tied")
        cluster.events.schedule(times[3], lambda name, c=cluster: seen.append((name, c.events.now_s)), "last")
        cluster.submit(requests)
        assert cluster.advance() is None
        clusters.append(cluster)
    python, compiled = clusters
    assert runs[CompiledCluster] == runs[Cluster]
    assert [name for name, _ in runs[Cluster] if name != "tick"] == ["first", "tied", "last"]
    found = outcome_mismatches(python.outcomes, compiled.outcomes)
    assert not found, f"seed {seed}: {len(found)} mismatches:\n" + "\n".join(found[:10])
    assert counters(compiled) == counters(python)
    assert [i.lifecycle for i in compiled.instances.values()][0] == Lifecycle.STOPPED
    assert {o.instance_id for o in python.outcomes} == {0, 1, 2, 3}


@pytest.mark.parametrize("router", ["round_robin", "least_loaded", "llumnix"])
@pytest.mark.parametrize("seed", range(2))
def test_deploying_and_draining_while_serving_follow_the_python_engine(router, seed):
    """Both engines stepped to random times; now and then an instance is deployed (ready now or
    after its start-up time) or a serving one drained. At every stop: the clock, the lifecycles,
    the arrays, the GPUs in use and the cost so far are equal; at the end, the outcomes."""
    rng = np.random.default_rng([seed, 77])
    config = _config(rng, scheduler="priority", kv_blocks=int(rng.integers(150, 300)), preemption="swap")
    requests = _requests(rng, 120, 25.0, (20, 800), (10, 300))
    clusters = _side_by_side(lambda cls: cls({"A100-80GB": 6}, router=_routing(router), track_arrays=True, provisioning_s=0.5),
                             config, 2, requests)
    python, compiled = clusters
    steps = deployed = drained = 0
    while python.pending_requests():
        until_s = python.events.now_s + float(rng.exponential(0.5))
        assert python.advance(until_s) is None and compiled.advance(until_s) is None
        steps += 1
        state = [(c.events.now_s, [i.lifecycle for i in c.instances.values()], _arrays(c), dict(c.gpus_in_use),
                  c.cost_usd()) for c in clusters]
        assert state[1] == state[0], f"step {steps}"
        serving = [i for i, instance in python.instances.items() if instance.lifecycle == Lifecycle.SERVING]
        action = rng.random()
        if action < 0.15 and sum(python.gpus_in_use.values()) < 6:
            ready_now = bool(rng.integers(0, 2))
            assert {c.deploy(config, ready_now=ready_now) for c in clusters} == {len(python.instances) - 1}
            deployed += 1
        elif action < 0.25 and len(serving) > 1:
            target = serving[int(rng.integers(0, len(serving)))]
            for c in clusters:
                c.drain(target)
            drained += 1
    assert compiled.pending_requests() == 0 and deployed and drained
    found = outcome_mismatches(python.outcomes, compiled.outcomes)
    assert not found, f"{len(found)} mismatches:\n" + "\n".join(found[:10])
    assert counters(compiled) == counters(python)
    assert Lifecycle.STOPPED in {i.lifecycle for i in compiled.instances.values()}


@pytest.mark.parametrize("seed", range(6))
def test_live_migrations_follow_the_python_engine(seed):
    """Both engines stepped to random times; now and then the most loaded instance's migration
    candidate (queued: moved at once; running: copied in stages while it decodes, then handed
    off at an iteration boundary) goes to the least loaded one. At every stop: the clock, the
    arrays, the candidates and the migration counters are equal; at the end, the outcomes.
    Seeds 4 and 5 run pipelined instances (2 to 4 stages, 2 to pp microbatches in flight), where
    the hand-off waits for the pipeline's next wake-up, not for a full pipeline to empty."""
    rng = np.random.default_rng([seed, 88])
    pipelined: dict[str, int] = {}
    if seed >= 4:
        pipelined["pp"] = pp = int(rng.integers(2, 5))
        pipelined["microbatches_in_flight"] = int(rng.integers(2, pp + 1))
    config = _config(rng, scheduler="priority", kv_blocks=int(rng.integers(200, 400)), preemption="swap", **pipelined)
    requests = _requests(rng, 150, 30.0, (20, 800), (50, 400))
    migration = MigrationConfig(last_stage_max_blocks=int(rng.integers(2, 8)), max_stages=3)
    gpus = 4 * pipelined.get("pp", 1)
    clusters = _side_by_side(lambda cls: cls({"A100-80GB": gpus}, router="round_robin", track_arrays=True,
                                             migration=migration), config, 4, requests)
    python, compiled = clusters
    steps = live = queued = 0
    while python.pending_requests():
        until_s = python.events.now_s + float(rng.exponential(0.05))
        assert python.advance(until_s) is None and compiled.advance(until_s) is None
        steps += 1
        state = [(c.events.now_s, _arrays(c), c.migrations_started, c.migrations_done, c.migrations_aborted)
                 for c in clusters]
        assert state[1] == state[0], f"step {steps}"
        loads = [python.instances[i].num_requests for i in range(4)]
        source, target = int(np.argmax(loads)), int(np.argmin(loads))
        if source == target or rng.random() < 0.5:
            continue
        candidates = [c.instances[source].migration_candidate() for c in clusters]
        assert [None if s is None else s.request.request_id for s in candidates] == [
            None if candidates[0] is None else candidates[0].request_id] * 2
        if candidates[0] is not None:
            assert candidates[1].residency == candidates[0].residency
            running = candidates[0].residency == Residency.RUNNING
            moved = [c.migrate(s, target) for c, s in zip(clusters, candidates)]
            assert moved[0] == moved[1]
            live += moved[0] and running
            queued += moved[0] and not running
    assert compiled.pending_requests() == 0 and live and queued and python.migrations_done
    found = outcome_mismatches(python.outcomes, compiled.outcomes)
    assert not found, f"{len(found)} mismatches:\n" + "\n".join(found[:10])
    assert counters(compiled) == counters(python)


def test_a_decision_is_answered_once_on_a_serving_instance_of_its_model():
    cluster = CompiledCluster({"A100-80GB": 2}, router=None, track_arrays=True)
    cluster.deploy(_llama(), ready_now=True)
    cluster.deploy(_llama(), ready_now=True)
    cluster.submit([Request(1, 0.0, 10, 5), Request(2, 0.5, 10, 5, model="Llama-2-7B")])
    with pytest.raises(ValueError, match="run\\(\\) needs internal routers"):
        cluster.run()
    decision = cluster.advance()
    assert decision is not None and decision.seq.request_id == 1 and cluster.advance() is decision
    with pytest.raises(ValueError, match="unknown instance 5"):
        cluster.dispatch(decision.seq, 5)
    cluster.dispatch(decision.seq, 1)
    with pytest.raises(ValueError, match="dispatch\\(\\) of a request that no route decision names"):
        cluster.dispatch(decision.seq, 1)
    assert cluster.arrays.table[1, 0] == 1 and cluster.arrays.table[0, 0] == 0  # waiting on instance 1
    second = cluster.advance()
    assert second is not None and second.seq.request_id == 2 and cluster.events.now_s == 0.5
    with pytest.raises(ValueError, match="instance 0 serves Llama-3.1-8B, request needs Llama-2-7B"):
        cluster.dispatch(second.seq, 0)
    with pytest.raises(ValueError, match="read-only"):
        cluster.arrays.table[0, 0] = 7


# ----------------------------------------------------------------- the simulator goldens
@pytest.mark.parametrize("name", sorted(CASES_BY_NAME))
def test_every_simulator_golden_gives_its_recorded_table(name, monkeypatch):
    for module in (matrix, features, speed):
        monkeypatch.setattr(module, "Cluster", CompiledCluster)
    monkeypatch.setattr(features, "ComboCluster", CompiledComboCluster)
    case = CASES_BY_NAME[name]
    run = case.run()
    found = mismatches(read(DATA_DIR / f"{name}.json"), table(case.name, case.feature, run))
    assert not found, f"{len(found)} mismatches with the golden of {name}:\n{summary(found)}"



@pytest.mark.parametrize(("case", "completed"), [("a", 10_000), ("d", 12_031)])
def test_speed_runs_at_full_size(monkeypatch, case, completed):
    """simulator_speed's run (a), Vidur's 10,000 requests, and run (d), the Mooncake trace over a
    prefix cache with a host tier, on both of the benchmark's backends."""
    served: dict[str, Cluster] = {}

    def recording(name: str, cls: type[Cluster]) -> Callable[..., Cluster]:
        def make(*args: Any, **options: Any) -> Cluster:
            served[name] = cls(*args, **options)
            return served[name]
        return make

    monkeypatch.setattr(simulator_speed, "BACKENDS", {"python": recording("python", Cluster),
                                                      "compiled": recording("compiled", CompiledCluster)})
    reports = [simulator_speed.run_case(case, backend=backend) for backend in ("python", "compiled")]
    assert [report["completed"] for report in reports] == [completed, completed]
    found = outcome_mismatches(served["python"].outcomes, served["compiled"].outcomes)
    assert not found, f"{len(found)} mismatches:\n" + "\n".join(found[:10])
    assert counters(served["compiled"]) == counters(served["python"])


# ----------------------------------------------------------------- outside the subset
def _llama(**fields: Any) -> InstanceConfig:
    return InstanceConfig(gpu="A100-80GB", model="Llama-3.1-8B", engine="vidur-2024", **fields)


def _deploy_after_submit() -> None:
    cluster = CompiledCluster({"A100-80GB": 2}, router="session_affinity")
    cluster.deploy(_llama(), ready_now=True)
    cluster.submit([Request(1, 0.0, 10, 5)])
    cluster.deploy(_llama(), ready_now=True)


@pytest.mark.parametrize(("make", "named"), [
    (lambda: CompiledCluster({"A100-80GB": 1}, router=42), "router=42"),
    (lambda: CompiledCluster({"A100-80GB": 1}, decode_router=lambda c, s, i: 0), "decode_router="),
    (_deploy_after_submit, "deploy() after the workload was submitted with session_affinity"),
])
def test_a_configuration_outside_the_subset_raises_naming_it(make, named):
    with pytest.raises(ValueError, match="the compiled engine does not support") as error:
        make()
    assert named in str(error.value)


def test_the_engines_block_keys_are_set_once_between_submit_and_run_and_checked():
    """The core's own guards, which ``CompiledCluster`` never trips: keys before the submit, twice,
    after the run has started, or of blocks of no tokens raise naming the misuse."""
    engine = _core.Engine(_core.RouterSpec(), False, ["Llama-3.1-8B"], False, False)
    with pytest.raises(RuntimeError, match="once, after submit and before run"):
        engine.set_block_keys([], [0], [])
    cluster = CompiledCluster({"A100-80GB": 1})
    cluster.deploy(_llama(), ready_now=True)
    cluster.submit([Request(1, 0.0, 40, 5), Request(2, 0.5, 40, 5)])
    with pytest.raises(ValueError, match="request 1: 1 keys of -16-token blocks"):
        cluster._engine.set_block_keys([-16, 0], [0, 1, 1], [7])
    fresh = CompiledCluster({"A100-80GB": 1})
    fresh.deploy(_llama(), ready_now=True)
    fresh.submit([Request(1, 0.0, 40, 5), Request(2, 0.5, 40, 5)])
    fresh._engine.set_block_keys([16, 0], [0, 3, 3], [7, 8, 9])
    with pytest.raises(RuntimeError, match="once, after submit and before run"):
        fresh._engine.set_block_keys([16, 0], [0, 3, 3], [7, 8, 9])
    started = CompiledCluster({"A100-80GB": 1})
    started.deploy(_llama(), ready_now=True)
    started.submit([Request(1, 0.0, 40, 5), Request(2, 0.5, 40, 5)])
    started.advance(0.25)
    with pytest.raises(RuntimeError, match="once, after submit and before run"):
        started._engine.set_block_keys([0, 0], [0, 0, 0], [])


def test_sarathi_with_one_token_chunks_gives_the_python_engines_outcomes():
    """The smallest chunk Sarathi takes (1 token per prefill iteration), short prompts."""
    rng = np.random.default_rng(61)
    setup = Setup([(_config(rng, scheduler="sarathi", scheduler_options={"chunk_tokens": 1}), 2)], {},
                  _requests(rng, 30, 10.0, (2, 40), (2, 30)))
    python, expected = _serve(Cluster, setup)
    compiled, got = _serve(CompiledCluster, setup)
    assert not outcome_mismatches(expected, got)
    assert counters(compiled) == counters(python)
    assert all(o.completed for o in got)


def test_a_scheduler_registered_in_place_of_a_built_in_one_is_not_compiled(monkeypatch):
    from simulator.schedulers import SCHEDULERS
    from simulator.schedulers.fcfs import FCFSScheduler

    class Patient(FCFSScheduler):
        pass

    monkeypatch.setitem(SCHEDULERS, "fcfs", Patient)
    with pytest.raises(ValueError, match="the compiled engine does not support scheduler='fcfs'"):
        CompiledCluster({"A100-80GB": 1}).deploy(_llama(scheduler="fcfs"), ready_now=True)


@pytest.mark.parametrize("seed", range(3))
def test_queue_gates_changed_by_timers_follow_the_python_engine(seed):
    """CascadeServe's queue gate, set before the run and changed every 0.7 s by an ``every()``
    tick (lengths 1-8, waits 0-0.4 s, seeded): the same outcomes and counters on both engines."""
    rng = np.random.default_rng([seed, 99])
    config = _config(rng, kv_blocks=int(rng.integers(150, 400)), preemption=str(rng.choice(["swap", "recompute"])))
    requests = _requests(rng, 120, 25.0, (20, 800), (10, 200))
    plan = [(int(rng.integers(1, 9)), float(rng.uniform(0.0, 0.4))) for _ in range(200)]
    clusters = []
    for cls in (Cluster, CompiledCluster):
        cluster = cls({"A100-80GB": 2}, router="round_robin")
        for _ in range(2):
            cluster.deploy(config, ready_now=True)
        cluster.instances[0].set_min_queue_length(4, 0.2)
        steps = iter(plan)

        def retune(c: Cluster, steps: Any = steps) -> None:
            for instance in c.instances.values():
                instance.set_min_queue_length(*next(steps))
        cluster.every(0.7, retune)
        cluster.run(requests)
        clusters.append(cluster)
    python, compiled = clusters
    found = outcome_mismatches(python.outcomes, compiled.outcomes)
    assert not found, f"{len(found)} mismatches:\n" + "\n".join(found[:10])
    assert counters(compiled) == counters(python)
    ungated = Cluster({"A100-80GB": 2}, router="round_robin")
    for _ in range(2):
        ungated.deploy(config, ready_now=True)
    held = {o.request_id: o.first_scheduled_s for o in python.outcomes}
    assert sum(o.first_scheduled_s < held[o.request_id] for o in ungated.run(requests)) > 10  # the gates held requests


def test_hash_blocks_that_are_not_whole_kv_blocks_raise_as_in_python():
    """24-token hash blocks on 16-token KV blocks: refused where the request joins a caching
    instance, naming the request and both sizes; without prefix caching nothing reads them."""
    from simulator.request import BlockHashes

    requests = [Request(4, 0.0, 32, 4), Request(5, 0.1, 48, 4, block_hashes=BlockHashes(24, (1, 2)))]
    for cls in (Cluster, CompiledCluster):
        cluster = cls({"A100-80GB": 1})
        cluster.deploy(_llama(prefix_caching=True, block_size=16), ready_now=True)
        with pytest.raises(ValueError, match="request 5 has 24-token hash blocks, not a multiple of the instance's "
                                             "16-token KV blocks"):
            cluster.run(requests)
        plain = cls({"A100-80GB": 1})
        plain.deploy(_llama(prefix_caching=False, block_size=16), ready_now=True)
        assert [o.completed for o in plain.run(requests)] == [True, True]


def test_bad_requests_raise_as_in_python():
    for cls in (Cluster, CompiledCluster):
        cluster = cls({"A100-80GB": 1})
        cluster.deploy(_llama(), ready_now=True)
        with pytest.raises(ValueError, match="requests must be sorted by arrival; request 2 arrives at 0.5"):
            cluster.run([Request(1, 1.0, 10, 5), Request(2, 0.5, 10, 5)])
    cluster = CompiledCluster({"A100-80GB": 1})
    cluster.deploy(_llama(), ready_now=True)
    with pytest.raises(ValueError, match=r"request 3: prompt_tokens=9223372036854775808 is not an integer the compiled"):
        cluster.run([Request(2, 0.0, 10, 5), Request(3, 0.0, 2**63, 5)])


def test_a_request_for_another_model_raises_as_in_python():
    for cls in (Cluster, CompiledCluster):
        cluster = cls({"A100-80GB": 1})
        cluster.deploy(_llama(), ready_now=True)
        with pytest.raises(ValueError, match="instance 0 serves Llama-3.1-8B, request needs Llama-2-7B"):
            cluster.run([Request(1, 0.0, 10, 5, model="Llama-2-7B")])


def test_a_tier_without_a_headroom_fraction_raises_as_in_python():
    router = make_router("llumnix", headroom_fractions=[0.2, 0.1])
    requests = [Request(1, 0.0, 100, 50, tier=0), Request(2, 0.01, 100, 50, tier=3), Request(3, 0.02, 100, 50)]
    for cls in (Cluster, CompiledCluster):
        cluster = cls({"A100-80GB": 1}, router=router)
        cluster.deploy(_llama(), ready_now=True)
        with pytest.raises(ValueError, match=r"requests of tier\(s\) \[3\] on instance 0, but headroom fractions cover "
                                             r"tiers 0..1"):
            cluster.run(requests)


def test_a_stream_is_served_as_its_list():
    setup = _swap_pressure(np.random.default_rng(3))
    _, expected = _serve(Cluster, setup)
    _, got = _serve(CompiledCluster, dataclasses.replace(setup, requests=iter(setup.requests)))  # type: ignore[arg-type]
    assert outcome_mismatches(expected, got) == []


def test_segments_of_1024_iterations_sum_as_numpys_cumsum():
    """Two long decodes alone on an instance: segments of up to 1,024 iterations, which the Python
    engine sums with numpy's cumsum (above 32 iterations) and the compiled one in a loop."""
    setup = Setup([(_llama(), 1)], {"record_token_curves": True},
                  [Request(1, 0.0, 100, 3000), Request(2, 0.5, 2000, 2500, reasoning_tokens=1500)])
    python, expected = _serve(Cluster, setup)
    compiled, got = _serve(CompiledCluster, setup)
    assert outcome_mismatches(expected, got) == []
    assert counters(compiled) == counters(python)
    gaps = [b[1] - a[1] for outcome in expected for a, b in zip(outcome.token_curve, outcome.token_curve[1:])]
    assert max(gaps) == 1023  # a segment's first and last token: 1,024 iterations


def test_an_env_on_an_unknown_backend_raises_naming_it():
    import gymnasium as gym

    import envs  # noqa: F401  (registers the IDs)

    for scenario in ("default", "cauchy_autoscaling"):  # aggregated instances, GPU combos
        with pytest.raises(ValueError, match="backend 'rust': unknown; known: compiled, python"):
            gym.make("servegym/Routing-v0", scenario=scenario, backend="rust")


@pytest.mark.parametrize(("change", "named"), [
    (lambda c: setattr(c, "decode_router", lambda *a: 0), "decode_router="),
    (lambda c: setattr(c, "router", make_router("least_loaded")), "a router replaced after construction"),
])
def test_what_is_set_after_construction_and_the_engine_would_not_see_raises_at_submit(change, named):
    cluster = CompiledCluster({"A100-80GB": 1})
    cluster.deploy(_llama(), ready_now=True)
    change(cluster)
    with pytest.raises(ValueError, match="the compiled engine does not support") as error:
        cluster.run([Request(1, 0.0, 10, 5)])
    assert named in str(error.value)


@pytest.mark.parametrize("seed", range(3))
def test_a_python_phase_router_runs_inside_the_boundary_as_in_the_python_engine(seed):
    """A phase router written in Python, set after construction, sends some requests that finish
    reasoning to another instance (a KV transfer) and keeps the rest (``None`` or its own id);
    it reads the cluster as it is inside the boundary. The same calls, with the same clock and
    KV use, and the same outcomes on both engines; replaced after the submit, it raises."""
    rng = np.random.default_rng([seed, 53])
    config = _config(rng, scheduler=str(rng.choice(["fcfs", "pascal"])), kv_blocks=int(rng.integers(200, 400)))
    requests = _requests(rng, 80, 20.0, (20, 600), (20, 300), reasoning_share=0.8)
    calls: dict[type, list[tuple]] = {}
    for cls in (Cluster, CompiledCluster):
        seen = calls.setdefault(cls, [])

        def phase_router(cluster, seq, source, seen=seen):
            used = [i.kv.used_blocks for i in cluster.instances.values()]
            seen.append((cluster.events.now_s, seq.request_id, source.instance_id, used))
            target = int(np.argmin(used))
            return None if target == source.instance_id and seq.request_id % 2 else target

        cluster = cls({"A100-80GB": 3}, router="least_loaded")
        for _ in range(3):
            cluster.deploy(config, ready_now=True)
        cluster.phase_router = phase_router
        cluster.run(requests)
    assert calls[CompiledCluster] == calls[Cluster] and len(calls[Cluster]) > 20
    assert any(o.num_migrations for o in cluster.outcomes)
    python = Cluster({"A100-80GB": 3}, router="least_loaded", phase_router=phase_router)
    compiled = CompiledCluster({"A100-80GB": 3}, router="least_loaded", phase_router=phase_router)
    for c in (python, compiled):
        for _ in range(3):
            c.deploy(config, ready_now=True)
        c.run(requests)
    found = outcome_mismatches(python.outcomes, compiled.outcomes)
    assert not found, f"seed {seed}: {len(found)} mismatches:\n" + "\n".join(found[:10])
    assert counters(compiled) == counters(python)
    replaced = CompiledCluster({"A100-80GB": 1}, phase_router=phase_router)
    replaced.deploy(config, ready_now=True)
    replaced.submit(requests)
    replaced.phase_router = lambda *a: None
    with pytest.raises(ValueError, match="a phase router replaced after the submit"):
        replaced.advance()


def test_after_submit_python_events_run_in_the_engine_and_arrivals_are_read_from_it():
    cluster = CompiledCluster({"A100-80GB": 1})
    cluster.deploy(_llama(), ready_now=True)
    assert cluster.arrived_sequences == []
    cluster.run([Request(1, 0.0, 10, 5)])
    end_s = cluster.events.now_s
    assert end_s == cluster.outcomes[0].finish_s and cluster.instances[0].iterations > 0
    with pytest.raises(ValueError, match="before the clock"):
        cluster.events.schedule(end_s / 2, print)
    seen: list[tuple[str, float]] = []
    cluster.events.schedule(end_s + 1.0, lambda tag: seen.append((tag, cluster.events.now_s)), "tick")
    assert cluster.advance() is None and seen == [("tick", end_s + 1.0)]
    assert [seq.request_id for seq in cluster.arrived_sequences] == [1]
    assert cluster.instances[0].sequences() == []
    with pytest.raises(AttributeError, match="does not expose 'planner'"):
        cluster.instances[0].planner


@pytest.mark.parametrize(("env_id", "scenario", "reward"), [
    ("servegym/Routing-v0", "default", "slo_dense"), ("servegym/Routing-v0", "multitier", "slo_balance"),
    ("servegym/Routing-v0", "pascal", "ttft_dense"), ("servegym/Tier-v0", "multitier", "ttft_balance"),
    ("servegym/Migration-v0", "default", "latency_dense"), ("servegym/Scaling-v0", "default", "slo_dense"),
])
def test_dense_rewards_read_the_live_requests_of_either_backend_alike(env_id, scenario, reward):
    """The dense rewards read every arrival's live state (``arrived_sequences``): 400 steps of a
    seeded random masked policy give the same rewards, observations and infos on both backends."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers the IDs)
    from envs.random_policy import random_masked_action

    runs = []
    for backend in ("python", "compiled"):
        env = gym.make(env_id, scenario=scenario, reward=reward, backend=backend)
        rng = np.random.default_rng(5)
        observation, _ = env.reset(seed=5)
        trajectory = [observation]
        for _ in range(400):
            action = random_masked_action(env.action_space, np.asarray(env.unwrapped.action_masks()).reshape(-1), rng)
            observation, reward_value, terminated, truncated, info = env.step(action)
            trajectory.append((observation, reward_value, terminated, truncated,
                               {k: v for k, v in info.items() if k != "episode_outcomes"}))
            if terminated or truncated:
                trajectory.append(env.reset()[0])
        runs.append(trajectory)
    assert any(step[1] != 0.0 for step in runs[0][1:] if isinstance(step, tuple)), "the reward never moved"
    for ours, theirs in zip(*runs):
        np.testing.assert_equal(theirs, ours)
