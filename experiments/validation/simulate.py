"""Run one validation case and measure it the way the real benchmark did.

Metric definitions (the same for the real and the simulated side; ``hardware.measurements``
converts every source to them):

* TTFT: arrival (or the engine's queueing) to the first output token, mean over requests;
* TPOT: per request ``(e2e - ttft) / (output tokens - 1)``, then the mean over requests with more
  than one output token (vLLM ``benchmark_serving``'s TPOT, not the mean inter-token gap);
* E2E: arrival to the last token, mean over requests;
* throughput: completed requests over the span from the first arrival to the last completion
  (compared only at saturation, where it is the engine's capacity).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from experiments.validation.cases import Case
from hardware.engines import EngineProfile, get_engine
from simulator.backends import make_cluster
from simulator.cluster import Cluster
from simulator.outcome import RequestOutcome
from simulator.request import Request

METRICS = ("ttft_mean_ms", "tpot_mean_ms", "e2e_mean_ms", "request_throughput_rps")


@dataclass(frozen=True)
class Simulated:
    """A case's simulated metrics (NaN where not defined) and its request count."""

    ttft_mean_ms: float
    tpot_mean_ms: float
    e2e_mean_ms: float
    request_throughput_rps: float
    requests: int


def _metrics(outcomes: list[RequestOutcome]) -> Simulated:
    done = [o for o in outcomes if o.rejected_reason is None]
    if len(done) != len(outcomes):
        reasons = sorted({o.rejected_reason for o in outcomes if o.rejected_reason})
        raise ValueError(f"{len(outcomes) - len(done)} requests rejected ({', '.join(reasons)})")
    ttft = np.array([o.first_token_s - o.arrival_s for o in done])
    e2e = np.array([o.finish_s - o.arrival_s for o in done])
    tpot = [(o.finish_s - o.first_token_s) / (o.output_tokens - 1) for o in done if o.output_tokens > 1]
    span_s = max(o.finish_s for o in done) - min(o.arrival_s for o in done)
    return Simulated(
        ttft_mean_ms=float(ttft.mean() * 1e3),
        tpot_mean_ms=float(np.mean(tpot) * 1e3) if tpot else math.nan,
        e2e_mean_ms=float(e2e.mean() * 1e3),
        request_throughput_rps=len(done) / span_s,
        requests=len(done),
    )


def build_cluster(case: Case, engine: EngineProfile | None) -> Cluster:
    profile = get_engine(case.config.engine if engine is None else engine)
    if not case.over_http:
        profile = replace(profile, frontend_s=0.0)
    config = replace(case.config, engine=profile)
    cluster = make_cluster({config.gpu: case.gpus}, keep_sequences=False)
    for _ in range(case.replicas):
        cluster.deploy(config, ready_now=True)
    return cluster


def closed_loop(cluster: Cluster, case: Case) -> list[RequestOutcome]:
    """``case.concurrency`` clients, each sending its next request when its last one completes."""
    queue = list(enumerate(case.closed_requests))
    first = [Request(i, 0.0, prompt, output) for i, (prompt, output) in queue[: case.concurrency]]
    waiting = iter(queue[case.concurrency:])

    def on_complete(cluster: Cluster, instance, seq) -> bool:
        following = next(waiting, None)
        if following is not None:
            index, (prompt, output) = following
            cluster.add_arrival(Request(index, cluster.events.now_s, prompt, output))
        return True

    cluster.completion_hook = on_complete
    return cluster.run(iter(first))


def simulate(case: Case, engine: EngineProfile | None = None) -> Simulated:
    """Run ``case`` (under ``engine`` instead of its own profile if given) and measure it."""
    cluster = build_cluster(case, engine)
    if case.concurrency is not None:
        return _metrics(closed_loop(cluster, case))
    return _metrics(cluster.run(case.open_requests()))
