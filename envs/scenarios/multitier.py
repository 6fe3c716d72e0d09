"""``multitier``: K-tier Llumnix scheduling on four replicas (Llumnix-K §4)."""

from __future__ import annotations

from envs.scenario import InstanceGroup, Scenario, Workload
from simulator.instance import InstanceConfig
from simulator.request import SLO
from simulator.workloads import PRIORITY_DISTRIBUTIONS

BEST_NUM_TIERS = 4  # §5.3: K = 4 is the best cost-effectiveness point for every distribution
MAIN_SWEEP_RATE_RPS = 1250.0  # §4.4: Poisson QPS of the priority-distribution sweeps
SCHEDULER_BENCHMARK_RATE_RPS = 10.0  # §4.4 / §5.2: QPS of the cross-scheduler benchmark
PAPER_KV_BLOCKS = 128  # the authors' run: --llumlet_scheduler_config_num_blocks 128 (16-token blocks)
MULTITIER_ENGINE = "vidur-2024"
"""The serving engine of every replica (``hardware.engines``): the paper ran in Vidur (§4)."""
PAPER_BATCH_CAP = 64  # the authors' run: --llumlet_scheduler_config_batch_size_cap 64


def exponential_tier_weights(num_tiers: int) -> tuple[float, ...]:
    """Slo-reward weight of tier k = 2^(K-1-k): each tier counts half the one above it, so at
    K = 4 a critical request weighs 8 background ones. This mirrors the paper's per-tier
    headroom that decays with priority (Eq. 3), at a gentler rate than its e^-1 per tier so the
    background tier still counts."""
    if not isinstance(num_tiers, int) or isinstance(num_tiers, bool) or num_tiers < 1:
        raise ValueError(f"num_tiers must be a positive integer, got {num_tiers!r}")
    return tuple(float(2 ** (num_tiers - 1 - k)) for k in range(num_tiers))


def multitier(num_tiers: int = BEST_NUM_TIERS, priorities: str = "uniform", kv_blocks: int | None = None) -> Scenario:
    """Four replicas under K priority tiers, as Llumnix-K §4.4 simulates on Vidur.

    Hardware/model: §4.4 says only "4 replica instances"; the authors' run configuration
    (andersvestrum/llumnix_sim ``vidur/metrics/latency_config.py``) sets Vidur's ``a100``
    device (A100 80 GB) and ``meta-llama/Llama-2-7b-hf`` at Vidur's default TP 1, with a batch
    cap of 64 requests, all kept here. KV pool: ``kv_blocks=None`` (default) sizes it from the
    A100's memory, the realistic setting the RL environments train on; the authors' run fixes a
    128-block pool of 16 tokens (``PAPER_KV_BLOCKS``), which ``kv_blocks=PAPER_KV_BLOCKS`` sets
    (``experiments.multitier_reproduction`` runs it as the paper setup). Local scheduler:
    ``priority`` (Llumlet's priority-ordered queue, §3.1).

    Tiers: K = ``num_tiers`` (default 4, the best K of §5.3) drawn from ``priorities``
    (``uniform`` default; ``gaussian`` / ``enterprise`` as §4.2 defines them); tier 0 is the
    highest. ``tier_weights`` = ``exponential_tier_weights(K)``. To change K through
    ``make_scenario`` pass matching weights:
    ``make_scenario("multitier", num_tiers=5, tier_weights=exponential_tier_weights(5))``.

    Load: Poisson at 1,250 req/s, the QPS of the main sweeps (§4.4), so an episode is a burst
    that queues up and drains, the regime where tiers separate (§5.1: with K = 3, tier 0's
    median TTFT is ~0.3 s against over 3 s for tier 2). ``SCHEDULER_BENCHMARK_RATE_RPS`` (10)
    is §5.2's under-loaded setting.

    Lengths: Table 1 (§4.3), ``multitier_table``: total tokens 64-128 / 128-256 / 256-384 /
    384-512 with probability ~65 / 22 / 10 / 2%, uniform within a bucket, split 2:1 between
    prefill and decode (mean ~146 tokens).

    SLO: the paper sets no latency targets (it reports speedups); every tier gets TTFT <= 1 s
    (about 3x tier 0's 0.3 s median above) and TPOT <= 100 ms; the tiers differ by weight.

    Episode: 2,000 requests (the paper's runs use 10K / 15K; fewer keep RL episodes short).
    Control interval: 50 ms, the migration interval of §3.5.
    """
    if priorities not in PRIORITY_DISTRIBUTIONS:
        raise ValueError(f"unknown priority distribution {priorities!r}; known: {list(PRIORITY_DISTRIBUTIONS)}")
    replica = InstanceConfig(engine=MULTITIER_ENGINE, gpu="A100-80GB", model="Llama-2-7B", scheduler="priority", max_batch_size=PAPER_BATCH_CAP,
                             kv_blocks=kv_blocks)
    pool = "A100 memory" if kv_blocks is None else f"{kv_blocks}-block KV pool"
    return Scenario(
        name="multitier",
        description=f"4 x Llama-2-7B on A100-80GB ({pool}), {num_tiers} {priorities} tiers, Poisson 1,250 req/s burst",
        reference="Llumnix-K §4 (setup), §4.2 (tier distributions), §5.3 (K = 4)",
        instances=(InstanceGroup(replica, 4),),
        workload=Workload(
            arrival="poisson",
            rate_rps=MAIN_SWEEP_RATE_RPS,
            lengths="multitier_table",
            priorities=priorities,
            num_tiers=num_tiers,
            slo_by_tier=(SLO(ttft_s=1.0, tbt_s=0.1),),
        ),
        episode_requests=2000,
        control_interval_s=0.05,
        tier_weights=exponential_tier_weights(num_tiers),
    )
