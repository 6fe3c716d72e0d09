"""``default``: small and fast, for tests, smoke runs and the README's main job."""

from __future__ import annotations

from envs.scenario import InstanceGroup, Scenario, Workload
from simulator.instance import InstanceConfig
from simulator.request import SLO

DEFAULT_SCENARIO_ENGINE = "vllm-v1"
"""The serving engine of every replica (``hardware.engines``): servegym's default, a current vLLM."""
DEFAULT_RATE_RPS = 16.0


def default() -> Scenario:
    """8 replicas of Llama-3.1-8B on two GPU types (4 x A100-80GB, 4 x L40S) running a current
    vLLM (``vllm-v1``: chunked prefill, prefix caching), real ShareGPT lengths (Vidur's
    Llama-2-tokenised trace), Poisson arrivals at 16 req/s, SLO TTFT 1 s and TPOT 60 ms, 1,000
    requests per episode. The load is set so placement matters: an L40S decodes about half as
    fast as an A100, and on seed 0 round-robin meets 67% of SLOs, random 56%,
    least-outstanding-requests 90% and Llumnix's freeness dispatch 94% (the regime of the
    scenario's first engine, Vidur's 2024 vLLM, at 13 req/s: 64%, 56%, 92%, 98%)."""
    model = "Llama-3.1-8B"
    return Scenario(
        name="default",
        description="8 x Llama-3.1-8B on 4 A100-80GB + 4 L40S, ShareGPT, Poisson 16 req/s",
        reference="servegym's own small setting (not from a paper)",
        instances=(
            InstanceGroup(InstanceConfig(engine=DEFAULT_SCENARIO_ENGINE, gpu="A100-80GB", model=model), 4),
            InstanceGroup(InstanceConfig(engine=DEFAULT_SCENARIO_ENGINE, gpu="L40S", model=model), 4),
        ),
        workload=Workload(arrival="poisson", rate_rps=DEFAULT_RATE_RPS, lengths="sharegpt",
                          slo_by_tier=(SLO(ttft_s=1.0, tbt_s=0.06),)),
        episode_requests=1000,
        control_interval_s=1.0,
    )
