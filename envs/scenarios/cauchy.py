"""``cauchy``, ``cauchy_dailymail``, ``cauchy_longwriter``: Llama-3.1-8B on Cauchy's
heterogeneous 24-GPU cluster (Cauchy §4.1), one preset per workload."""

from __future__ import annotations

from envs.scenario import InstanceGroup, Scenario, Workload
from simulator.instance import InstanceConfig
from simulator.request import SLO

CAUCHY_MODEL = "Llama-3.1-8B"  # §4.1: every experiment
CAUCHY_ENGINE = "vllm-0.6"
"""The serving engine every Cauchy instance runs (``hardware.engines``): §4.1 serves with vLLM v0.6.5."""
CAUCHY_GPUS = ("H800-SXM", "A800-PCIe", "H20-NVL")
GPUS_PER_TYPE = 8
STARTUP_S = 90.0  # §3.5.1: provisioning, container start, model load, network
SCALING_WINDOW_S = 120.0  # §3.5.1: the autoscaler's sliding window
EPISODE_S = 600.0  # five of the autoscaler's 2-minute windows (§3.5.1)

# Length sampler -> (preset name, target QPS of §4.1, TTFT target s, TBT target s of §3.3.3).
CAUCHY_WORKLOADS: dict[str, tuple[str, float, float, float]] = {
    "cnn_dailymail": ("cauchy_dailymail", 54.0, 10.0, 0.050),
    "sharegpt_cauchy": ("cauchy", 50.0, 5.0, 0.030),
    "longwriter": ("cauchy_longwriter", 6.0, 1.0, 0.030),
}


def cauchy(lengths: str = "sharegpt_cauchy") -> Scenario:
    """Cauchy's testbed (Cauchy §4.1): 8 H800-SXM + 8 A800-PCIe + 8 H20-NVL, two GPUs per
    server (TP up to 2), Llama-3.1-8B for every experiment.

    Workload by ``lengths``: ``sharegpt_cauchy`` (default; ShareGPT, mean 290 / 207 tokens),
    ``cnn_dailymail`` (702 / 42) or ``longwriter`` (337 / 1,330), the §4.1 means. Each has the
    §3.3.3 SLO (TTFT <= 10 / 5 / 1 s, TBT <= 50 / 30 / 30 ms for DailyMail / ShareGPT /
    LongWriter) and the §4.1 target QPS (54 / 50 / 6). Arrivals are Poisson at that QPS, one
    of the paper's two generators ("Performance Report", §4.1); the other, the Azure 2023 conv
    trace's arrival times rescaled to the QPS with the dataset's lengths, is the override
    ``arrival="azure_conv"``.

    Deployment: two aggregated TP-2 instances (one 2-GPU server each) per GPU type, 12 of the
    24 GPUs, which meets the SLO at these rates in this simulator under round-robin (DailyMail
    ~99%, the others ~100%); the whole inventory is ``gpu_inventory`` for scaling, and
    ``max_instances`` = 24 leaves a slot per GPU for the single-GPU prefill / decode members of
    Cauchy's GPU Combos (§3.3, e.g. <1 x H800, 1 x A800>). New instances take 90 s to become
    ready (§3.5.1: provisioning, container start, model load, network; the simulator's own
    weight-load time comes on top). Control interval: the autoscaler's 2-minute window
    (§3.5.1). Episode: 10 minutes of arrivals (QPS x 600 s requests).
    """
    if lengths not in CAUCHY_WORKLOADS:
        raise ValueError(f"unknown Cauchy workload {lengths!r}; known: {list(CAUCHY_WORKLOADS)}")
    name, rate_rps, ttft_s, tbt_s = CAUCHY_WORKLOADS[lengths]
    groups = tuple(InstanceGroup(InstanceConfig(engine=CAUCHY_ENGINE, gpu=gpu, model=CAUCHY_MODEL, tp=2), 2) for gpu in CAUCHY_GPUS)
    return Scenario(
        name=name,
        description=f"Llama-3.1-8B, 8 H800 + 8 A800 + 8 H20 (12 deployed, TP 2), {lengths}, Poisson {rate_rps:g} req/s",
        reference="Cauchy §4.1 (cluster, model, workloads, QPS), §3.3.3 (SLOs), §3.5.1 (scaling window, 90 s start-up)",
        instances=groups,
        workload=Workload(
            arrival="poisson", rate_rps=rate_rps, lengths=lengths, slo_by_tier=(SLO(ttft_s=ttft_s, tbt_s=tbt_s),)
        ),
        episode_requests=round(rate_rps * EPISODE_S),
        gpu_inventory={gpu: GPUS_PER_TYPE for gpu in CAUCHY_GPUS},
        max_instances=len(CAUCHY_GPUS) * GPUS_PER_TYPE,
        control_interval_s=SCALING_WINDOW_S,
        provisioning_s=STARTUP_S,
    )


def cauchy_dailymail() -> Scenario:
    """``cauchy`` with the CNN DailyMail workload (long input, short output)."""
    return cauchy("cnn_dailymail")


def cauchy_longwriter() -> Scenario:
    """``cauchy`` with the LongWriter-6K workload (short input, long output)."""
    return cauchy("longwriter")
