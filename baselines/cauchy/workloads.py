"""Cauchy's three workloads as the planner sees them (cauchy.txt §4.1, §3.3.3): mean lengths,
SLO targets and target QPS, keyed by the simulator's length-sampler name."""

from __future__ import annotations

from dataclasses import dataclass

from envs.scenarios.cauchy import CAUCHY_GPUS, CAUCHY_MODEL, CAUCHY_WORKLOADS, GPUS_PER_TYPE
from simulator.request import SLO
from simulator.workloads import PARAMETRIC_PRESETS

MODEL = CAUCHY_MODEL
INVENTORY = {gpu: GPUS_PER_TYPE for gpu in CAUCHY_GPUS}  # §4.1: 8 H800 + 8 A800 + 8 H20


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
