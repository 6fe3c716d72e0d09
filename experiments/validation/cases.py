"""Each real serving measurement as a simulator run: deployment, requests, and which engine.

A ``Case`` turns one ``hardware.measurements.ServingPoint`` into what the simulator needs to
replay it: one replica's ``InstanceConfig`` (the engine profile of the measured engine
version, with the point's batching limits), the replica count, and the requests (replayed one
by one where the source ships them, else generated as the source describes its load). Which
points a fit may use is ``split``'s business; how a run is scored, ``simulate``'s.

Engines: a vLLM of version 0.8 or later (or an unversioned vLLM of the CI pages) runs
``vllm-v1``; vLLM 0.6.x runs ``vllm-0.6``. Points of other engines (NVIDIA NIM, SGLang) and of
an unstated engine are simulated with ``vllm-v1`` and reported apart ("other engine"): they
show how far a current vLLM is from them, not how well a profile fits its own engine.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np

from hardware.measurements import MEASUREMENTS_DIR, REPO_ROOT, ServingPoint
from simulator.instance import InstanceConfig
from simulator.request import BlockHashes, Request

V1_ENGINE, V06_ENGINE = "vllm-v1", "vllm-0.6"

V0_MIN_BATCHED_TOKENS = 2048
"""vLLM v0 without chunked prefill: ``max_num_batched_tokens = max(max_model_len, 2048)``."""

HASH_BLOCK_TOKENS = 16
"""vLLM's KV block size, the granularity of its prefix-cache hashes."""

KV_OFFLOAD = re.compile(r"KV CPU offload (\d+) GiB")

CLOSED_LOOP_ROUNDS = 8
"""A closed-loop point without a request count sends this many requests per client."""

IN_PROCESS_SOURCES = ("llmservingsim_vllm", "vllm_perf_ci")
"""Sources that drove the engine in-process (no HTTP front end between client and engine)."""

SATURATED_CONCURRENCY = 64
"""Closed-loop clients (or requests sent at once) from which a point measures capacity."""


@dataclass(frozen=True)
class Case:
    """One point's simulation: ``replicas`` copies of ``config`` (round-robin between them),
    fed ``open_requests()`` (sorted by arrival) or, with ``concurrency``, ``concurrency``
    closed-loop clients sending ``closed_requests`` in turn."""

    point: ServingPoint
    engine: str
    own_engine: bool
    config: InstanceConfig
    replicas: int
    open_requests: Callable[[], list[Request]] | None
    concurrency: int | None
    closed_requests: tuple[tuple[int, int], ...]
    saturated: bool

    @property
    def over_http(self) -> bool:
        """Whether requests passed the engine's HTTP front end (``EngineProfile.frontend_s``)."""
        return self.point.source not in IN_PROCESS_SOURCES

    @property
    def gpus(self) -> int:
        return self.config.tp * self.config.pp * self.replicas


def _engine(point: ServingPoint) -> tuple[str, bool]:
    """(engine profile, whether it is the point's own engine)."""
    if point.engine != "vllm":
        return V1_ENGINE, False
    if point.engine_version is None:
        return V1_ENGINE, True
    major, minor = (int(part) for part in point.engine_version.split(".")[:2])
    return (V06_ENGINE, True) if (major, minor) < (0, 8) else (V1_ENGINE, True)


def _max_model_len(point: ServingPoint) -> int | None:
    """The ``len<N>`` of a LambdaLabs point id (their ``--max-model-len``)."""
    for part in point.point_id.split("-"):
        if part.startswith("len") and part[3:].isdigit():
            return int(part[3:])
    return None


def _config(point: ServingPoint, engine: str) -> InstanceConfig:
    options: dict = {}
    if point.max_num_seqs is not None:
        options["max_batch_size"] = point.max_num_seqs
    if point.chunked_prefill is False:
        model_len = _max_model_len(point)
        options["scheduler"] = "fcfs"
        options["max_batched_tokens"] = max(model_len or 0, V0_MIN_BATCHED_TOKENS)
    elif point.max_num_batched_tokens is not None:
        options["max_batched_tokens"] = point.max_num_batched_tokens
    if point.prefix_caching is not None:
        options["prefix_caching"] = point.prefix_caching
        offload = KV_OFFLOAD.search(point.notes)
        if point.prefix_caching and offload:
            options["host_cache_gb"] = int(offload.group(1)) * 2**30 / 1e9
    dtype = {"fp8": "fp8", "int4-awq": "int4", "int4-gptq": "int4"}.get(point.dtype or "", "fp16")
    return InstanceConfig(gpu=point.gpu_catalog, model=point.model_catalog, tp=point.tp or 1, pp=point.pp or 1,
                          dtype=dtype, engine=engine, **options)


# --- workloads --------------------------------------------------------------------------------


