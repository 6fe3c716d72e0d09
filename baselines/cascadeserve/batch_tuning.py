"""SP4, batching by minimum queue length (CascadeServe §4.5), evaluated with a gear simulator
in the manner of App. C.1.

The simulator: samples arrive (Poisson at the gear's QPS, fixed seed) into the queue of a replica
of the cascade's first model; replicas of a model are picked by smooth weighted round robin with
the load balancer's q_r as weights. A replica triggers inference once its queue holds its model's
minimum queue length (1 for every model but the first) and all of its devices are free; the batch
(up to the profiled maximum) blocks those devices for the profiled runtime. After a batch each
sample is accepted or forwarded by its validation scores (cycled) and the gear's thresholds.
When arrivals end, queues below their minimum are flushed.

Tuning: start with minimum queue length 1 for the first model and raise it by 1 until the p95
end-to-end latency meets the SLO (larger batches: more throughput, longer waits); error when no
length up to the profiled maximum batch does, naming the bottleneck model (the one whose samples
waited longest in queues in total). The search stops early once p95 exceeds twice the best seen:
past that point longer queues only add waiting.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from baselines.cascadeserve.cascade_search import CascadeStats, thresholds
from baselines.cascadeserve.profiles import ModelProfile, Replica


@dataclass(frozen=True)
class GearSimulation:
    """What the gear simulator measured."""

    latency_p95_s: float
    latency_mean_s: float
    queue_wait_s_by_model: dict[str, float]

    def bottleneck(self) -> str:
        return max(self.queue_wait_s_by_model, key=lambda m: self.queue_wait_s_by_model[m])


class _WeightedRoundRobin:
    """Smooth weighted round robin (nginx): deterministic, proportional to the weights."""

    def __init__(self, weights: Sequence[float]) -> None:
        self.weights = list(weights)
        self.current = [0.0] * len(weights)

    def pick(self) -> int:
        total = sum(self.weights)
        for i, w in enumerate(self.weights):
            self.current[i] += w
        best = max(range(len(self.weights)), key=lambda i: self.current[i])
        self.current[best] -= total
        return best


def simulate_gear(
    cascade: CascadeStats,
    models: Sequence[str],
    profiles: Sequence[ModelProfile],
    load_qps: Mapping[Replica, float],
    qps: float,
    first_min_queue: int,
    scores: np.ndarray,
    threshold_levels: int,
    duration_s: float = 20.0,
    seed: int = 0,
) -> GearSimulation:
    """Simulate ``duration_s`` seconds of arrivals at ``qps`` through the gear (App. C.1)."""
    if not (math.isfinite(qps) and qps > 0):
        raise ValueError(f"qps must be positive and finite, got {qps!r}")
    by_name = {p.name: p for p in profiles}
    stages = [m for m, share in zip(models, cascade.stage_shares) if share > 0]
    last_stage = len(stages) - 1
    limits = thresholds(cascade.levels, threshold_levels)
    replicas_of = {m: [r for r in load_qps if r.model == m and load_qps[r] > 0] or [r for r in load_qps if r.model == m] for m in stages}
    for m in stages:
        if not replicas_of[m]:
            raise ValueError(f"the gear uses {m} but the placement has no replica of it")
    pickers = {m: _WeightedRoundRobin([max(load_qps[r], 1e-12) for r in replicas_of[m]]) for m in stages}
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / qps, max(1, int(qps * duration_s))))
    end_of_arrivals = float(arrivals[-1])
    queues: dict[Replica, list[tuple[int, float]]] = {r: [] for m in stages for r in replicas_of[m]}
    device_free_s: dict[int, float] = {d: 0.0 for r in queues for d in r.devices}
    events: list[tuple[float, int, int, tuple]] = [(float(t), 0, i, ("arrive", i)) for i, t in enumerate(arrivals)]
    heapq.heapify(events)
    sequence = len(events)
    latencies: list[float] = []
    wait_s = {m: 0.0 for m in stages}

    def enqueue(sample: int, stage: int, now: float) -> None:
        replica = replicas_of[stages[stage]][pickers[stages[stage]].pick()]
        queues[replica].append((sample, now))
        try_start(replica, now)

    def try_start(replica: Replica, now: float) -> None:
        nonlocal sequence
        queue = queues[replica]
        minimum = first_min_queue if replica.model == stages[0] and now < end_of_arrivals else 1
        if len(queue) < minimum or any(device_free_s[d] > now for d in replica.devices):
            return
        profile = by_name[replica.model]
        batch, queues[replica] = queue[:profile.max_batch], queue[profile.max_batch:]
        done = now + profile.runtime_s(len(batch))
        for d in replica.devices:
            device_free_s[d] = done
        for _, queued_s in batch:
            wait_s[replica.model] += now - queued_s
        sequence += 1
        heapq.heappush(events, (done, 1, sequence, ("done", replica, batch)))

    stage_of = {m: i for i, m in enumerate(stages)}
    model_index = {m: i for i, m in enumerate(models)}
    flushed = False
    while events:
        now, _, _, event = heapq.heappop(events)
        if event[0] == "arrive":
            enqueue(event[1], 0, now)
        else:
            replica, batch = event[1], event[2]
            stage = stage_of[replica.model]
            for sample, _ in batch:
                row = scores[sample % len(scores)]
                if stage == last_stage or row[model_index[replica.model]] >= limits[model_index[replica.model]]:
                    latencies.append(now - float(arrivals[sample]))
                else:
                    enqueue(sample, stage + 1, now)
            for other in queues:
                if set(other.devices) & set(replica.devices):
                    try_start(other, now)
        if not flushed and now >= end_of_arrivals:
            flushed = True
            for replica in queues:
                try_start(replica, now)
    values = np.asarray(latencies)
    return GearSimulation(float(np.percentile(values, 95)), float(values.mean()), wait_s)


def tune_min_queue_length(
    cascade: CascadeStats,
    models: Sequence[str],
    profiles: Sequence[ModelProfile],
    load_qps: Mapping[Replica, float],
    qps: float,
    latency_slo_s: float,
    scores: np.ndarray,
    threshold_levels: int,
    duration_s: float = 20.0,
) -> tuple[int | None, GearSimulation]:
    """§4.5: the smallest minimum queue length of the first model whose simulated p95 latency meets
    ``latency_slo_s``, with its simulation; ``(None, best simulation)`` when none does."""
    first = next(m for m, share in zip(models, cascade.stage_shares) if share > 0)
    max_batch = next(p.max_batch for p in profiles if p.name == first)
    best: GearSimulation | None = None
    for length in range(1, max_batch + 1):
        result = simulate_gear(cascade, models, profiles, load_qps, qps, length, scores, threshold_levels, duration_s)
        if result.latency_p95_s <= latency_slo_s:
            return length, result
        if best is None or result.latency_p95_s < best.latency_p95_s:
            best = result
        elif result.latency_p95_s > 2 * best.latency_p95_s:
            break
    assert best is not None
    return None, best
