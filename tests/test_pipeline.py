"""Pipeline parallelism with microbatches in flight: the one-batch oracle, hand-timed
microbatches, the slowest-stage bound, Cascadia's TP-vs-PP ordering, and bad configs."""

from __future__ import annotations

import numpy as np
import pytest

import simulator.cluster
from hardware.latency import latency_model
from simulator.cluster import Cluster
from simulator.instance import Instance, InstanceConfig
from simulator.pipeline import PipelinedInstance, create_instance
from simulator.request import SLO, Request
from simulator.workloads import FixedLengths, PoissonArrivals, generate_requests, length_sampler

ENGINE = "vidur-2024"  # the hand-computed expectations here use its latency model and batching

GPU = "A100-80GB"


def _cluster(pools: int, pipelined: bool, coalesce: bool = False, gpu: str = GPU, **config) -> Cluster:
    cfg = InstanceConfig(engine=ENGINE, gpu=gpu, **config)
    cluster = Cluster({gpu: pools * cfg.num_gpus}, coalesce=coalesce, record_token_curves=True)
    for _ in range(pools):
        cluster.deploy(cfg, ready_now=True)
    assert all(isinstance(i, PipelinedInstance) == pipelined for i in cluster.instances.values())
    return cluster


def _workload(n: int, rate: float, seed: int, reasoning: bool = False) -> list[Request]:
    lengths = length_sampler("servegen_deepseek_r1" if reasoning else "sharegpt")
    return generate_requests(
        PoissonArrivals(rate), lengths, n, np.random.default_rng(seed), priorities="uniform", num_tiers=3,
        slo=SLO(ttft_s=2.0, tbt_s=0.2),
    )


ORACLE_CONFIGS = [
    dict(scheduler="fcfs"),
    dict(scheduler="fcfs", memory_utilization=0.12),
    dict(scheduler="fcfs", memory_utilization=0.12, preemption="swap"),
    dict(scheduler="sarathi", memory_utilization=0.12, scheduler_options={"chunk_tokens": 256}),
    dict(scheduler="rr", memory_utilization=0.12, scheduler_options={"quantum_tokens": 64}),
    dict(scheduler="priority", memory_utilization=0.12),
    dict(scheduler="pascal", memory_utilization=0.14, scheduler_options={"quantum_tokens": 64, "demotion_kv_tokens": 1500}),
]


@pytest.mark.parametrize("config", ORACLE_CONFIGS, ids=lambda c: "-".join(f"{v}" for v in c.values()))
def test_one_microbatch_in_flight_is_bit_identical_to_the_instance(config, monkeypatch):
    requests = _workload(150, rate=12.0, seed=3, reasoning=config["scheduler"] == "pascal")
    common = dict(model="Llama-2-7B", pp=2, microbatches_in_flight=1, **config)
    reference = _cluster(2, pipelined=False, **common)
    expected = sorted(reference.run(requests), key=lambda o: o.request_id)
    monkeypatch.setattr(
        simulator.cluster, "create_instance", lambda i, cfg, events, host, coalesce: PipelinedInstance(i, cfg, events, host)
    )
    pipelined = _cluster(2, pipelined=True, **common)
    got = sorted(pipelined.run(requests), key=lambda o: o.request_id)
    assert len(got) == len(requests)
    assert got == expected
    assert pipelined.events.now_s == reference.events.now_s
    for ours, theirs in zip(pipelined.instances.values(), reference.instances.values()):
        assert (ours.iterations, ours.busy_time_s) == (theirs.iterations, theirs.busy_time_s)
    if config.get("memory_utilization"):
        assert sum(o.num_preemptions for o in got) > 0, "the config was meant to force preemptions"


