"""K-tier Llumnix headroom and dispatch (Llumnix-K §3.2–3.4) for servegym/Tier-v0
and servegym/Routing-v0.

Three headroom schedules, h_p the budget of tier p as a fraction of an instance's KV blocks M:

- ``llumnix``: the paper's exponential decay, eq. 3: ``H_p = M · h_max · e^(−λp)``, h_max = 0.20,
  λ = 3 / (K − 1) (``simulator.headroom.default_headroom_fractions``; at K = 4 the Fig. 3 budgets
  20 / 7.4 / 2.7 / 1.0 % of M);
- ``llumnix_binary``: the original Llumnix's two classes (§3.3): tier 0 reserves h_max, every
  other tier nothing;
- ``no_priority``: no headroom at all (the K = 1 "no differentiation" runs of §5.1).

On Tier-v0 the action sets those budgets: the discrete action is, per tier, the level closest
to h_p (levels are multiples of 0.1 · M, so the paper's K = 4 budgets become 0.2, 0.1, 0, 0);
with ``continuous=True`` the action is h_p itself.

On Routing-v0 a new request goes to the valid instance with the highest freeness under the
policy's budgets (§3.4, "argmax F"; ties to the lowest slot, as ``envs.tier.freest_instance``).
It reads F from the observation: ``F = F_normal − (M / B) · Σ_p h_p · 1[tier p present]``
(eq. 1 with eq. 4's per-tier budgets), from the ``freeness_normal``, ``kv_blocks_per_request``
and ``tier_k`` features; an idle instance (B = 0) is infinitely free, a draining one −∞. The
pending queue of §3.4 (tier 0 first, FCFS within a tier) never holds more than the request
being routed, because Routing-v0 decides at each arrival. A request finishing reasoning stays
where it is (Llumnix dispatches new requests; moving running ones is migration's job).
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from baselines.policy import register
from baselines.routing_classic import ROUTING_ENV_ID, RoutingPolicy
from envs.schema import DecodedObservation
from envs.tier import HEADROOM_CAP_FRACTION, HEADROOM_LEVELS
from simulator.headroom import HEADROOM_MAX_FRACTION, default_headroom_fractions

TIER_ENV_ID = "servegym/Tier-v0"


def freeness_from_features(
    freeness_normal: np.ndarray, kv_blocks_per_request: np.ndarray, tier_present: np.ndarray,
    headroom_fractions: np.ndarray,
) -> np.ndarray:
    """F under ``headroom_fractions`` per instance (eq. 1 with eq. 4): F_normal minus each
    present tier's budget M · h_p spread over the batch B. ``tier_present`` is instances x K
    booleans; infinite F_normal (idle, or draining at −∞) stays as it is."""
    headroom = np.asarray(tier_present, dtype=np.float64) @ np.asarray(headroom_fractions, dtype=np.float64)
    finite = np.isfinite(freeness_normal)
    charged = np.zeros_like(headroom)
    charged[finite] = kv_blocks_per_request[finite] * headroom[finite]
    return np.where(finite, freeness_normal - charged, freeness_normal)


def nearest_levels(fractions: np.ndarray) -> np.ndarray:
    """Tier-v0's discrete levels closest to ``fractions`` (level l is l / (L − 1) · h_cap)."""
    fractions = np.asarray(fractions, dtype=np.float64)
    if np.any(fractions < 0) or np.any(fractions > HEADROOM_CAP_FRACTION):
        raise ValueError(f"headroom fractions must be in [0, {HEADROOM_CAP_FRACTION}], got {fractions.tolist()}")
    return np.rint(fractions / HEADROOM_CAP_FRACTION * (HEADROOM_LEVELS - 1)).astype(np.int64)


class HeadroomPolicy(RoutingPolicy):
    """Base of the three headroom schedules: ``fractions(K)`` gives h_0..h_{K−1}."""

    env_ids: ClassVar[tuple[str, ...]] = (TIER_ENV_ID, ROUTING_ENV_ID)

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.num_tiers = int(self.schema.constants["num_tiers"])
        self.headroom_fractions = self.fractions(self.num_tiers)

    def fractions(self, num_tiers: int) -> np.ndarray:
        raise NotImplementedError

    def act(self, observation: dict[str, np.ndarray]) -> Any:
        if self.env.env_id == TIER_ENV_ID:
            return self.tier_action()
        return super().act(observation)

    def tier_action(self) -> np.ndarray:
        """Tier-v0: the budgets themselves (``continuous=True``) or the nearest levels."""
        if self.env.continuous:
            return self.headroom_fractions.astype(np.float32)
        return nearest_levels(self.headroom_fractions)

    def freeness(self, view: DecodedObservation) -> np.ndarray:
        """Each slot's F under this policy's budgets, read from the observation (an idle
        instance's M / B decodes to ∞)."""
        tier_present = np.stack([view.instances[f"tier_{k}"] > 0 for k in range(self.num_tiers)], axis=1)
        return freeness_from_features(
            view.instances["freeness_normal"], view.instances["kv_blocks_per_request"], tier_present,
            self.headroom_fractions,
        )

    def route(self, view: DecodedObservation, valid: np.ndarray) -> int:
        """§3.4: the valid instance with the highest F (the first on ties)."""
        slots = np.flatnonzero(valid)
        return int(slots[np.argmax(self.freeness(view)[slots])])


@register
class Llumnix(HeadroomPolicy):
    """K-tier Llumnix (Llumnix-K eq. 3): h_p = h_max · e^(−λp), λ = 3 / (K − 1)."""

    name = "llumnix"

    def fractions(self, num_tiers: int) -> np.ndarray:
        return default_headroom_fractions(num_tiers)


@register
class LlumnixBinary(HeadroomPolicy):
    """Original Llumnix's binary priority (Llumnix-K §3.3): tier 0 reserves h_max of
    the KV blocks, the other tiers nothing."""

    name = "llumnix_binary"

    def fractions(self, num_tiers: int) -> np.ndarray:
        fractions = np.zeros(num_tiers)
        fractions[0] = HEADROOM_MAX_FRACTION
        return fractions


@register
class NoPriority(HeadroomPolicy):
    """No headroom for any tier: plain freeness dispatch (Llumnix-K §5.1, K = 1)."""

    name = "no_priority"

    def fractions(self, num_tiers: int) -> np.ndarray:
        return np.zeros(num_tiers)
