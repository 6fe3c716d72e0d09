"""Golden cases of the engine's features beyond the scheduler matrix: PD disaggregation over
GPU combos, Llumnix-style live migration, CascadeServe's queue gate, reasoning requests placed
at ``</think>`` by a PASCAL-style phase router (as a hook and as external decisions), the
one-iteration-per-event path (``coalesce=False``), a stream extended by ``add_arrival``, a model
cascade, deploy/drain with start-up delays, rejections, and pipelined token curves."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from simulator.cascade import assign_cascade_quality
from simulator.cluster import Cluster, MigrationConfig
from simulator.combo_cluster import ComboCluster
from simulator.combos import Combo
from simulator.headroom import default_headroom_fractions, freeness_full
from simulator.instance import Instance, InstanceConfig, Lifecycle
from simulator.request import SLO, Phase, Request
from simulator.routers import make_router
from simulator.routers.cascade import CascadeRouter
from simulator.sequence import Residency, Sequence
from simulator.workloads import FixedLengths, PoissonArrivals, generate_requests, length_sampler, stream_requests
from tests.sim_golden.matrix import SHARED_PROMPTS
from tests.sim_golden.matrix import _run as matrix_run
from tests.sim_golden.run import Case, Run, all_of, finished, positive, same_outcomes

A100, H100, L40S = "A100-80GB", "H100-80GB", "L40S"
LLAMA3, LLAMA2 = "Llama-3.1-8B", "Llama-2-7B"
REASONING_MODEL = "DeepSeek-R1-Distill-Qwen-7B"


def _requests(rate_rps: float, lengths: str, count: int, seed: int, **options: Any) -> list[Request]:
    return generate_requests(PoissonArrivals(rate_rps), length_sampler(lengths), count, np.random.default_rng(seed),
                             **options)


# ----------------------------------------------------------------- round-robin batches over shared prefixes
def _round_robin_shared_prompts(scheduler: str, preemption: str) -> Run:
    """rr / pascal on the matrix's shared-prompt load: preempting the only holders of a prompt's
    cached prefix lets it be evicted before the admission planned on it, and the batch ends there."""
    return matrix_run(scheduler, "cache", "pp1", preemption, SHARED_PROMPTS)


# ----------------------------------------------------------------- PD disaggregation (Cauchy §3.4.2)
def _combos(instance_scheduler: str) -> Run:
    """A 1P2D combo (H800 prefill, two H20 decode instances) beside an aggregated H800 combo."""
    cluster = ComboCluster({"H800-SXM": 2, "H20-NVL": 2}, instance_scheduler=instance_scheduler,
                           record_token_curves=True)
    cluster.deploy_combo(Combo("H800-SXM", 1, "H20-NVL", 2), LLAMA3, ready_now=True)
    cluster.deploy_combo(Combo("H800-SXM", 1), LLAMA3, ready_now=True)
    cluster.run(_requests(12.0, "sharegpt", 60, seed=11, slo=SLO(ttft_s=1.0, tbt_s=0.1)))
    return finished(cluster, in_place_dispatches=cluster.in_place_dispatches)


# ----------------------------------------------------------------- live migration (Llumnix-K §3.5)
MIGRATE_OUT_FREENESS = 3.0
"""Llumnix's migrate-out threshold: an instance below 3 free blocks per request gives one away."""


def _migration_candidate(instance: Instance, moved: set[int]) -> Sequence | None:
    """The last waiting request, else the running decode request with the fewest KV tokens
    (lowest id on ties); never one that moved before."""
    waiting = [seq for seq in instance.waiting if seq.request_id not in moved]
    if waiting:
        return waiting[-1]
    running = [seq for seq in instance.running
               if seq.in_decode and not seq.pd_handoff and seq.request_id not in moved]
    return min(running, key=lambda seq: (seq.kv_tokens, seq.request_id), default=None)


