"""The benchmark runs of ``experiments.benchmarks.simulator_speed`` and ``overload``, shrunk to a
few hundred requests: the same deployments, engines and workload generators (no token curves,
as there)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from simulator.cluster import Cluster
from simulator.instance import InstanceConfig
from simulator.request import SLO
from simulator.workloads import (FixedLengths, PoissonArrivals, generate_requests, length_sampler, load_azure_trace,
                                 stream_requests)
from tests.sim_golden.run import Case, Run, finished, positive

VIDUR_ENGINE = "vidur-2024"
"""``simulator_speed``'s engine (its ``BENCHMARK_ENGINE``)."""


def _fcfs_cluster(pools: list[tuple[str, int]], model: str, memory_utilization: float) -> Cluster:
    """``simulator_speed``'s deployment: fcfs, batches of at most 128, 16-token blocks."""
    cluster = Cluster({gpu: count for gpu, count in pools})
    for gpu, count in pools:
        for _ in range(count):
            cluster.deploy(InstanceConfig(gpu=gpu, model=model, engine=VIDUR_ENGINE, scheduler="fcfs",
                                          max_batch_size=128, block_size=16, memory_utilization=memory_utilization),
                           ready_now=True)
    return cluster


def _vidur_reference() -> Run:
    """Run (a), Vidur's reference run: 4 x Llama-2-7B on A100-80GB, prompt 512 / output 128,
    Poisson 16 req/s, seed 42; 400 of its 10,000 requests."""
    requests = generate_requests(PoissonArrivals(16.0), FixedLengths(512, 128), 400, np.random.default_rng(42))
    cluster = _fcfs_cluster([("A100-80GB", 4)], "Llama-2-7B", 0.8)
    cluster.run(requests)
    return finished(cluster)


def _azure_conv() -> Run:
    """Run (b): the Azure 2023 conversation trace on 8 mixed-GPU instances of Llama-3.1-8B; its
    first 300 requests."""
    cluster = _fcfs_cluster([("A100-80GB", 2), ("H100-80GB", 2), ("L40S", 2), ("A10", 2)], "Llama-3.1-8B", 0.9)
    cluster.run(load_azure_trace("azure_conv", max_requests=300))
    return finished(cluster)


OVERLOAD_REQUESTS = 600


def _overload() -> Run:
    """``overload``'s run at 30 req/s as ``python -m simulator`` builds it: 8 x A100-80GB serving
    Llama-3.1-8B under the default engine, ShareGPT lengths streamed lazily, seed 0, round-robin,
    no sequences kept; 600 requests (20 s of arrivals, over which the mean queueing of the last 100
    requests is about twice the first 100's: the queues only start to grow)."""
    rng = np.random.default_rng(0)
    requests = stream_requests(PoissonArrivals(30.0), length_sampler("sharegpt"), OVERLOAD_REQUESTS, rng,
                               slo=SLO())
    cluster = Cluster({"A100-80GB": 8}, router="round_robin", keep_sequences=False)
    for _ in range(8):
        cluster.deploy(InstanceConfig(gpu="A100-80GB", model="Llama-3.1-8B", block_size=16, memory_utilization=0.9),
                       ready_now=True)
    cluster.run(requests)
    return finished(cluster, arrived=cluster.arrived, sequences_kept=len(cluster.arrived_sequences))


def _streamed_without_sequences(run: Run, runs: Mapping[str, Run]) -> list[str]:
    """Every request arrived through the stream and the cluster kept none of their sequences."""
    problems = positive("arrived")(run, runs)
    if run.counters["sequences_kept"] != 0:
        problems.append(f"the cluster kept {run.counters['sequences_kept']} sequences")
    return problems


SPEED_CASES = [
    Case("speed_a_vidur_reference", "simulator_speed run (a): Vidur's reference run, fcfs", _vidur_reference,
         positive("requests")),
    Case("speed_b_azure_conv", "simulator_speed run (b): Azure conversation trace on four GPU types, fcfs",
         _azure_conv, positive("requests")),
    Case("overload_30rps", "overload benchmark at 30 req/s: the CLI's streamed run keeping no sequences", _overload,
         _streamed_without_sequences),
]