def test_two_microbatches_overlap_in_the_stages_by_hand():
    # Two one-token requests at t=0; max_batch_size 2 over 2 microbatches = 1 sequence each.
    lat = latency_model(GPU, "Llama-2-13B", pp=2, engine=ENGINE)
    latency_s = lat.prefill_time_s(512)
    stage0_s, stage1_s = lat.stage_times_s(512, 1, latency_s)
    assert stage0_s > stage1_s  # stage 0 also carries the CPU overhead, embedding and send
    requests = [Request(0, 0.0, 512, 1), Request(1, 0.0, 512, 1)]
    pipelined = _cluster(1, pipelined=True, model="Llama-2-13B", pp=2, max_batch_size=2)
    first, second = sorted(pipelined.run(requests), key=lambda o: o.request_id)
    assert first.finish_s == latency_s
    # The second starts when stage 0 frees and never waits for stage 1 (stage 0 is slower).
    assert second.finish_s == stage0_s + latency_s
    one_at_a_time = _cluster(1, pipelined=False, model="Llama-2-13B", pp=2, max_batch_size=2, microbatches_in_flight=1)
    first, second = sorted(one_at_a_time.run(requests), key=lambda o: o.request_id)
    # One microbatch in flight: the batch cap is not split, both prefill together.
    assert first.finish_s == second.finish_s == lat.iteration_time_s(1024, 2 * 512 * 256.5, 0, 0)


def test_steady_state_spacing_is_the_slowest_stage():
    lat = latency_model(GPU, "Llama-2-13B", pp=4, engine=ENGINE)
    latency_s = lat.prefill_time_s(512)
    slowest_s = max(lat.stage_times_s(512, 1, latency_s))
    requests = [Request(i, 0.0, 512, 1) for i in range(40)]
    cluster = _cluster(1, pipelined=True, model="Llama-2-13B", pp=4, max_batch_size=4)
    finish = np.array(sorted(o.finish_s for o in cluster.run(requests)))
    assert finish[0] == latency_s
    np.testing.assert_allclose(np.diff(finish), slowest_s, rtol=1e-9)
    # Four stages in flight finish 40 prompts in about latency + 39 slowest stages, not 40 latencies.
    assert finish[-1] == pytest.approx(latency_s + 39 * slowest_s, rel=1e-9)
    assert finish[-1] < 40 * latency_s / 3


def test_a_lone_request_gains_nothing_from_pipelining():
    # Each decode step needs the previous token, so one sequence is never in two microbatches.
    prompt, output = 300, 20
    [outcome] = _cluster(1, pipelined=True, model="Llama-2-13B", pp=2).run([Request(0, 0.0, prompt, output)])
    lat = latency_model(GPU, "Llama-2-13B", pp=2, engine=ENGINE)
    t = lat.iteration_time_s(prompt, prompt * (prompt + 1) / 2, 0, 0)
    for i in range(1, output):
        t = t + lat.decode_time_s(1, prompt + i)
    assert outcome.finish_s == t


@pytest.mark.parametrize("config", ORACLE_CONFIGS, ids=lambda c: "-".join(f"{v}" for v in c.values()))
def test_microbatches_keep_every_request_and_free_all_memory(config):
    requests = _workload(150, rate=12.0, seed=5, reasoning=config["scheduler"] == "pascal")
    runs = []
    for _ in range(2):
        cluster = _cluster(2, pipelined=True, model="Llama-2-7B", pp=2, **config)
        runs.append(sorted(cluster.run(requests), key=lambda o: o.request_id))
        assert len(runs[-1]) == len(requests)
        assert all(o.completed or o.rejected_reason in ("exceeds_kv_capacity", "exceeds_context") for o in runs[-1])
        for instance in cluster.instances.values():
            assert instance.kv.used_blocks == 0 and not instance.in_flight and not instance.busy
    assert runs[0] == runs[1]


def test_a_request_migrates_off_a_pipelined_instance():
    requests = [Request(i, 0.0, 200, 400) for i in range(6)]
    cluster = Cluster({GPU: 4}, router=lambda c, seq: 0)
    for _ in range(2):
        cluster.deploy(InstanceConfig(engine=ENGINE, gpu=GPU, model="Llama-2-7B", pp=2), ready_now=True)
    cluster.submit(requests)
    cluster.advance(until_s=1.0)
    source = cluster.instances[0]
    seq = next(s for s in source.running if s.in_decode)
    assert cluster.migrate(seq, 1)
    outcomes = cluster.run()
    assert len(outcomes) == 6 and all(o.completed for o in outcomes)
    assert cluster.migrations_done == 1
    moved = next(o for o in outcomes if o.request_id == seq.request_id)
    assert moved.num_migrations >= 1