def _migration() -> Run:
    """Four instances under Llumnix-K dispatch (3 tiers, the paper's headroom); every 50 ms the
    least free instance below the threshold moves a request to the freest one, in stages of at
    most 3 with a last stage of at most 4 blocks."""
    fractions = default_headroom_fractions(3)
    cluster = Cluster({A100: 4}, router=make_router("llumnix", headroom_fractions=fractions),
                      migration=MigrationConfig(last_stage_max_blocks=4, max_stages=3), track_arrays=True,
                      record_token_curves=True)
    for _ in range(4):
        cluster.deploy(InstanceConfig(gpu=A100, model=LLAMA3, scheduler="priority", kv_blocks=300), ready_now=True)
    moved: set[int] = set()
    started = {"live": 0, "queued": 0, "refused": 0}

    def rebalance(c: Cluster) -> None:
        ids = c.routable_ids()
        free = {i: freeness_full(c.instances[i], fractions) for i in ids}
        source, target = min(ids, key=lambda i: (free[i], i)), max(ids, key=lambda i: (free[i], -i))
        if source == target or not free[source] < MIGRATE_OUT_FREENESS:
            return
        seq = _migration_candidate(c.instances[source], moved)
        if seq is None:
            return
        kind = "queued" if seq.residency == Residency.QUEUED else "live"
        if c.migrate(seq, target):
            moved.add(seq.request_id)
            started[kind] += 1
        else:
            started["refused"] += 1

    cluster.every(0.05, rebalance)
    cluster.run(_requests(14.0, "sharegpt", 150, seed=12, priorities="uniform", num_tiers=3,
                          slo=SLO(ttft_s=1.0, tbt_s=0.1)))
    return finished(cluster, live_migrations=started["live"], queued_migrations=started["queued"],
                    migrations_refused=started["refused"])


# ----------------------------------------------------------------- CascadeServe's queue gate
def _queue_gate(min_length: int) -> Run:
    """Two Llama-2-7B instances at 30 % memory whose prefills wait for ``min_length`` queued
    requests or 0.2 s (``min_length=1``: no gate); ShareGPT prompts over the 4k context are
    rejected."""
    cluster = Cluster({A100: 2}, record_token_curves=True)
    config = InstanceConfig(engine="vidur-2024", gpu=A100, model=LLAMA2, memory_utilization=0.3)
    for _ in range(2):
        instance_id = cluster.deploy(config, ready_now=True)
        cluster.instances[instance_id].set_min_queue_length(min_length, 0.2)
    cluster.run(_requests(8.0, "sharegpt", 60, seed=1))
    return finished(cluster)


def _gate_changes_outcomes(run: Run, runs: Mapping[str, Run]) -> list[str]:
    return ["outcomes equal those without the gate"] if same_outcomes(run, _queue_gate(1)) else []


# ----------------------------------------------------------------- PASCAL placement at </think>
def _reasoning_requests(count: int, seed: int) -> list[Request]:
    return _requests(3.0, "servegen_deepseek_r1", count, seed, slo=SLO(ttft_s=2.0, tbt_s=0.1, ttfat_s=20.0))


def _pascal_cluster(**options: Any) -> Cluster:
    cluster = Cluster({H100: 3}, record_token_curves=True, **options)
    for _ in range(3):
        cluster.deploy(InstanceConfig(gpu=H100, model=REASONING_MODEL, scheduler="pascal", kv_blocks=1500,
                                      scheduler_options={"quantum_tokens": 500, "demotion_kv_tokens": 5000}),
                       ready_now=True)
    return cluster


def _reasoning_load(instance: Instance) -> int:
    """Requests still reasoning on ``instance`` and not demoted (PASCAL's high-priority queue)."""
    return sum(seq.phase == Phase.REASONING and not seq.demoted for seq in instance.sequences())


def _answer_target(cluster: Cluster, source: Instance) -> int:
    """Algorithm 2's shape (PASCAL §IV-B): the serving instance with the fewest reasoning
    requests, the source on ties, then the lowest id."""
    ids = [i for i, instance in cluster.instances.items() if instance.lifecycle == Lifecycle.SERVING]
    return min(ids, key=lambda i: (_reasoning_load(cluster.instances[i]), i != source.instance_id, i))


def _least_kv(cluster: Cluster) -> int:
    """Algorithm 1's shape: the instance with the fewest KV blocks in use, lowest id on ties."""
    return min(cluster.routable_ids(), key=lambda i: (cluster.instances[i].kv_used_blocks_now(), i))


def _pascal_phase_router() -> Run:
    cluster = _pascal_cluster(router=lambda c, seq: _least_kv(c),
                              phase_router=lambda c, seq, source: _answer_target(c, source))
    cluster.run(_reasoning_requests(60, seed=13))
    return finished(cluster)


def _pascal_external_decisions() -> Run:
    """The same placement answered from outside, as Routing-v0 does: ``advance`` stops at each
    arrival and each ``</think>``."""
    cluster = _pascal_cluster(router=None, external_phase_decisions=True)
    cluster.submit(_reasoning_requests(60, seed=14))
    decisions = {"route": 0, "phase": 0, "moved": 0}
    while (decision := cluster.advance()) is not None:
        decisions[decision.kind] += 1
        if decision.kind == "route":
            cluster.dispatch(decision.seq, _least_kv(cluster))
            continue
        source = cluster.instances[decision.instance_id]
        target = _answer_target(cluster, source)
        decisions["moved"] += target != source.instance_id
        cluster.place_answering(decision.seq, target)
    return finished(cluster, route_decisions=decisions["route"], phase_decisions=decisions["phase"],
                    phase_moves=decisions["moved"])