@cache
def _lambda_requests() -> dict[str, list[tuple[int, int]]]:
    by_point: dict[str, list[tuple[int, int]]] = {}
    with open(MEASUREMENTS_DIR / "lambda_vllm" / "requests.csv", newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            by_point.setdefault(row["point_id"], []).append((int(row["input_tokens"]), int(row["output_tokens"])))
    return by_point


def _llmservingsim_schedule(point: ServingPoint) -> list[tuple[float, int, int]]:
    """(arrival s, input, output) of an LLMServingSim run, from its shipped request file."""
    import json

    rows = []
    queued0 = None
    with open(REPO_ROOT / point.per_request_file, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            queued0 = record["queued_ts"] if queued0 is None else min(queued0, record["queued_ts"])
            rows.append((record["queued_ts"], record["input_toks"], record["output_toks"]))
    return sorted((queued - queued0, tokens_in, tokens_out) for queued, tokens_in, tokens_out in rows)


def _at_once(lengths: list[tuple[int, int]]) -> Callable[[], list[Request]]:
    return lambda: [Request(i, 0.0, prompt, max(output, 1)) for i, (prompt, output) in enumerate(lengths)]


_SHARED_PREFIX = re.compile(r"(\d+) groups x (\d+) = \d+ distinct random-token prompts \((\d+)-token shared prefix")


def _shared_prefix_hashes(point: ServingPoint, prompt_tokens: int) -> list[BlockHashes] | None:
    """The prompts' block hashes (vLLM's 16-token blocks) of inference-perf's ``shared_prefix``
    data, where the point's notes describe it: ``groups`` x ``per_group`` prompts cycled in
    order, each a group-wide random prefix and its own question. The client re-tokenizes the
    text, so the prefix is scaled by the measured prompt length over the generated one; the
    blocks wholly inside it are the group's, the rest the prompt's own."""
    match = _SHARED_PREFIX.search(point.notes)
    if match is None:
        return None
    groups, per_group, prefix = (int(value) for value in match.groups())
    question = int(re.search(r"\+ (\d+)-token question", point.notes).group(1))
    shared_blocks = int(prefix * prompt_tokens / (prefix + 1 + question)) // HASH_BLOCK_TOKENS
    blocks = -(-prompt_tokens // HASH_BLOCK_TOKENS)
    hashes = []
    for prompt in range(groups * per_group):
        group = prompt // per_group
        hashes.append(BlockHashes(HASH_BLOCK_TOKENS, tuple(
            (group << 20) + block if block < shared_blocks else ((1 + prompt) << 32) + block for block in range(blocks)
        )))
    return hashes


def _conditioned_poisson(point: ServingPoint) -> Callable[[], list[Request]]:
    """inference-perf's ``constant`` load: ``n = rate x duration`` exponential gaps rescaled to
    fill the stage exactly, i.e. the arrival times of a Poisson process given its count (sorted
    uniform times); fixed lengths; seed 0; the prompts' prefix identity where the notes give it."""
    n, rate = point.num_requests, point.request_rate_rps
    prompt, output = round(point.prompt_tokens_mean), round(point.output_tokens_mean)
    hashes = _shared_prefix_hashes(point, prompt)

    def make() -> list[Request]:
        gaps = np.random.default_rng(0).exponential(size=n)
        times = np.cumsum(gaps) / gaps.sum() * (n / rate)
        return [Request(i, float(t), prompt, output, block_hashes=None if hashes is None else hashes[i % len(hashes)])
                for i, t in enumerate(times)]

    return make


def case_for(point: ServingPoint) -> Case | None:
    """The simulation of ``point``, or None where the simulator cannot replay it (its GPU or
    model is not in the catalog, or the source gives no workload)."""
    if point.gpu_catalog is None or point.model_catalog is None or point.tp is None:
        return None
    engine, own = _engine(point)
    config = _config(point, engine)
    prompt = None if point.prompt_tokens_mean is None else round(point.prompt_tokens_mean)
    output = None if point.output_tokens_mean is None else round(point.output_tokens_mean)
    open_requests, concurrency, closed = None, None, ()
    if point.source == "lambda_vllm":
        lengths = _lambda_requests()[point.point_id]
        open_requests = _at_once(lengths)
        saturated = len(lengths) >= SATURATED_CONCURRENCY
    elif point.source == "llmservingsim_vllm":
        schedule = _llmservingsim_schedule(point)
        open_requests = lambda: [Request(i, t, a, b) for i, (t, a, b) in enumerate(schedule)]  # noqa: E731
        saturated = point.request_throughput_rps < 0.9 * point.request_rate_rps
    elif point.arrival in ("poisson", "constant") and point.request_rate_rps and point.num_requests:
        open_requests = _conditioned_poisson(point)
        saturated = "OVERLOADED" in point.notes
    elif point.arrival == "all-at-once" and point.num_requests and prompt and output:
        open_requests = _at_once([(prompt, output)] * point.num_requests)
        saturated = point.num_requests >= SATURATED_CONCURRENCY
    elif point.arrival == "closed-loop" and point.max_concurrency and prompt and output:
        concurrency = point.max_concurrency
        count = point.num_requests or concurrency * CLOSED_LOOP_ROUNDS
        closed = ((prompt, output),) * max(count, concurrency)
        saturated = concurrency >= SATURATED_CONCURRENCY
    else:
        return None
    return Case(point, engine, own, config, point.dp or 1, open_requests, concurrency, closed, saturated)


def is_finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