def _throughput_rps(tp: int, pp: int, **config) -> float:
    requests = generate_requests(PoissonArrivals(50.0), FixedLengths(1600, 16), 400, np.random.default_rng(1))
    cluster = Cluster({"H100-80GB": 4})
    cluster.deploy(InstanceConfig(engine=ENGINE, gpu="H100-80GB", model="Llama-3-70B", tp=tp, pp=pp, **config), ready_now=True)
    cluster.run(requests)
    return len(requests) / cluster.events.now_s


def test_pp_outruns_tp_on_long_prompts_and_short_outputs_as_cascadia_measured():
    # Cascadia Table 1 (Llama3-70B, four H100s, 1,600 / 16 tokens): 0.21 req/s with TP 4,
    # 0.26 with TP 2 x PP 2, 0.27 with PP 4. With chunked prefill (512-token chunks) every
    # microbatch is alike, so the stages stay busy and PP saves the TP all-reduces.
    chunked = dict(scheduler="sarathi", scheduler_options={"chunk_tokens": 512})
    tp4, tp2pp2, pp4 = (_throughput_rps(tp, pp, **chunked) for tp, pp in ((4, 1), (2, 2), (1, 4)))
    assert pp4 >= tp2pp2 >= tp4
    assert 1.0 <= pp4 / tp4 <= 2.0
    # Pipelining is what makes PP pay: one microbatch at a time leaves 3 of 4 stages idle.
    assert pp4 > 2 * _throughput_rps(1, 4, microbatches_in_flight=1, **chunked)


@pytest.mark.parametrize(
    "field, bad, message",
    [
        ("microbatches_in_flight", 0, r"microbatches_in_flight must be None or an integer in \[1, pp=2\], got 0"),
        ("microbatches_in_flight", 3, r"microbatches_in_flight .* got 3"),
        ("microbatches_in_flight", True, r"microbatches_in_flight .* got True"),
        ("microbatches_in_flight", 1.5, r"microbatches_in_flight .* got 1.5"),
        ("max_batch_size", 1, r"max_batch_size=1 is below the 2 microbatches"),
        ("cpu_overhead_s", -0.001, r"InstanceConfig.cpu_overhead_s must be a finite number >= 0 .* got -0.001"),
        ("cpu_overhead_s", float("nan"), r"InstanceConfig.cpu_overhead_s .* got nan"),
        ("cpu_overhead_s", float("inf"), r"InstanceConfig.cpu_overhead_s .* got inf"),
        ("cpu_overhead_s", True, r"InstanceConfig.cpu_overhead_s .* got True"),
    ],
)
def test_bad_pipeline_and_overhead_configs_raise_naming_the_field(field, bad, message):
    with pytest.raises(ValueError, match=message):
        InstanceConfig(engine=ENGINE, gpu=GPU, model="Llama-2-7B", pp=2, **{field: bad}).validate()


def test_factory_pipelines_only_when_more_than_one_microbatch_flies():
    def make(**config):
        return create_instance(0, InstanceConfig(engine=ENGINE, gpu=GPU, model="Llama-2-7B", **config), Cluster({GPU: 4}).events, None)

    assert type(make()) is Instance
    assert type(make(pp=2, microbatches_in_flight=1)) is Instance
    pipelined = make(pp=4, max_batch_size=128, microbatches_in_flight=2)
    assert isinstance(pipelined, PipelinedInstance)
    assert (pipelined.pipeline_depth, pipelined.max_batch_size) == (2, 64)
    assert make(pp=4, max_batch_size=130).max_batch_size == 32  # Vidur's batch_size_cap // num_stages