# ----------------------------------------------------------------- one iteration per event
def _iteration_by_iteration(coalesce: bool) -> Run:
    """Two instances with small KV pools (preemptions), reasoning requests, one iteration per
    event (``coalesce=False``) or coalesced segments."""
    cluster = Cluster({A100: 2}, coalesce=coalesce, record_token_curves=True)
    for preemption in ("recompute", "swap"):
        cluster.deploy(InstanceConfig(gpu=A100, model=LLAMA3, scheduler="fcfs", preemption=preemption, kv_blocks=200),
                       ready_now=True)
    requests = _requests(6.0, "servegen_deepseek_r1", 30, seed=15)
    cluster.run([dataclasses.replace(r, output_tokens=min(r.output_tokens, 200),
                                     reasoning_tokens=min(r.reasoning_tokens, 100)) for r in requests])
    return finished(cluster)


def _coalesced_equal_but_finer(run: Run, runs: Mapping[str, Run]) -> list[str]:
    """Every field but the token curve equals the coalesced run's, and the curve is finer."""
    coalesced = _iteration_by_iteration(True)
    problems = positive("preemptions")(run, runs)
    if [repr(dataclasses.replace(o, token_curve=())) for o in run.outcomes] != [
            repr(dataclasses.replace(o, token_curve=())) for o in coalesced.outcomes]:
        problems.append("outcomes differ from the coalesced run's beyond the token curves")
    if not run.counters["token_curve_points"] > coalesced.counters["token_curve_points"]:
        problems.append("token curves no finer than the coalesced run's")
    return problems


# ----------------------------------------------------------------- a stream extended by add_arrival
def _stream_with_arrivals() -> Run:
    """A lazily generated stream of 40 requests; each completed request with an even id brings a
    follow-up from its client (closed loop), sent at once or after a think time, 20 at most."""
    rng = np.random.default_rng(16)
    cluster = Cluster({A100: 2}, keep_sequences=False, record_token_curves=True)
    for _ in range(2):
        cluster.deploy(InstanceConfig(gpu=A100, model=LLAMA3), ready_now=True)
    added = [0]

    def follow_up(c: Cluster, instance: Instance, seq: Sequence) -> bool:
        if seq.request_id % 2 == 0 and added[0] < 20:
            think_s = float(rng.choice([0.0, 0.5]))
            prompt, output = int(rng.integers(50, 1500)), int(rng.integers(10, 300))
            c.add_arrival(Request(1000 + added[0], c.events.now_s + think_s, prompt, output))
            added[0] += 1
        return True

    cluster.completion_hook = follow_up
    cluster.run(stream_requests(PoissonArrivals(10.0), length_sampler("sharegpt"), 40, rng, chunk_requests=16))
    return finished(cluster, added_arrivals=added[0])


# ----------------------------------------------------------------- a model cascade (Cascadia §3.3)
def _cascade() -> Run:
    """Llama-3.1-8B (two instances) then Llama-3.1-70B at TP 4; answers scored below 70 go on."""
    small, large = LLAMA3, "Llama-3.1-70B"
    rng = np.random.default_rng(17)
    requests = generate_requests(PoissonArrivals(6.0), FixedLengths(200, 30), 100, rng)
    assign_cascade_quality(requests, [small, large], rng)
    router = CascadeRouter([small, large], [70.0])
    cluster = Cluster({H100: 6}, record_token_curves=True, **router.cluster_options())
    for model, tp in ((small, 1), (small, 1), (large, 4)):
        cluster.deploy(InstanceConfig(engine="vidur-2024", gpu=H100, model=model, tp=tp), ready_now=True)
    cluster.run(requests)
    forwarded = sum(cluster.instances[o.instance_id].model.name == large for o in cluster.outcomes)
    return finished(cluster, forwarded=forwarded)


# ----------------------------------------------------------------- deploy and drain
def _scaling() -> Run:
    """Starts with one A100 and one L40S; deploys an A100 at 1 s (serving after its weight load
    and 2 s of provisioning), drains the first A100 at 4 s and the L40S at 6 s, deploys an L40S at
    7 s."""
    cluster = Cluster({A100: 2, L40S: 2}, provisioning_s=2.0)
    first = cluster.deploy(InstanceConfig(gpu=A100, model=LLAMA3), ready_now=True)
    l40s = cluster.deploy(InstanceConfig(gpu=L40S, model=LLAMA3), ready_now=True)
    plan = {1: lambda c: c.deploy(InstanceConfig(gpu=A100, model=LLAMA3)), 4: lambda c: c.drain(first),
            6: lambda c: c.drain(l40s), 7: lambda c: c.deploy(InstanceConfig(gpu=L40S, model=LLAMA3))}
    ticks = [0]

    def act(c: Cluster) -> None:
        ticks[0] += 1
        if ticks[0] in plan:
            plan[ticks[0]](c)

    cluster.every(1.0, act)
    cluster.run(_requests(8.0, "sharegpt", 80, seed=18))
    stopped = sum(instance.lifecycle == Lifecycle.STOPPED for instance in cluster.instances.values())
    return finished(cluster, deployed=len(cluster.instances), stopped=stopped)


