"""Cauchy's three workloads as the planner sees them (cauchy.txt §4.1, §3.3.3): mean lengths,
SLO targets and target QPS, keyed by the simulator's length-sampler name; and the serving
engines Cauchy's instances can batch as."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envs.scenarios.cauchy import CAUCHY_ENGINE, CAUCHY_GPUS, CAUCHY_MODEL, CAUCHY_WORKLOADS, GPUS_PER_TYPE
from simulator.request import SLO
from simulator.workloads import PARAMETRIC_PRESETS

MODEL = CAUCHY_MODEL
INVENTORY = {gpu: GPUS_PER_TYPE for gpu in CAUCHY_GPUS}  # §4.1: 8 H800 + 8 A800 + 8 H20

# How every instance batches (the ``InstanceConfig`` fields that differ from the defaults).
# §4.1 runs "vLLM v0.6.5" and does not say whether chunked prefill was on. "prefill_first" is
# vLLM v0 without chunking (prefill-only iterations ahead of decodes,
# ``simulator.schedulers.base``): what the planners' table and every Cauchy result use, except
# the labelled engine variants of ``experiments.cauchy_autoscaling`` and ``cauchy_reproduction``.
# "vllm_0.6.5_default" is what v0.6.5 picks by itself for this model: chunked prefill with a
# 512-token budget per iteration (``simulator.schedulers.sarathi``), since its
# ``EngineArgs.create_engine_config`` turns chunking on when max_model_len exceeds 32K (Llama-3.1-8B's
# is 131,072) and ``SchedulerConfig`` then defaults ``max_num_batched_tokens`` to 512.
ENGINES: dict[str, dict[str, Any]] = {
    "prefill_first": {"engine": CAUCHY_ENGINE},
    "vllm_0.6.5_default": {"engine": CAUCHY_ENGINE, "scheduler": "sarathi", "scheduler_options": {"chunk_tokens": 512}},
}
DEFAULT_ENGINE = "prefill_first"


def engine_options(engine: str) -> dict[str, Any]:
    """The ``InstanceConfig`` options of ``engine``; ValueError listing the known engines."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; known: {list(ENGINES)}")
    return {key: dict(value) if isinstance(value, dict) else value for key, value in ENGINES[engine].items()}


@dataclass(frozen=True)
class CauchyWorkload:
    """One workload: ``lengths`` names its length sampler, ``scenario`` its env preset."""

    lengths: str
    scenario: str
    mean_prompt_tokens: float
    mean_output_tokens: float
    ttft_s: float
    tbt_s: float
    target_rps: float

    @property
    def tokens_per_request(self) -> float:
        """Mean prompt + output tokens: what CE counts per request (§3.1)."""
        return self.mean_prompt_tokens + self.mean_output_tokens

    def slo(self) -> SLO:
        """A fresh copy of the §3.3.3 SLO (``SLO`` is mutable)."""
        return SLO(ttft_s=self.ttft_s, tbt_s=self.tbt_s)


WORKLOADS: dict[str, CauchyWorkload] = {
    lengths: CauchyWorkload(lengths, preset, *PARAMETRIC_PRESETS[lengths], ttft_s, tbt_s, rate_rps)
    for lengths, (preset, rate_rps, ttft_s, tbt_s) in CAUCHY_WORKLOADS.items()
}


def get_workload(name: str) -> CauchyWorkload:
    """The workload whose length sampler is ``name``; ValueError listing the known ones."""
    if name not in WORKLOADS:
        raise ValueError(f"unknown Cauchy workload {name!r}; known: {list(WORKLOADS)}")
    return WORKLOADS[name]
