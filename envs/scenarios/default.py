"""``default``: small and fast, for tests, smoke runs and the README's main job."""

from __future__ import annotations

from envs.scenario import InstanceGroup, Scenario, Workload
from simulator.instance import InstanceConfig
from simulator.request import SLO


def default() -> Scenario:
    """8 replicas of Llama-3.1-8B on two GPU types (4 x A100-80GB, 4 x L40S, vLLM FCFS), real
    ShareGPT lengths (Vidur's Llama-2-tokenised trace), Poisson arrivals at 10 req/s: near the
    cluster's saturation under round-robin (about 12 req/s), where placement matters because an
    L40S decodes about half as fast as an A100. SLO: TTFT 2 s, TPOT 100 ms. 500 requests."""
    model = "Llama-3.1-8B"
    return Scenario(
        name="default",
        description="8 x Llama-3.1-8B on 4 A100-80GB + 4 L40S, ShareGPT, Poisson 10 req/s",
        reference="servegym's own small setting (not from a paper)",
        instances=(
            InstanceGroup(InstanceConfig(gpu="A100-80GB", model=model), 4),
            InstanceGroup(InstanceConfig(gpu="L40S", model=model), 4),
        ),
        workload=Workload(arrival="poisson", rate_rps=10.0, lengths="sharegpt", slo_by_tier=(SLO(ttft_s=2.0, tbt_s=0.1),)),
        episode_requests=500,
        control_interval_s=1.0,
    )
