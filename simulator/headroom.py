"""K-tier Llumnix freeness with per-tier headroom (Llumnix-K §3.2–3.6).

An instance's freeness (eq. 1) is ``F = (M − Σ_r V(r)) / B``: M its KV blocks, V(r) the
virtual usage of each request on it (eq. 2), B its batch size. Virtual usage (eq. 2):
the head-of-line queued request counts its demand (the blocks its prefill needs), other
queued requests count 0, running requests their physical blocks; on top, each priority tier
p present on the instance charges its headroom budget ``H_p = M · h_p`` once (eq. 3–4, "the
full budget H_p is charged whenever any request of priority p is present, not per
request"). A draining instance carries an infinite-usage sentinel (§3.5), so F = −∞.

Choices the paper leaves open, fixed here:

- Queued means waiting or swapped out (no KV blocks on the GPU); the head of line is the
  first of them in the local scheduler's order (tier first with the ``priority`` scheduler).
  A waiting request demands the blocks of its prompt (plus tokens generated before a
  recompute preemption); a swapped one the blocks of its KV plus the next token's slot.
- B counts the running requests, plus one when something is queued (the head of line is
  about to join the batch; AlibabaPAI/llumnix counts migration freeness the same way), so
  B ≥ 1 whenever the instance holds a request. An instance with no request is infinitely
  free (eq. 1 with B = 0, and Llumnix's convention).
- Physical usage is read at this moment without changing simulator state
  (``Instance.kv_used_blocks_now``).

Budgets are given as fractions ``h_p`` of M, so one array serves instances of different
sizes; the paper's default is ``h_p = h_max · e^(−λp)`` (``default_headroom_fractions``).
``freeness_full`` (with headroom) drives dispatch and migration, ``freeness_normal``
(without) auto-scaling (§3.4, §3.6).
"""

from __future__ import annotations

import math
from collections.abc import Sequence as SequenceOf

import numpy as np

from simulator.instance import Instance, Lifecycle

HEADROOM_MAX_FRACTION = 0.20  # h_max: tier 0 reserves 20% of the KV blocks (§3.3)
LAST_TIER_DECAY = 3.0  # λ·(K − 1): H_{K−1} = e^(−3) H_0 ≈ 0.05 H_0 ≈ 0.01 M, "≈ 0"


def decay_rate(num_tiers: int) -> float:
    """λ of eq. 3: ``3 / (K − 1)`` for K ≥ 2, so that H_{K−1} = e^(−3) · H_0 ≈ 0 (1% of M
    with h_max = 0.2). At K = 4 this is λ = 1.0, the paper's Fig. 3 (total headroom 31.1% of
    M). With one tier there is no decay to define: 0."""
    if not isinstance(num_tiers, (int, np.integer)) or isinstance(num_tiers, bool) or num_tiers < 1:
        raise ValueError(f"num_tiers must be a positive integer, got {num_tiers!r}")
    return 0.0 if num_tiers == 1 else LAST_TIER_DECAY / (num_tiers - 1)


def default_headroom_fractions(num_tiers: int, max_fraction: float = HEADROOM_MAX_FRACTION) -> np.ndarray:
    """The paper's budgets as fractions of M (eq. 3): ``h_p = h_max · e^(−λp)``, p = 0..K−1.

    With K = 1 there is no lower tier to isolate tier 0 from (the paper's "no
    differentiation" runs), so its budget is 0."""
    rate = decay_rate(num_tiers)
    if not (math.isfinite(max_fraction) and 0.0 <= max_fraction <= 1.0):
        raise ValueError(f"max_fraction must be in [0, 1], got {max_fraction!r}")
    if num_tiers == 1:
        return np.zeros(1)
    return max_fraction * np.exp(-rate * np.arange(num_tiers))


def check_headroom_fractions(fractions: SequenceOf[float] | np.ndarray) -> np.ndarray:
    """``fractions`` as a float array, each in [0, 1]; ValueError naming any bad entry."""
    array = np.asarray(fractions, dtype=float)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"headroom fractions must be a non-empty 1-D array, got shape {array.shape}")
    bad = [float(x) for x in array if not (math.isfinite(x) and 0.0 <= x <= 1.0)]
    if bad:
        raise ValueError(f"headroom fractions must be in [0, 1], got {bad} in {array.tolist()}")
    return array


def physical_usage_blocks(instance: Instance) -> int:
    """Σ physUsage(r) over running requests: the KV blocks in use now."""
    return instance.kv_used_blocks_now()


def head_of_line_demand_blocks(instance: Instance) -> int:
    """req.demand of eq. 2 for the head of line (0 when nothing is queued):
    ``Instance.head_of_line_demand_blocks``."""
    return instance.head_of_line_demand_blocks()


def tiers_present(instance: Instance) -> set[int]:
    """Tiers with at least one request (queued or running) on the instance."""
    return {seq.tier for seq in instance.sequences()}


def tier_headroom_blocks(instance: Instance, headroom_fractions: SequenceOf[float] | np.ndarray) -> float:
    """V_headroom of eq. 4: Σ_p M · h_p · 1[numRequests(p) > 0]."""
    fractions = check_headroom_fractions(headroom_fractions)
    present = tiers_present(instance)
    beyond = sorted(t for t in present if t >= fractions.size)
    if beyond:
        raise ValueError(f"requests of tier(s) {beyond} on instance {instance.instance_id}, but headroom "
                         f"fractions cover tiers 0..{fractions.size - 1}")
    return instance.kv.total_blocks * float(sum(fractions[t] for t in sorted(present)))


def batch_size(instance: Instance) -> int:
    """B of eq. 1: running requests, plus one when something is queued."""
    return len(instance.running) + (1 if instance.waiting or instance.swapped else 0)


def virtual_usage_blocks(instance: Instance, headroom_fractions: SequenceOf[float] | np.ndarray | None) -> float:
    """Σ_r V(r) (eq. 2, with eq. 4's per-tier headroom; ``None``: no headroom); ∞ if draining."""
    if instance.lifecycle == Lifecycle.DRAINING:
        return math.inf
    usage = float(physical_usage_blocks(instance) + head_of_line_demand_blocks(instance))
    if headroom_fractions is not None:
        usage += tier_headroom_blocks(instance, headroom_fractions)
    return usage


def _freeness(instance: Instance, headroom_fractions: SequenceOf[float] | np.ndarray | None) -> float:
    usage = virtual_usage_blocks(instance, headroom_fractions)
    if math.isinf(usage):
        return -math.inf
    batch = batch_size(instance)
    if batch == 0:
        return math.inf
    return (instance.kv.total_blocks - usage) / batch


def freeness_full(instance: Instance, headroom_fractions: SequenceOf[float] | np.ndarray) -> float:
    """F_full (eq. 1 with headroom): the dispatch and migration signal (§3.4, §3.5)."""
    return _freeness(instance, headroom_fractions)


def freeness_normal(instance: Instance) -> float:
    """F_normal (eq. 1 without headroom): the auto-scaling signal (§3.6)."""
    return _freeness(instance, None)