# ----------------------------------------------------------------- rejections and context caps
def _rejections() -> Run:
    """Llama-2-7B (4k context) on a 100-block pool: prompts over the context or over the pool are
    rejected, outputs past the context capped."""
    cluster = Cluster({A100: 1}, record_token_curves=True)
    cluster.deploy(InstanceConfig(engine="vidur-2024", gpu=A100, model=LLAMA2, kv_blocks=200), ready_now=True)
    requests = _requests(4.0, "sharegpt", 50, seed=19)
    extra = [Request(1000, 1.0, 3000, 2000), Request(1001, 1.5, 5000, 10), Request(1002, 2.0, 4100, 10)]
    cluster.run(sorted(requests + extra, key=lambda r: r.arrival_s))
    reasons = [o.rejected_reason for o in cluster.outcomes if not o.completed]
    return finished(cluster, **{f"rejected_{reason}": reasons.count(reason) for reason in sorted(set(reasons))})


# ----------------------------------------------------------------- token curves of a pipeline
def _pipeline_token_curves() -> Run:
    """pp 2 with two microbatches in flight, token curves recorded (one point per token)."""
    cluster = Cluster({A100: 2}, record_token_curves=True)
    cluster.deploy(InstanceConfig(gpu=A100, model=LLAMA3, pp=2, kv_blocks=400, max_batch_size=8), ready_now=True)
    requests = _requests(8.0, "sharegpt", 16, seed=20)
    cluster.run([dataclasses.replace(r, output_tokens=min(r.output_tokens, 150)) for r in requests])
    return finished(cluster)


FEATURE_CASES = [
    Case("rr_shared_prompts_swap", "rr over shared system prompts with prefix caching, preemption by swap",
         lambda: _round_robin_shared_prompts("rr", "swap"), positive("preemptions", "prefix_cache_hit_tokens")),
    Case("pascal_shared_prompts_recompute", "pascal over shared system prompts with prefix caching, preemption "
         "by recompute", lambda: _round_robin_shared_prompts("pascal", "recompute"),
         positive("preemptions", "prefix_cache_hit_tokens")),
    Case("pd_combos_opportunistic", "PD disaggregation: a 1P2D combo beside an aggregated one, Cauchy's "
         "opportunistic in-place scheduling", lambda: _combos("opportunistic"),
         positive("in_place_dispatches", "migrations")),
    Case("pd_combos_basic_rr", "PD disaggregation: always prefill then decode, decode instances in turn",
         lambda: _combos("basic_rr"), positive("migrations")),
    Case("migration_llumnix", "live migration (queued at once, running in stages) under Llumnix-K dispatch "
         "with 3 tiers", _migration, positive("live_migrations", "queued_migrations", "migrations_done")),
    Case("queue_gate", "CascadeServe's minimum queue length (6 requests or 0.2 s)", lambda: _queue_gate(6),
         all_of(positive("rejected"), _gate_changes_outcomes)),
    Case("pascal_phase_router", "reasoning requests on the pascal scheduler, answers placed at </think> by a "
         "phase router", _pascal_phase_router, positive("migrations")),
    Case("pascal_external_decisions", "the same placement answered outside the cluster (route and phase "
         "decisions)", _pascal_external_decisions, positive("route_decisions", "phase_decisions", "phase_moves")),
    Case("coalesce_off", "one iteration per event (coalesce=False), recompute and swap instances",
         lambda: _iteration_by_iteration(False), _coalesced_equal_but_finer),
    Case("stream_add_arrival", "a lazily generated stream extended by add_arrival from a completion hook",
         _stream_with_arrivals, positive("added_arrivals")),
    Case("cascade", "a two-model cascade (completion hook re-submitting judged-out answers)", _cascade,
         positive("forwarded")),
    Case("scaling", "deploy with start-up delay, drain while serving, cost of GPUs held", _scaling,
         positive("stopped", "cost_usd")),
    Case("rejections", "rejection over the context and over the KV pool, outputs capped at the context",
         _rejections, positive("rejected_exceeds_context", "rejected_exceeds_kv_capacity", "context_truncated")),
    Case("pipeline_token_curves", "pp 2 with 2 microbatches in flight, token curves recorded",
         _pipeline_token_curves, positive("token_curve_points")),
]
