"""Mélange, Cauchy's baseline (Cauchy §4.2): aggregated single-GPU instances of mixed
types, allocated statically by an ILP over request-size buckets.

Requests are bucketed by (prompt, output) length; each bucket's rate is cut into ``slices``
equal slices and every slice goes to one GPU type (binary); a type needs
``count >= Σ slice rate / max goodput(bucket, type)`` instances; the ILP minimises
``Σ price x count`` within the inventory (``../shared/DESIGN.md``, "Mélange"). Max goodputs
come from the simulator: one aggregated TP-1 instance serving only that bucket's requests
(``baselines.cauchy.search``). At run time a request goes to a GPU type in proportion to its
bucket's slices there (smooth weighted round-robin) and then to the instance of that type
with the fewest requests. The router reads each request's true lengths to find its bucket,
an oracle that can only help Mélange.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pulp

from baselines.cauchy.search import GoodputSearch, max_goodput_rps, slo_attainment
from baselines.cauchy.workloads import DEFAULT_ENGINE, MODEL, CauchyWorkload, engine_options
from hardware.gpus import get_gpu
from simulator.backends import make_cluster
from simulator.cluster import Cluster
from simulator.instance import InstanceConfig
from simulator.request import Request
from simulator.routers.gpu_share import GpuShareRouter
from simulator.workloads import length_sampler

EDGES_TOKENS = (0, 256, 1024, 4096)  # lower edges of the length ranges; the last is open
MIN_BUCKET_SHARE = 0.002  # buckets rarer than this merge into their nearest kept bucket
SHARE_SAMPLES = 200_000
SLICES = 8
MELANGE_TP = 1


def _range_index(tokens: np.ndarray) -> np.ndarray:
    return np.searchsorted(EDGES_TOKENS, tokens, side="right") - 1


def bucket_of(prompt_tokens: int, output_tokens: int) -> str:
    """``"i,j"``: the prompt range index i and output range index j of ``EDGES_TOKENS``."""
    return f"{int(_range_index(np.asarray(prompt_tokens)))},{int(_range_index(np.asarray(output_tokens)))}"


def _indices(bucket: str) -> tuple[int, int]:
    i, j = bucket.split(",")
    return int(i), int(j)


def bucket_shares(workload: CauchyWorkload, seed: int = 0) -> dict[str, float]:
    """Share of the workload's requests in each bucket of at least ``MIN_BUCKET_SHARE``, from
    ``SHARE_SAMPLES`` draws of its length sampler; rarer buckets' shares join their nearest
    kept bucket (so the shares sum to 1)."""
    prompts, outputs = length_sampler(workload.lengths).sample(SHARE_SAMPLES, np.random.default_rng(seed))
    width = len(EDGES_TOKENS)
    flat = np.bincount(_range_index(prompts) * width + _range_index(outputs), minlength=width * width)
    counts = {f"{k // width},{k % width}": int(n) for k, n in enumerate(flat.tolist()) if n}
    kept = {k: n for k, n in counts.items() if n >= MIN_BUCKET_SHARE * SHARE_SAMPLES}
    for key, n in counts.items():
        if key not in kept:
            kept[nearest_bucket(key, kept)] += n
    return {k: kept[k] / SHARE_SAMPLES for k in sorted(kept)}


def nearest_bucket(bucket: str, kept: Mapping[str, object]) -> str:
    """The kept bucket nearest to ``bucket`` in (prompt, output) range index (lowest key on ties)."""
    i, j = _indices(bucket)
    return min(sorted(kept), key=lambda k: abs(_indices(k)[0] - i) + abs(_indices(k)[1] - j))


class BucketLengths:
    """The workload's length distribution conditioned on one bucket (rejection sampling)."""

    def __init__(self, workload: CauchyWorkload, bucket: str) -> None:
        self.base = length_sampler(workload.lengths)
        self.bucket = _indices(bucket)

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        prompts, outputs = [], []
        found = 0
        for _ in range(100):
            p, o = self.base.sample(max(16 * n, 4096), rng)
            inside = (_range_index(p) == self.bucket[0]) & (_range_index(o) == self.bucket[1])
            prompts.append(p[inside])
            outputs.append(o[inside])
            found += int(inside.sum())
            if found >= n:
                return np.concatenate(prompts)[:n], np.concatenate(outputs)[:n]
        raise ValueError(f"bucket {self.bucket} is too rare to sample {n} requests from")


def bucket_goodput_rps(
    gpu: str, bucket: str, workload: CauchyWorkload, search: GoodputSearch, model: str = MODEL,
    engine: str = DEFAULT_ENGINE,
) -> float:
    """Max goodput of one aggregated TP-1 ``gpu`` instance serving only ``bucket``'s requests,
    batching as ``engine`` does (``baselines.cauchy.workloads.ENGINES``)."""
    config = InstanceConfig(gpu=gpu, model=model, tp=MELANGE_TP, **engine_options(engine))

    def build() -> Cluster:
        cluster = make_cluster({gpu: MELANGE_TP})
        cluster.deploy(config, ready_now=True)
        return cluster

    lengths = BucketLengths(workload, bucket)
    return max_goodput_rps(lambda rate: slo_attainment(build, lengths, workload.slo(), rate, search), search)


