"""The local-scheduler matrix: each scheduler x prefix caching (off, on, on with a host tier) x
pipeline (pp 1; pp 2 with one and with two microbatches in flight) x preemption (recompute,
swap), on two instances whose small KV pools force preemptions.

fcfs, priority and sarathi serve groups of requests sharing a system prompt (SGLang's
generated-shared-prefix shape, scaled down); rr and pascal serve multi-turn conversations, routed
by session. ``features.py`` runs rr and pascal on the shared prompts too, where their batches end
early when preemption lets a planned prefix hit be evicted.
Every request carries a tier (3 tiers) and some reason before answering. Token curves are
recorded at pp 1 only: at pp 2 they hold a point per token (microbatches are planned one
iteration at a time), which would triple the data; ``pipeline_token_curves`` records them for a
smaller pp 2 run.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator.cluster import Cluster
from simulator.instance import InstanceConfig
from simulator.request import SLO, Request
from simulator.workloads import PoissonArrivals
from simulator.workloads.prefix_sharing import SessionSpec, SharedPromptSpec, session_requests, shared_prompt_requests
from tests.sim_golden.run import Case, Proof, Run, all_of, differs_from, finished, positive

GPU, MODEL = "A100-80GB", "Llama-3.1-8B"
CACHES = ("nocache", "cache", "hostcache")
PIPELINES = {"pp1": (1, None), "pp2mb1": (2, 1), "pp2mb2": (2, 2)}
PREEMPTIONS = ("recompute", "swap")
SCHEDULER_OPTIONS: dict[str, dict[str, int]] = {
    "fcfs": {}, "priority": {}, "sarathi": {"chunk_tokens": 256}, "rr": {"quantum_tokens": 32},
    "pascal": {"quantum_tokens": 32, "demotion_kv_tokens": 600},
}


@dataclass(frozen=True)
class Load:
    """A workload and the pool it runs on: KV blocks per instance, host tier size, router."""

    kind: str
    seed: int
    kv_blocks: int
    host_cache_gb: float
    router: str


SHARED_PROMPTS = Load("shared_prompts", seed=1, kv_blocks=120, host_cache_gb=0.5, router="round_robin")
SESSIONS = Load("sessions", seed=2, kv_blocks=240, host_cache_gb=2.0, router="session_affinity")
LOADS = {"fcfs": SHARED_PROMPTS, "priority": SHARED_PROMPTS, "sarathi": SHARED_PROMPTS, "rr": SESSIONS,
         "pascal": SESSIONS}
SESSION_SPEC = SessionSpec(
    conversation_rate_rps=4.0, min_turns=2, max_turns=4, common_prefix_tokens=256, context_mean_tokens=300.0,
    context_median_ratio=0.8, context_max_tokens=800, message_min_tokens=16, message_max_tokens=64,
    answer_min_tokens=16, answer_max_tokens=96, think_time_s=3.0,
)
SHARED_SPEC = SharedPromptSpec(groups=8, prompts_per_group=6, prefix_tokens=512, question_tokens=64, output_tokens=1)


def workload(load: Load) -> list[Request]:
    """The load's requests, each given a tier (uniform over 3), an SLO and, for 40 % of them,
    reasoning for half its output; shared-prompt outputs are uniform in [16, 160] tokens."""
    rng = np.random.default_rng(load.seed)
    if load.kind == "sessions":
        requests = session_requests(SESSION_SPEC, 16, rng)
    else:
        requests = shared_prompt_requests(SHARED_SPEC, PoissonArrivals(20.0), rng)
        outputs = rng.integers(16, 161, len(requests)).tolist()
        requests = [dataclasses.replace(r, output_tokens=o) for r, o in zip(requests, outputs)]
    tiers = rng.integers(0, 3, len(requests)).tolist()
    reasoning = (rng.random(len(requests)) < 0.4).tolist()
    return [dataclasses.replace(r, tier=t, reasoning_tokens=r.output_tokens // 2 if think else 0,
                                slo=SLO(ttft_s=1.0, tbt_s=0.1))
            for r, t, think in zip(requests, tiers, reasoning)]


def _run(scheduler: str, cache: str, pipeline: str, preemption: str, load: Load | None = None) -> Run:
    load = LOADS[scheduler] if load is None else load
    pp, microbatches = PIPELINES[pipeline]
    cluster = Cluster({GPU: 2 * pp}, router=load.router, record_token_curves=pp == 1)
    options: dict[str, Any] = dict(
        gpu=GPU, model=MODEL, pp=pp, microbatches_in_flight=microbatches, scheduler=scheduler,
        scheduler_options=SCHEDULER_OPTIONS[scheduler], preemption=preemption, kv_blocks=load.kv_blocks,
        max_batch_size=16, prefix_caching=cache != "nocache",
        host_cache_gb=load.host_cache_gb if cache == "hostcache" else 0.0,
    )
    for _ in range(2):
        cluster.deploy(InstanceConfig(**options), ready_now=True)
    cluster.run(workload(load))
    return finished(cluster)


def name(scheduler: str, cache: str, pipeline: str, preemption: str) -> str:
    return f"{scheduler}_{cache}_{pipeline}_{preemption}"


def _proof(scheduler: str, cache: str, pipeline: str, preemption: str) -> Proof:
    """Preemptions happen; each setting that names the case changes the outcomes against the
    case without it; the prefix cache hits, and its host tier too."""
    checks = [positive("preemptions")]
    if cache != "nocache":
        checks.append(positive("prefix_cache_hit_tokens"))
        checks.append(differs_from(name(scheduler, CACHES[CACHES.index(cache) - 1], pipeline, preemption)))
    if cache == "hostcache":
        checks.append(positive("prefix_cache_host_hit_tokens"))
    if pipeline != "pp1":
        previous = list(PIPELINES)[list(PIPELINES).index(pipeline) - 1]
        checks.append(differs_from(name(scheduler, cache, previous, preemption)))
    if preemption == "swap":
        checks.append(differs_from(name(scheduler, cache, pipeline, "recompute")))
    return all_of(*checks)


def _feature(scheduler: str, cache: str, pipeline: str, preemption: str) -> str:
    pp, microbatches = PIPELINES[pipeline]
    cached = {"nocache": "no prefix caching", "cache": "prefix caching",
              "hostcache": "prefix caching with a host tier"}[cache]
    flight = "" if pp == 1 else f" with {microbatches} microbatch{'es' if microbatches > 1 else ''} in flight"
    return f"{scheduler} scheduler, {cached}, pp {pp}{flight}, preemption by {preemption}"


MATRIX_CASES = [
    Case(name(s, c, p, m), _feature(s, c, p, m), lambda s=s, c=c, p=p, m=m: _run(s, c, p, m), _proof(s, c, p, m))
    for s in SCHEDULER_OPTIONS for c in CACHES for p in PIPELINES for m in PREEMPTIONS
]
