"""Requests generated lazily (``stream_requests``) and streamed into a cluster: the same
requests bit for bit as the vectorised list, the same outcomes, memory bounded by a block."""

from __future__ import annotations

import itertools
import tracemalloc
from dataclasses import astuple, replace

import numpy as np
import pytest

from simulator.backends import make_cluster
from simulator.cluster import Cluster
from simulator.instance import InstanceConfig
from simulator.request import MAX_ARRIVAL_S, SLO, Request
from simulator.workloads import (
    FixedLengths,
    GammaArrivals,
    PiecewiseRateArrivals,
    PoissonArrivals,
    ServeGenRateArrivals,
    generate_requests,
    length_sampler,
    parametric_preset,
    sample_tiers,
    stream_requests,
)

GPU, MODEL = "A100-80GB", "Llama-2-7B"


def _vectorised(arrivals, lengths, n, rng, priorities=None, num_tiers=1, slo=None) -> list[Request]:
    """The list version before streaming: one vectorised draw per column, in the order arrivals,
    lengths, tiers (the oracle)."""
    arrival_s = np.asarray(arrivals.sample_arrival_times(n, rng), dtype=np.float64)
    sampled = lengths.sample(n, rng)
    reasoning = sampled[2] if len(sampled) == 3 else np.zeros(n, dtype=np.int64)
    tiers = np.zeros(n, dtype=np.int64) if priorities is None else sample_tiers(priorities, num_tiers, n, rng)
    template = slo or SLO()
    return [Request(i, a, p, o, reasoning_tokens=r, tier=t, slo=replace(template)) for i, (a, p, o, r, t) in enumerate(
        zip(arrival_s.tolist(), sampled[0].tolist(), sampled[1].tolist(), reasoning.tolist(), tiers.tolist()))]


WORKLOADS = {
    "poisson-sharegpt": (lambda: PoissonArrivals(16.0), lambda: length_sampler("sharegpt"), {}),
    "gamma-azure-tiers": (lambda: GammaArrivals(5.0, 3.0), lambda: length_sampler("azure_conv"),
                          {"priorities": "enterprise", "num_tiers": 3}),
    "piecewise-parametric": (lambda: PiecewiseRateArrivals([0, 5, 9], [2.0, 0.0, 9.0], cycle_s=12.0),
                             lambda: parametric_preset("longwriter"), {"slo": SLO(ttft_s=1.0)}),
    "servegen-reasoning": (lambda: ServeGenRateArrivals(window_s=3.0, cv=1.7), lambda: length_sampler("servegen_deepseek_r1"),
                           {"priorities": "gaussian", "num_tiers": 4}),
    "fixed": (lambda: PoissonArrivals(3.0), lambda: FixedLengths(100, 20), {}),
}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
@pytest.mark.parametrize("chunk", [1, 777, 65_536])
def test_stream_gives_the_vectorised_requests_and_leaves_the_generator_where_they_do(name, chunk):
    arrivals, lengths, options = WORKLOADS[name]
    expected_rng, rng = np.random.default_rng(3), np.random.default_rng(3)
    expected = _vectorised(arrivals(), lengths(), 3000, expected_rng, **options)
    streamed = list(stream_requests(arrivals(), lengths(), 3000, rng, chunk_requests=chunk, **options))
    assert [repr(astuple(r)) for r in streamed] == [repr(astuple(r)) for r in expected]
    assert rng.bit_generator.state == expected_rng.bit_generator.state
    assert generate_requests(arrivals(), lengths(), 3000, np.random.default_rng(3), **options) == expected


@pytest.mark.parametrize("arrivals", [PoissonArrivals(2.0), GammaArrivals(2.0, 0.5),
                                      PiecewiseRateArrivals([0, 10], [1.0, 4.0], cv=2.0, cycle_s=25.0)])
def test_arrival_time_chunks_are_the_sampled_times_bit_for_bit(arrivals):
    whole = arrivals.sample_arrival_times(5000, np.random.default_rng(11))
    blocks = list(arrivals.arrival_time_chunks(5000, np.random.default_rng(11), 333))
    assert [b.size for b in blocks] == [333] * 15 + [5]
    assert np.concatenate(blocks).tobytes() == whole.tobytes()


def test_stream_checks_everything_before_the_first_request_is_read():
    class Backwards:
        def sample_arrival_times(self, n, rng):
            return np.arange(n, 0, -1, dtype=float)

    with pytest.raises(ValueError, match="arrival times must be finite, >= 0 and non-decreasing"):
        stream_requests(Backwards(), FixedLengths(10, 10), 5, np.random.default_rng(0))
    assert MAX_ARRIVAL_S == 1e9
    with pytest.raises(ValueError, match="the last of 3 arrivals is at 3e\\+09 s"):
        stream_requests(_Fixed([1.0, 2.0, 3e9]), FixedLengths(10, 10), 3, np.random.default_rng(0), chunk_requests=2)