@dataclass(frozen=True)
class MelangePlan:
    """Instances per GPU type, each bucket's rate fraction per type, and the ILP's cost."""

    counts: dict[str, int]
    fractions: dict[str, dict[str, float]]
    cost_per_hour_usd: float
    solve_time_s: float


def solve_melange(
    bucket_rates_rps: Mapping[str, float],
    goodput_rps: Mapping[str, Mapping[str, float]],
    inventory: Mapping[str, int],
    slices: int = SLICES,
) -> MelangePlan:
    """The Mélange ILP: binary ``y[b, s, g]`` (slice s of bucket b on type g), integer
    ``count[g] <= inventory[g]``, ``Σ_g y[b, s, g] = 1``, ``Σ_{b,s} y[b,s,g] r_b / (slices G[b,g])
    <= count[g]``, minimise ``Σ_g price_g count[g]``. ``goodput_rps[g][b]`` is ``G[b, g]``
    (0: the type cannot serve the bucket). Raises when the inventory cannot carry the load."""
    if isinstance(slices, bool) or not isinstance(slices, int) or slices < 1:
        raise ValueError(f"slices must be a positive integer, got {slices!r}")
    for bucket, rate in bucket_rates_rps.items():
        if not (math.isfinite(rate) and rate >= 0):
            raise ValueError(f"bucket {bucket} rate must be finite and >= 0, got {rate!r}")
    gpus = [g for g in inventory if g in goodput_rps]
    if not gpus:
        raise ValueError(f"no goodput for any inventory GPU {sorted(inventory)}; have {sorted(goodput_rps)}")
    buckets = [b for b, r in bucket_rates_rps.items() if r > 0]
    for b in buckets:
        if not any(goodput_rps[g].get(b, 0.0) > 0 for g in gpus):
            raise ValueError(f"no GPU type in {gpus} serves bucket {b} within the SLO (max goodput 0)")
    problem = pulp.LpProblem("melange", pulp.LpMinimize)
    count = {g: problem.add_variable(f"count_{i}", 0, inventory[g], cat="Integer") for i, g in enumerate(gpus)}
    y = {
        (b, s, g): problem.add_variable(f"y_{bi}_{s}_{gi}", cat="Binary")
        for bi, b in enumerate(buckets) for s in range(slices) for gi, g in enumerate(gpus)
        if goodput_rps[g].get(b, 0.0) > 0
    }
    problem += pulp.lpSum(get_gpu(g).price_per_hour_usd * MELANGE_TP * count[g] for g in gpus)
    for b in buckets:
        for s in range(slices):
            problem += pulp.lpSum(y[b, s, g] for g in gpus if (b, s, g) in y) == 1
    for g in gpus:
        load = pulp.lpSum(
            y[b, s, g] * bucket_rates_rps[b] / (slices * goodput_rps[g][b])
            for b in buckets for s in range(slices) if (b, s, g) in y
        )
        problem += load <= count[g]
    started = time.perf_counter()
    status = problem.solve(pulp.PULP_CBC_CMD(msg=False))
    solve_time_s = time.perf_counter() - started
    if pulp.LpStatus[status] != "Optimal":
        total = sum(bucket_rates_rps.values())
        raise ValueError(f"Mélange ILP is {pulp.LpStatus[status]}: inventory {dict(inventory)} cannot carry {total:g} req/s")
    counts = {g: int(round(count[g].value())) for g in gpus}
    fractions = {
        b: {g: sum(round(y[b, s, g].value()) for s in range(slices) if (b, s, g) in y) / slices for g in gpus}
        for b in buckets
    }
    cost = sum(get_gpu(g).price_per_hour_usd * MELANGE_TP * n for g, n in counts.items())
    return MelangePlan(counts, {b: {g: f for g, f in fr.items() if f > 0} for b, fr in fractions.items()}, cost, solve_time_s)


def deploy_melange(
    plan: MelangePlan, inventory: Mapping[str, int], model: str = MODEL, engine: str = DEFAULT_ENGINE,
    **cluster_options: Any,
) -> Cluster:
    """A cluster with the plan's instances serving, batching as ``engine`` does, routed by
    ``melange_router``."""
    cluster = make_cluster(dict(inventory), router=melange_router(plan), **cluster_options)
    options = engine_options(engine)
    for gpu, n in plan.counts.items():
        for _ in range(n):
            cluster.deploy(InstanceConfig(gpu=gpu, model=model, tp=MELANGE_TP, **options), ready_now=True)
    return cluster


def melange_router(plan: MelangePlan) -> GpuShareRouter:
    """Bucket (its nearest planned one when the plan lacks it) -> GPU type by smooth weighted RR
    on the plan's fractions -> fewest requests (``simulator.routers.gpu_share``)."""
    def planned_bucket(request: Request) -> str:
        bucket = bucket_of(request.prompt_tokens, request.output_tokens)
        return bucket if bucket in plan.fractions else nearest_bucket(bucket, plan.fractions)

    return GpuShareRouter(plan.fractions, planned_bucket)
