"""Per-instance observation features shared by every environment.

Each instance slot (``max_instances`` rows) gets ``INSTANCE_FEATURES`` columns, all float32
in [-1, 1]. Counts and sizes are squashed with ``x / (x + scale)`` (so they stay bounded
without clipping, and 0.5 means "x equals scale"); freeness, which can be negative or
infinite, with ``x / (|x| + scale)``. An empty slot is all zeros. A squashed count saturates
under a burst (200 and 250 waiting requests are 0.926 and 0.940), so the load is also given
scale-free: each instance's share of the cluster's requests and of each tier's requests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from envs.headroom import batch_size, default_headroom_fractions, freeness_normal
from simulator.cluster import Cluster
from simulator.instance import Instance, Lifecycle, Role
from simulator.sequence import Residency

COUNT_SCALE = 16.0  # requests
TOKEN_SCALE = 4096.0  # tokens
FREENESS_SCALE = 64.0  # blocks per request (Llumnix's migrate-out threshold is 3, scale-up 10)
SERVICE_TIME_SCALE_S = 10.0  # seconds
KV_BLOCKS_SCALE = 1000.0  # blocks (the squash scale of ``kv_blocks_per_request``)
SERVICE_TIME_EWMA_WEIGHT = 0.6  # weight of the newest completion (andersvestrum/llumnix_sim INFaaS config)

BASE_FEATURES = (
    "present",
    "starting",
    "serving",
    "draining",
    "role_aggregated",
    "role_prefill",
    "role_decode",
    "gpu_tflops",  # fp16 TFLOP/s of the instance's GPUs, squashed by 1,000
    "gpu_bandwidth",  # their memory GB/s, squashed by 10,000
    "cost_rate",  # $/hour of the instance, squashed by 10
    "waiting",
    "running",
    "swapped",
    "kv_used_fraction",
    "kv_capacity",  # KV capacity in tokens, squashed by 1M tokens
    "freeness",  # Llumnix dispatch freeness (see ``freeness``), signed squash
    "reasoning",
    "answering",
    "fresh_answering",
    "pacer_behind",  # the token pacer's SLO flag (pascal.txt Alg. 1), 0 without a TPOT target
    "pending_prefill_tokens",
    "kv_footprint",  # KV tokens on the GPU plus swapped requests' KV in host memory (pascal.txt Alg. 1 m_i), squashed by 1M tokens
    "demoted",  # reasoning requests demoted to the low-priority queue (pascal.txt §IV-C), squashed by 16
    "service_time_ewma",  # EWMA of completed requests' service time here, in s, squashed by 10 s (INFaaS, multitier-llumnix.txt §3.7)
    "answers_overdue",  # requests past </think>, queued or swapped, no answer token for over one TPOT target (pascal.txt §IV-B pacer), squashed by 16
    "freeness_full",  # K-tier F_full with the paper's default headroom (multitier-llumnix.txt eq. 1-4; equals ``envs.headroom.freeness_full``), signed squash
    "freeness_normal",  # F_normal, the same without headroom (eq. 1; the auto-scaling signal of §3.6), signed squash
    "kv_blocks_per_request",  # M / B of eq. 1 (KV blocks over the batch B), squashed by 1,000 blocks; 1 when B = 0
)


def instance_feature_names(num_tiers: int) -> tuple[str, ...]:
    return (BASE_FEATURES + tuple(f"tier_{k}" for k in range(num_tiers)) + ("request_share",)
            + tuple(f"tier_{k}_share" for k in range(num_tiers)))


def squash(x: float, scale: float) -> float:
    return x / (x + scale)


def signed_squash(x: float, scale: float) -> float:
    if math.isinf(x):
        return 1.0 if x > 0 else -1.0
    return x / (abs(x) + scale)


def freeness(instance: Instance) -> float:
    """Llumnix dispatch freeness in KV blocks per request (AlibabaPAI/llumnix): (free blocks −
    watermark − blocks wanted by every waiting request) / number of requests; an empty
    instance is infinitely free. Free blocks are counted at this moment."""
    requests = instance.num_requests
    if requests == 0:
        return math.inf
    kv = instance.kv
    block_size = kv.block_size
    wanted = sum(-(-s.prefill_target_tokens // block_size) for s in instance.waiting)
    free = kv.total_blocks - instance.kv_used_blocks_now()
    return (free - kv.watermark_blocks - wanted) / requests


class InstanceFeatures:
    """Fills the ``(max_instances, n_features)`` matrix from a cluster's live state."""

    def __init__(
        self,
        max_instances: int,
        num_tiers: int,
        tpot_target_s: float | None,
        reasoning: bool,
        fresh_quantum_tokens: int = 500,
    ) -> None:
        """``reasoning`` (or several tiers) turns on the per-request counts; without them
        ``answering`` is simply the running + swapped requests and ``tier_0`` all requests."""
        self.per_request_detail = reasoning or num_tiers > 1
        self.max_instances = max_instances
        self.num_tiers = num_tiers
        self.names = instance_feature_names(num_tiers)
        self.default_headroom = default_headroom_fractions(num_tiers)
        self.tpot_target_s = tpot_target_s
        self.fresh_quantum_tokens = fresh_quantum_tokens
        self.matrix = np.zeros((max_instances, len(self.names)), dtype=np.float32)
        self._counts = np.zeros((max_instances, 1 + num_tiers))  # requests and per-tier requests of each row
        self._cluster: Cluster | None = None  # the caches below belong to this cluster
        self._static: dict[int, list[float]] = {}
        self._service_seen = 0
        self._service_ewma_s: dict[int, float] = {}

    def fill(self, cluster: Cluster, slots: Sequence[int | None] | None = None) -> np.ndarray:
        """Row k describes instance ``slots[k]`` (an instance id, or None for an empty slot);
        by default instance k of the cluster. Stopped instances leave their row empty."""
        matrix, counts = self.matrix, self._counts
        matrix.fill(0.0)
        counts.fill(0.0)
        if slots is None:
            slots = list(cluster.instances)
        if len(slots) > self.max_instances:
            raise ValueError(f"{len(slots)} instance slots asked, more than the {self.max_instances} available")
        if cluster is not self._cluster:
            self._cluster, self._static, self._service_seen, self._service_ewma_s = cluster, {}, 0, {}
        self._update_service_time(cluster)
        for slot, instance_id in enumerate(slots):
            if instance_id is not None:
                instance = cluster.instances[instance_id]
                if instance.lifecycle != Lifecycle.STOPPED:
                    row, tiers = self.row(instance)
                    matrix[slot, :len(row)] = row
                    counts[slot] = [instance.num_requests, *tiers]
        self._fill_shares(matrix, counts)
        return matrix

    def _fill_shares(self, matrix: np.ndarray, counts: np.ndarray) -> None:
        """``request_share`` and ``tier_k_share``: a row's part of the column total over the
        filled rows (0 where the total is 0)."""
        totals = counts.sum(axis=0)
        shares = np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)
        matrix[:, -(1 + self.num_tiers):] = shares

    def _update_service_time(self, cluster: Cluster) -> None:
        """Fold the requests completed since the last call into each instance's EWMA of service
        time (first scheduled to finish, as INFaaS's latency monitor in andersvestrum/llumnix_sim
        measures it): ewma = w * newest + (1 - w) * ewma, the first completion taken as is."""
        ewma = self._service_ewma_s
        weight = SERVICE_TIME_EWMA_WEIGHT
        for outcome in cluster.outcomes[self._service_seen:]:
            if outcome.completed:
                service_s = outcome.finish_s - outcome.first_scheduled_s
                previous = ewma.get(outcome.instance_id)
                ewma[outcome.instance_id] = service_s if previous is None else weight * service_s + (1.0 - weight) * previous
        self._service_seen = len(cluster.outcomes)

    def _static_part(self, instance: Instance) -> list[float]:
        """Features fixed for an instance's life: role and hardware."""
        cached = self._static.get(instance.instance_id)
        if cached is None:
            gpu, n, role = instance.gpu, instance.config.num_gpus, instance.role
            cached = [
                float(role == Role.AGGREGATED),
                float(role == Role.PREFILL),
                float(role == Role.DECODE),
                squash(gpu.fp16_tflops * n, 1000.0),
                squash(gpu.mem_bandwidth_gbps * n, 10000.0),
                squash(gpu.price_per_hour_usd * n, 10.0),
            ]
            self._static[instance.instance_id] = cached
        return cached

    def row(self, instance: Instance) -> tuple[list[float], list[int]]:
        """The instance's features before the shares, and its request count per tier."""
        lifecycle = instance.lifecycle
        kv = instance.kv
        pending = sum(seq.prefill_target_tokens - seq.kv_tokens for seq in instance.waiting)
        reasoning = answering = fresh = demoted = overdue = 0
        overdue_before_s = instance.events.now_s - self.tpot_target_s if self.tpot_target_s is not None else -math.inf
        tiers = [0] * self.num_tiers
        last_tier = self.num_tiers - 1
        fresh_tokens = self.fresh_quantum_tokens
        if not self.per_request_detail:
            tiers[0] = instance.num_requests
            answering = len(instance.running) + len(instance.swapped)
        for seq in instance.sequences() if self.per_request_detail else ():
            tiers[seq.tier if seq.tier < last_tier else last_tier] += 1
            if seq.reasoning_tokens and seq.generated_tokens < seq.reasoning_tokens:
                reasoning += 1
                demoted += seq.demoted
            elif seq.generated_tokens > 0:
                answering += 1
                if (
                    seq.generated_tokens == seq.reasoning_tokens
                    and seq.residency != Residency.RUNNING
                    and seq.reasoning_end_s < overdue_before_s
                ):
                    overdue += 1
                if seq.reasoning_tokens and seq.generated_tokens - seq.reasoning_tokens < fresh_tokens:
                    fresh += 1
        used_blocks = instance.kv_used_blocks_now()
        block_size = kv.block_size
        host_tokens = block_size * sum(-(-seq.kv_tokens // block_size) for seq in instance.swapped)
        behind = (
            float(instance.answering_behind_pace(self.tpot_target_s)) if self.tpot_target_s is not None else 0.0
        )
        batch = batch_size(instance)
        f_normal = freeness_normal(instance)
        f_full = f_normal
        if batch and math.isfinite(f_normal):  # eq. 4: tier p's budget M·h_p counts once if p is present
            present = [h for h, count in zip(self.default_headroom, tiers) if count]
            f_full -= kv.total_blocks * sum(present) / batch
        return [
            1.0,
            float(lifecycle == Lifecycle.STARTING),
            float(lifecycle == Lifecycle.SERVING),
            float(lifecycle == Lifecycle.DRAINING),
            *self._static_part(instance),
            squash(len(instance.waiting), COUNT_SCALE),
            squash(len(instance.running), COUNT_SCALE),
            squash(len(instance.swapped), COUNT_SCALE),
            used_blocks / kv.total_blocks,
            squash(kv.capacity_tokens, 1e6),
            signed_squash(freeness(instance), FREENESS_SCALE),
            squash(reasoning, COUNT_SCALE),
            squash(answering, COUNT_SCALE),
            squash(fresh, COUNT_SCALE),
            behind,
            squash(pending, TOKEN_SCALE),
            squash(used_blocks * block_size + host_tokens, 1e6),
            squash(demoted, COUNT_SCALE),
            squash(self._service_ewma_s.get(instance.instance_id, 0.0), SERVICE_TIME_SCALE_S),
            squash(overdue, COUNT_SCALE),
            signed_squash(f_full, FREENESS_SCALE),
            signed_squash(f_normal, FREENESS_SCALE),
            squash(kv.total_blocks / batch, KV_BLOCKS_SCALE) if batch else 1.0,
            *(squash(t, COUNT_SCALE) for t in tiers),
        ], tiers
