"""Property tests of the simulator core on random configurations and workloads.

Every request ends exactly once, KV block accounting never goes negative or over capacity
and always equals the blocks the running sequences hold, the clock never goes back, every
completed request delivers exactly its output tokens, the KV cache is empty at the end, and
the coalesced fast path equals the one-iteration-at-a-time oracle.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hardware.gpus import get_gpu
from hardware.latency import activation_reserve_bytes
from hardware.models import get_model, kv_bytes_per_token_per_gpu, weights_per_gpu_bytes
from simulator.cluster import Cluster
from simulator.context import CONTEXT_REJECT_REASON
from simulator.instance import InstanceConfig
from simulator.request import Request
from simulator.sequence import Residency
from simulator.workloads import GammaArrivals, PoissonArrivals

MODEL = "Llama-2-7B"
GPUS = ("A100-80GB", "H100-80GB", "L40S", "A10")
SCHEDULERS = ("fcfs", "rr", "sarathi", "pascal", "priority")


def memory_utilization_for(gpu: str, tp: int, kv_fraction: float) -> float:
    """The ``memory_utilization`` that gives ``tp`` x ``gpu`` a KV cache of ``kv_fraction`` of the
    largest one it can have at utilisation 0.95, at most 16,000 tokens (the inverse of
    ``hardware.latency.kv_capacity_tokens``)."""
    model, memory_bytes = get_model(MODEL), get_gpu(gpu).memory_bytes
    fixed_bytes = weights_per_gpu_bytes(model, tp) + activation_reserve_bytes(model, tp)
    kv_bytes = kv_fraction * min(0.95 * memory_bytes - fixed_bytes, 16_000 * kv_bytes_per_token_per_gpu(model, tp))
    return (fixed_bytes + kv_bytes) / memory_bytes


@st.composite
def instance_configs(draw: st.DrawFn, scheduler: str) -> list[InstanceConfig]:
    options: dict = {}
    if scheduler == "sarathi":
        options["chunk_tokens"] = draw(st.integers(16, 1024))
    if scheduler in ("rr", "pascal"):
        options["quantum_tokens"] = draw(st.integers(1, 300))
    if scheduler == "pascal":
        options["demotion_kv_tokens"] = draw(st.integers(50, 5000))
    preemption = draw(st.sampled_from([None, "recompute", "swap"]))
    block_size = draw(st.sampled_from([1, 8, 16, 32]))
    max_batch_size = draw(st.sampled_from([2, 16, 256]))
    max_batched_tokens = draw(st.sampled_from([256, 2048, 4096]))
    configs = []
    for _ in range(draw(st.integers(1, 3))):
        gpu = draw(st.sampled_from(GPUS))
        tp = draw(st.sampled_from([1, 2]))
        kv_fraction = draw(st.floats(0.05, 1.0))  # small caches force preemption
        configs.append(
            InstanceConfig(
                gpu=gpu, model=MODEL, tp=tp, scheduler=scheduler, block_size=block_size,
                memory_utilization=memory_utilization_for(gpu, tp, kv_fraction), max_batch_size=max_batch_size,
                max_batched_tokens=max_batched_tokens, preemption=preemption, scheduler_options=options,
            )
        )
    return configs


@st.composite
def workloads(draw: st.DrawFn) -> list[Request]:
    n = draw(st.integers(1, 60))
    rate_rps = draw(st.floats(2.0, 100.0))
    cv = draw(st.sampled_from([None, 2.0, 4.0]))  # None: Poisson; else bursty Gamma
    arrivals = PoissonArrivals(rate_rps) if cv is None else GammaArrivals(rate_rps, cv)
    arrival_s = arrivals.sample_arrival_times(n, np.random.default_rng(draw(st.integers(0, 2**32 - 1))))
    requests = []
    for request_id, time_s in enumerate(arrival_s.tolist()):
        huge = draw(st.integers(0, 19)) == 0  # ~5 % larger than any KV cache drawn above and the context
        prompt = draw(st.integers(50_000, 90_000)) if huge else draw(st.integers(1, 2000))
        output = draw(st.integers(1, 1000))
        reasoning = draw(st.integers(0, output - 1)) if output > 1 and draw(st.booleans()) else 0
        tier = draw(st.integers(0, 2))
        requests.append(Request(request_id, time_s, prompt, output, reasoning_tokens=reasoning, tier=tier))
    return requests


def build_cluster(configs: list[InstanceConfig], coalesce: bool) -> Cluster:
    inventory: dict[str, int] = {}
    for config in configs:
        inventory[config.gpu] = inventory.get(config.gpu, 0) + config.num_gpus
    cluster = Cluster(inventory, coalesce=coalesce, record_token_curves=True)
    for config in configs:
        cluster.deploy(config, ready_now=True)
    return cluster


def check_kv_accounting(cluster: Cluster) -> None:
    for instance in cluster.instances.values():
        used = instance.kv.used_blocks
        assert 0 <= used <= instance.kv.total_blocks
        assert used == sum(seq.blocks for seq in instance.running)
        assert all(seq.residency == Residency.RUNNING for seq in instance.running)
        assert all(seq.blocks == 0 for seq in instance.waiting + instance.swapped)


def run_checked(configs: list[InstanceConfig], requests: list[Request]) -> Cluster:
    """Run event by event, checking the clock and KV accounting after every event."""
    cluster = build_cluster(configs, coalesce=True)
    cluster.submit(requests)
    events = cluster.events
    previous_s = events.now_s
    while len(events):
        events.pop_and_run()
        assert events.now_s >= previous_s
        previous_s = events.now_s
        check_kv_accounting(cluster)
    return cluster


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_every_request_ends_once_with_its_tokens_and_kv_is_conserved(scheduler, data):
    configs = data.draw(instance_configs(scheduler), label="configs")
    requests = data.draw(workloads(), label="requests")
    cluster = run_checked(configs, requests)
    assert cluster.pending_requests() == 0
    by_id = {o.request_id: o for o in cluster.outcomes}
    assert len(by_id) == len(cluster.outcomes) == len(requests)
    instances = list(cluster.instances.values())
    context = get_model(MODEL).context_tokens
    for position, request in enumerate(requests):
        outcome = by_id[request.request_id]
        # The default router sends the k-th arrival to instance k mod n.
        instance = instances[position % len(instances)]
        # The context rule first (simulator.context): reject a longer prompt, cap the output.
        output = min(request.output_tokens, max(context - request.prompt_tokens, 1))
        expected = (CONTEXT_REJECT_REASON if request.prompt_tokens > context
                    else "exceeds_kv_capacity" if request.prompt_tokens + output > instance.max_request_tokens else None)
        assert outcome.rejected_reason == expected
        if expected is not None:
            continue
        assert outcome.output_tokens == output
        assert outcome.instance_id == instance.instance_id
        assert request.arrival_s <= outcome.first_scheduled_s < outcome.first_token_s <= outcome.finish_s
        curve = outcome.token_curve
        assert curve[0] == (outcome.first_token_s, 1)
        assert curve[-1] == (outcome.finish_s, output)
        assert all(t0 <= t1 and n0 < n1 for (t0, n0), (t1, n1) in zip(curve, curve[1:]))
        if request.reasoning_tokens:
            assert outcome.reasoning_end_s < outcome.first_answer_token_s
    for instance in instances:
        assert instance.kv.used_blocks == 0
        assert instance.num_requests == 0 and not instance.busy


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_coalesced_segments_equal_the_one_iteration_oracle(scheduler, data):
    configs = data.draw(instance_configs(scheduler), label="configs")
    requests = data.draw(workloads(), label="requests")
    fast_cluster = build_cluster(configs, coalesce=True)
    slow_cluster = build_cluster(configs, coalesce=False)
    fast = sorted(fast_cluster.run(requests), key=lambda o: o.request_id)
    slow = sorted(slow_cluster.run(requests), key=lambda o: o.request_id)
    for f, s in zip(fast, slow, strict=True):
        assert set(f.token_curve) <= set(s.token_curve)
        assert replace(f, token_curve=()) == replace(s, token_curve=())
    assert fast_cluster.events.now_s == slow_cluster.events.now_s
    assert [i.iterations for i in fast_cluster.instances.values()] == [
        i.iterations for i in slow_cluster.instances.values()
    ]
