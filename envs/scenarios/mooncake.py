"""``mooncake``: real multi-turn conversations that share prefixes, on a heterogeneous cluster
with prefix caching, where routing decides what the caches hold."""

from __future__ import annotations

from envs.scenario import InstanceGroup, Scenario, Workload
from simulator.instance import InstanceConfig
from simulator.request import SLO

MOONCAKE_CONVERSATION_RATE_RPS = 3.4  # 12,031 requests over 3,537 s: the trace's own mean rate
MOONCAKE_RATE_RPS = 2.5  # the scenario's rate: at 3.4 req/s this cluster saturates under every router
MOONCAKE_ENGINE = "vllm-v1"
"""The serving engine of every replica (``hardware.engines``): a current vLLM, whose prefix
caching the scenario is about."""
HOST_CACHE_GB = 128.0  # Mooncake §5.3.1: "approximately 1 TB of DRAM for local caching" per 8-GPU node


def mooncake() -> Scenario:
    """8 replicas of Llama-3.1-8B (4 x A100-80GB, 4 x L40S) with automatic prefix caching, serving windows of 2,000 consecutive requests of Mooncake's conversation trace
    (Mooncake FAST'25 §5.2.1: sampled from Kimi's online service, prompt mean 12,035 tokens,
    40 % of prefill tokens a reusable prefix per its Table 2; 37.3 % of full 512-token blocks
    over the whole trace, 26-29 % within a 2,000-request window), each window rescaled to a
    mean of 2.5 req/s: at the trace's own 3.4 req/s this cluster saturates under every router
    (``MOONCAKE_CONVERSATION_RATE_RPS``; ``rate_rps=3.4`` runs it). An episode's window starts
    at a row drawn from the seed, so episodes differ. SLO: TTFT 5 s (a long prompt's prefill
    alone takes 1-3 s on an L40S) and TPOT 100 ms, Mooncake's tightest TBT threshold (§5.1:
    "TBT thresholds are set to 100 ms, 200 ms, and 300 ms").

    Engine: ``vllm-v1`` (``MOONCAKE_ENGINE``) with its own batching: prefix caching on, chunked
    prefill with vLLM V1's 2,048-token budget on both GPU types (its 8,192 needs 70 GiB and not
    an A100).
    Hit granularity is the trace's 512-token blocks (32 KV
    blocks of 16 tokens). Host tier: 128 GB of DRAM per instance for evicted prefixes, loaded
    over PCIe (Mooncake §5.3.1: about 1 TB of DRAM per 8-GPU node)."""
    model = "Llama-3.1-8B"
    return Scenario(
        name="mooncake",
        description="8 x Llama-3.1-8B with prefix caching on 4 A100-80GB + 4 L40S, Mooncake conversation trace",
        reference="Mooncake FAST'25 conversation trace (§5.2.1, Table 2); servegym's own deployment",
        instances=(
            InstanceGroup(InstanceConfig(engine=MOONCAKE_ENGINE, gpu="A100-80GB", model=model,
                                         host_cache_gb=HOST_CACHE_GB), 4),
            InstanceGroup(InstanceConfig(engine=MOONCAKE_ENGINE, gpu="L40S", model=model,
                                         host_cache_gb=HOST_CACHE_GB), 4),
        ),
        workload=Workload(arrival="mooncake_conversation", rate_rps=MOONCAKE_RATE_RPS, lengths="trace",
                          slo_by_tier=(SLO(ttft_s=5.0, tbt_s=0.1),)),
        episode_requests=2000,
        control_interval_s=1.0,
    )
