"""Cauchy's three workloads as the planner sees them (Cauchy §4.1, §3.3.3): mean lengths,
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

ENGINES = (CAUCHY_ENGINE, "vllm-0.6-chunked")
"""The engine profiles (``hardware.engines``) Cauchy's instances can run. §4.1 runs "vLLM v0.6.5"
and does not say whether chunked prefill was on: ``vllm-0.6`` batches prefill-only iterations
ahead of decodes (``simulator.schedulers.base``), what the planners' table and every Cauchy
result use except the labelled engine variants of ``experiments.cauchy_autoscaling`` and
``cauchy_reproduction``; ``vllm-0.6-chunked`` is what v0.6.5 picks by itself for this model
(chunked prefill with a 512-token budget, as max_model_len exceeds 32K)."""
DEFAULT_ENGINE = CAUCHY_ENGINE


def engine_options(engine: str) -> dict[str, Any]:
    """The ``InstanceConfig`` options of ``engine``; ValueError listing the known engines."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; known: {list(ENGINES)}")
    return {"engine": engine}


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