class _Fixed:
    """Given arrival times (a process without blocks: drawn whole)."""

    def __init__(self, times: list[float]) -> None:
        self.times = times

    def sample_arrival_times(self, n, rng):
        return np.array(self.times[:n])


def test_stream_memory_is_one_block_not_the_workload():
    tracemalloc.start()
    try:
        stream = stream_requests(PoissonArrivals(16.0), length_sampler("sharegpt"), 300_000, np.random.default_rng(0),
                                 chunk_requests=10_000)
        for _ in stream:
            pass
        _, streamed_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        kept = generate_requests(PoissonArrivals(16.0), length_sampler("sharegpt"), 30_000, np.random.default_rng(0))
        _, list_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(kept) == 30_000
    assert streamed_peak < 3_000_000 < list_peak  # 300k streamed in 10k blocks < a tenth of them kept


def _cluster(**options) -> Cluster:
    cluster = Cluster({GPU: 2}, **options)
    for _ in range(2):
        cluster.deploy(InstanceConfig(gpu=GPU, model=MODEL), ready_now=True)
    return cluster


def test_a_cluster_fed_a_stream_gives_the_outcomes_of_the_list():
    def requests():
        return stream_requests(PoissonArrivals(20.0), length_sampler("sharegpt"), 1500, np.random.default_rng(5),
                               chunk_requests=100)

    listed = _cluster().run(list(requests()))
    streamed_cluster = _cluster(keep_sequences=False)
    streamed = streamed_cluster.run(requests())
    assert [repr(astuple(o)) for o in streamed] == [repr(astuple(o)) for o in listed]
    assert streamed_cluster.arrived == 1500 and streamed_cluster.arrived_sequences == []
    with pytest.raises(ValueError, match="submitted_requests needs a list of requests; this cluster was given a stream"):
        streamed_cluster.submitted_requests


def test_a_stream_counts_the_requests_read_so_far_as_pending():
    cluster = _cluster()
    cluster.submit(iter([Request(0, 1.0, 100, 2000), Request(1, 2.0, 100, 2000), Request(2, 30.0, 100, 5)]))
    assert cluster.pending_requests() == 1  # only the next arrival is read
    cluster.advance(2.0)
    assert cluster.arrived == 2 and cluster.outcomes == [] and cluster.pending_requests() == 3  # the third is read
    cluster.advance()
    assert cluster.pending_requests() == 0 and len(cluster.outcomes) == 3


def test_an_unsorted_stream_fails_when_the_late_request_is_read():
    cluster = _cluster()
    cluster.submit(iter([Request(0, 1.0, 100, 5), Request(1, 3.0, 100, 5), Request(2, 2.0, 100, 5)]))
    with pytest.raises(ValueError, match="requests must be sorted by arrival; request 2 arrives at 2.0 s after 3.0 s"):
        cluster.advance()
    with pytest.raises(ValueError, match="request 0: output_tokens must be a positive integer, got 0"):
        _cluster().submit(itertools.chain([Request(0, 1.0, 100, 0)]))


def test_a_compiled_run_keeping_no_sequences_gives_the_python_engines_outcomes():
    """With ``keep_sequences=False`` the compiled engine drops the ``Request`` objects for the run
    and keeps only the fields outcomes copy (``RequestColumns``): every outcome as the Python
    engine's, with tiers, reasoning, an integer arrival time, shared SLOs and a rejection; after
    the run no request can be read or added, and the error says why."""
    slo = SLO(ttft_s=2.0, tbt_s=0.2)
    requests = [Request(i, 0.05 * i, 200 + 37 * i, 40 + 11 * (i % 7), reasoning_tokens=(i % 3) * 5, tier=i % 2, slo=slo)
                for i in range(60)]
    requests[20] = Request(20, 1, 300, 50, tier=1)  # an integer arrival time (the outcome keeps the float)
    requests[30] = Request(30, 1.5, 10_000_000, 5)  # rejected: longer than any instance's KV

    def outcomes(backend: str, keep: bool) -> list[str]:
        cluster = make_cluster({GPU: 2}, backend=backend, keep_sequences=keep)
        for _ in range(2):
            cluster.deploy(InstanceConfig(gpu=GPU, model=MODEL), ready_now=True)
        done = cluster.run(iter(requests))
        if backend == "compiled" and not keep:
            with pytest.raises(ValueError, match=r"kept no requests after its run \(keep_sequences=False\)"):
                cluster.add_arrival(Request(99, 9.0, 100, 5))
        return [repr(astuple(o)) for o in done]

    reference = outcomes("python", False)
    assert sum("exceeds" in row or "context" in row for row in reference) == 1
    assert outcomes("compiled", False) == reference == outcomes("compiled", True)
