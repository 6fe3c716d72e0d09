"""The engine against the hardware latency model: exact single-request timings, the coalesced
fast path against one-iteration-at-a-time stepping, memory pressure and preemption."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hardware.latency import latency_model
from hardware.models import get_model
from simulator.cluster import Cluster
from simulator.instance import InstanceConfig
from simulator.request import SLO, Request
from simulator.workloads import FixedLengths, PoissonArrivals, generate_requests, length_sampler

ENGINE = "vidur-2024"  # the hand-computed expectations here use its latency model and batching

GPU, MODEL = "A100-80GB", "Llama-2-7B"


def make_cluster(instances: int = 1, coalesce: bool = True, **config) -> Cluster:
    cluster = Cluster({GPU: instances}, coalesce=coalesce, record_token_curves=True)
    for _ in range(instances):
        cluster.deploy(InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL, **config), ready_now=True)
    return cluster


def test_single_request_timings_match_the_latency_model_exactly():
    prompt, output = 300, 20
    cluster = make_cluster()
    [outcome] = cluster.run([Request(0, 0.0, prompt, output)])
    lat = latency_model(GPU, MODEL, engine=ENGINE)
    prefill_s = lat.iteration_time_s(prompt, prompt * (0 + (prompt + 1) / 2), 0, 0)
    assert outcome.ttft_s == prefill_s
    t = prefill_s
    times = [t]
    for i in range(1, output):
        # decode iteration i appends the KV of token i: context = prompt + i tokens
        t = t + lat.decode_time_s(1, prompt + i)
        times.append(t)
    assert outcome.finish_s == times[-1]
    gaps = np.diff(times)
    assert outcome.max_tbt_s == gaps.max()
    assert outcome.token_curve[0] == (times[0], 1)
    assert outcome.token_curve[-1] == (times[-1], output)


def test_single_token_request_completes_at_prefill():
    [outcome] = make_cluster().run([Request(0, 1.5, 100, 1)])
    lat = latency_model(GPU, MODEL, engine=ENGINE)
    assert outcome.finish_s == 1.5 + lat.prefill_time_s(100)
    assert outcome.ttft_s == outcome.e2e_s


def _workload(n: int, rate: float, seed: int, reasoning: bool = False, tiers: int = 1):
    rng = np.random.default_rng(seed)
    if reasoning:
        lengths = length_sampler("servegen_deepseek_r1")
    else:
        lengths = length_sampler("sharegpt")
    return generate_requests(
        PoissonArrivals(rate), lengths, n, rng, priorities="uniform" if tiers > 1 else None, num_tiers=tiers,
        slo=SLO(ttft_s=2.0, tbt_s=0.2),
    )


def _run(requests, coalesce: bool, instances: int = 2, **config):
    cluster = make_cluster(instances, coalesce=coalesce, **config)
    outcomes = cluster.run(requests)
    return sorted(outcomes, key=lambda o: o.request_id), cluster


@pytest.mark.parametrize(
    "config",
    [
        dict(scheduler="fcfs"),
        dict(scheduler="fcfs", memory_utilization=0.22),
        dict(scheduler="fcfs", memory_utilization=0.22, preemption="swap"),
        dict(scheduler="sarathi", memory_utilization=0.22, scheduler_options={"chunk_tokens": 256}),
        dict(scheduler="rr", memory_utilization=0.22, scheduler_options={"quantum_tokens": 64}),
        dict(scheduler="priority", memory_utilization=0.22),
        dict(scheduler="pascal", memory_utilization=0.25, scheduler_options={"quantum_tokens": 64, "demotion_kv_tokens": 1500}),
    ],
    ids=lambda c: "-".join(f"{v}" for v in c.values()),
)
def test_coalesced_stepping_is_bit_identical_to_single_iterations(config):
    reasoning = config["scheduler"] == "pascal"
    requests = _workload(150, rate=12.0, seed=3, reasoning=reasoning, tiers=3)
    fast, fast_cluster = _run(requests, True, **config)
    slow, slow_cluster = _run(requests, False, **config)
    assert len(fast) == len(requests)
    for f, s in zip(fast, slow):
        # The fast path records one linear piece per coalesced run, the slow path one point per
        # token: every fast breakpoint must be an exact point of the slow curve.
        assert set(f.token_curve) <= set(s.token_curve)
        assert replace(f, token_curve=()) == replace(s, token_curve=())
    assert fast_cluster.events.now_s == slow_cluster.events.now_s
    if config.get("memory_utilization"):
        assert sum(o.num_preemptions for o in fast) > 0, "the config was meant to force preemptions"
    iterations_fast = sum(i.iterations for i in fast_cluster.instances.values())
    iterations_slow = sum(i.iterations for i in slow_cluster.instances.values())
    assert iterations_fast == iterations_slow


def test_memory_pressure_preempts_and_every_request_still_completes():
    requests = _workload(200, rate=30.0, seed=1)
    outcomes, cluster = _run(requests, True, instances=1, memory_utilization=0.18)
    capacity, context = cluster.instances[0].max_request_tokens, get_model(MODEL).context_tokens
    assert (capacity, context) == (3456, 4096)  # both limits bind: KV below the context
    assert len(outcomes) == 200
    for o in outcomes:  # output_tokens is capped at the context (simulator.context)
        expected = ("exceeds_context" if o.prompt_tokens > context
                    else "exceeds_kv_capacity" if o.prompt_tokens + o.output_tokens > capacity else None)
        assert o.rejected_reason == expected
    # ShareGPT (Llama-2 tokens): 62 of these 200 prompts exceed Llama-2-7B's 4,096-token context
    assert sum(o.prompt_tokens > context for o in outcomes) == 62 and sum(o.completed for o in outcomes) > 100
    assert sum(o.num_preemptions for o in outcomes) > 0
    for instance in cluster.instances.values():
        assert instance.kv.used_blocks == 0
    for o in outcomes:
        if o.completed:
            assert o.token_curve[-1][1] == o.output_tokens


def test_request_larger_than_kv_capacity_is_rejected_with_a_reason():
    cluster = make_cluster(memory_utilization=0.18)
    capacity = cluster.instances[0].max_request_tokens
    assert capacity < get_model(MODEL).context_tokens  # the prompt fits the context, not the KV
    outcomes = cluster.run([Request(0, 0.0, capacity, 10), Request(1, 0.1, 100, 10)])
    by_id = {o.request_id: o for o in outcomes}
    assert by_id[0].rejected_reason == "exceeds_kv_capacity"
    assert by_id[1].completed


def test_littles_law_at_steady_state():
    rate = 8.0
    rng = np.random.default_rng(7)
    requests = generate_requests(PoissonArrivals(rate), FixedLengths(256, 64), 4000, rng)
    outcomes, cluster = _run(requests, True, instances=2)
    e2e = np.array([o.e2e_s for o in outcomes])
    # L = lambda W: time-average number in system vs arrival rate x mean sojourn time.
    events = sorted([(o.arrival_s, 1) for o in outcomes] + [(o.finish_s, -1) for o in outcomes])
    t_prev, in_system, area = 0.0, 0, 0.0
    for t, step in events:
        area += in_system * (t - t_prev)
        in_system += step
        t_prev = t
    mean_in_system = area / t_prev
    measured_rate = len(outcomes) / max(o.arrival_s for o in outcomes)
    assert mean_in_system == pytest.approx(measured_rate * e2e.mean(), rel=0.05)


def test_invalid_instance_configs_raise_naming_the_value():
    with pytest.raises(ValueError, match="block_size"):
        InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL, block_size=0).validate()
    with pytest.raises(ValueError, match="memory_utilization"):
        InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL, memory_utilization=1.5).validate()
    with pytest.raises(ValueError, match="preemption"):
        InstanceConfig(engine=ENGINE, gpu=GPU, model=MODEL, preemption="drop").validate()
    with pytest.raises(ValueError, match="unknown scheduler 'lifo'"):
        make_cluster(scheduler="lifo")
    with pytest.raises(ValueError, match="H900"):
        Cluster({"H900": 1})


def test_a_transferred_request_is_counted_after_the_iterations_finished_by_now_hold_their_blocks():
    """Instance.accept_running counts the blocks of the decode iterations finished by now but not
    applied yet (``unsynced_kv_blocks``): here a 200-token decode on a 20-block pool has run dozens of iterations
    past its last applied one (6 blocks held, more once applied), and a request needing 14 blocks
    arrives. Without them it fit the 14 free blocks, then the sync before the allocation took
    some and the allocation raised "KV over-allocation"; now it waits with the swapped requests."""
    from simulator.sequence import Residency, Sequence

    cluster = Cluster({"A100-80GB": 1}, router="round_robin")
    instance = cluster.instances[cluster.deploy(InstanceConfig(
        gpu="A100-80GB", model="Llama-3.1-8B", engine="vidur-2024", kv_blocks=20, block_size=16), ready_now=True)]
    cluster.submit([Request(1, 0.0, 80, 200)])
    cluster.advance(until_s=1.0)
    grown = instance.unsynced_kv_blocks()
    assert instance.kv.used_blocks == 6 and 20 - 6 - grown < 14 <= 20 - 6
    moving = Sequence(Request(2, 0.5, 200, 100), False)
    moving.generated_tokens, moving.kv_tokens, moving.residency = 24, 223, Residency.MOVING  # 14 blocks with its next slot
    assert not instance.accept_running(moving)
    instance.accept_transferred(moving)
    assert moving.residency == Residency.SWAPPED and instance.swapped == [moving]
    assert (instance.kv.used_blocks, instance.unsynced_kv_blocks()) == (6, grown)  # counted, not applied


def test_a_transferred_request_leaves_room_for_the_iteration_under_way():
    """Instance.accept_running also counts the growth of the decode iteration in progress
    (``committed_kv_blocks``): the re-plan after a join keeps that iteration and applies its
    tokens at its end. Here an 80-token prompt decodes on a 20-block pool; at 0.2615 s its 6 blocks
    are applied, no finished iteration is pending, and the iteration under way takes the
    decode into a 7th block. A request needing 14 blocks fits the 14 free ones by
    ``unsynced_kv_blocks`` alone; taking it raised "KV over-allocation" at that iteration's end
    (found by a Migration-v0 episode on small KV pools). It now waits with the swapped requests;
    once the iteration ended (0.28 s), one of 13 blocks joins the batch, and the run goes on."""
    from simulator.sequence import Residency, Sequence

    def moving(request_id: int, kv_tokens: int) -> Sequence:
        seq = Sequence(Request(request_id, 0.1, kv_tokens - 20, 100), False)
        seq.generated_tokens, seq.kv_tokens, seq.residency = 20, kv_tokens, Residency.MOVING
        return seq

    cluster = Cluster({"A100-80GB": 1}, router="round_robin")
    instance = cluster.instances[cluster.deploy(InstanceConfig(
        gpu="A100-80GB", model="Llama-3.1-8B", engine="vidur-2024", kv_blocks=20, block_size=16), ready_now=True)]
    cluster.submit([Request(1, 0.0, 80, 200)])
    cluster.advance(until_s=0.2615)
    assert (instance.kv.used_blocks, instance.unsynced_kv_blocks(), instance.committed_kv_blocks()) == (6, 0, 1)
    large = moving(2, 223)  # ceil(224 / 16) = 14 blocks with its next token's slot
    instance.accept_transferred(large)
    assert large.residency == Residency.SWAPPED and instance.kv.used_blocks == 6
    cluster.advance(until_s=0.28)
    # The 7th block is applied; the re-planned iteration under way stays within it.
    assert (instance.kv.used_blocks, instance.unsynced_kv_blocks(), instance.committed_kv_blocks()) == (7, 0, 0)
    smaller = moving(3, 207)  # 13 blocks: 20 − 7 now
    assert instance.accept_running(smaller) and instance.kv.used_blocks == 7 + 13
    cluster.advance(until_s=0.35)
    assert instance.kv.used_blocks <= 20
