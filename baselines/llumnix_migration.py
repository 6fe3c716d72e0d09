"""Llumnix load-rebalancing migration for servegym/Migration-v0 (periodic mode).

``llumnix_migration`` is the K-tier paper's rule (Llumnix-K §3.5): every
migration interval, when the freeness gap ΔF = max F − min F reaches θ = 0.3 blocks per
request, the least free instance (source) sends one request to the freest one
(destination). F is F_full with the paper's default headroom (§3.4: "F_full ... is used for
dispatch and migration targeting"), the ``freeness_full`` feature. Llumnix pairs the i-th
source with the i-th destination for several pairs per round (AlibabaPAI/llumnix; the paper's
published simulator andersvestrum/llumnix_sim ``rebalance``); Migration-v0 takes one pair per
step, so this is the first pair, and with the 0.05 s interval a sustained gap moves one
request every 50 ms.

``llumnix_migration_public`` is public Llumnix's defaults (DESIGN.md, AlibabaPAI/llumnix
``Balanced`` pairing): sources are instances whose migration freeness is below the migrate-out
threshold of 3 blocks per request, destinations those above it; the least free source pairs
with the freest destination. Migration freeness is F_normal less vLLM's watermark (1% of the
KV blocks) per batch slot: (M − physical − head-of-line demand − watermark) / B, B = running
+ 1 if anything waits (simulator.headroom).

Which request moves is the environment's choice (``envs.migration.migration_candidate``:
queued requests first, then low-priority running decode requests with small KV, §3.5). Sources
and destinations are the slots the action mask allows. The gap is measured over those slots:
an instance that has nothing to give away cannot be a source, and a destination must have room
for the source's running candidate (its KV plus the watermark and ``ROOM_SLACK_TOKENS``, as
the observation shows it), so the policy never asks for a migration the env refuses.
"""

from __future__ import annotations

import math
from typing import ClassVar

import gymnasium as gym
import numpy as np

from baselines.policy import Policy, register
from envs.schema import DecodedObservation

MIGRATION_ENV_ID = "servegym/Migration-v0"
REBALANCE_GAP_BLOCKS = 0.3  # θ of §3.5, in blocks per request
MIGRATE_OUT_FREENESS_BLOCKS = 3.0  # public Llumnix: migrate out below 3 free blocks per request
WATERMARK_FRACTION = 0.01  # vLLM keeps 1% of the KV blocks free (simulator.kv_blocks default)
ROOM_SLACK_TOKENS = 64  # block rounding of the candidate's KV and tokens decoded since the observation


def rebalance_pair(
    freeness: np.ndarray, sources: np.ndarray, destinations: np.ndarray, gap_blocks: float
) -> tuple[int, int] | None:
    """The (source, destination) slots of one rebalancing step, or None.

    The source is the least free of ``sources``, the destination the freest of
    ``destinations`` other than the source (lowest slot on ties); they pair when the
    destination's F exceeds the source's by at least ``gap_blocks`` (an idle destination,
    F = ∞, always qualifies unless the source is idle too)."""
    source_slots = np.flatnonzero(sources)
    if source_slots.size == 0:
        return None
    source = int(source_slots[np.argmin(freeness[source_slots])])
    destination_slots = np.flatnonzero(destinations)
    destination_slots = destination_slots[destination_slots != source]
    if destination_slots.size == 0:
        return None
    destination = int(destination_slots[np.argmax(freeness[destination_slots])])
    with np.errstate(invalid="ignore"):
        gap = float(freeness[destination] - freeness[source])
    if math.isnan(gap) or gap < gap_blocks:
        return None
    return source, destination


class MigrationPolicy(Policy):
    """Shared reading of Migration-v0's observation: the mask, the candidates and KV room."""

    env_ids: ClassVar[tuple[str, ...]] = (MIGRATION_ENV_ID,)

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        if self.env.mode != "periodic":
            raise ValueError(f"policy {self.name!r} drives Migration-v0 in mode='periodic', not {self.env.mode!r}")
        self.slots = self.schema.max_instances
        self.noop = np.array([self.slots, self.slots], dtype=np.int64)

    def masks(self, view: DecodedObservation) -> tuple[np.ndarray, np.ndarray]:
        """Valid source and destination slots (the no-op index dropped)."""
        return view.mask("source")[:self.slots], view.mask("destination")[:self.slots]

    def room_for(self, view: DecodedObservation, source: int) -> np.ndarray:
        """Slots whose free KV can take ``source``'s candidate now: any slot for a queued
        candidate (it holds no KV); for a running one, free tokens at least its KV, the
        watermark and ``ROOM_SLACK_TOKENS``."""
        if view.context["has_queued_candidate"][source]:
            return np.ones(self.slots, dtype=bool)
        need_tokens = float(view.context["candidate_kv_tokens"][source])
        capacity = view.instances["kv_capacity"]
        free = (1.0 - view.instances["kv_used_fraction"]) * capacity
        return free >= need_tokens + WATERMARK_FRACTION * capacity + ROOM_SLACK_TOKENS

    def pair(self, view: DecodedObservation, freeness: np.ndarray, sources: np.ndarray,
             destinations: np.ndarray, gap_blocks: float) -> np.ndarray:
        """``rebalance_pair`` over the destinations with room for the chosen source's candidate."""
        chosen = rebalance_pair(freeness, sources, destinations, gap_blocks)
        if chosen is None:
            return self.noop
        source = chosen[0]
        chosen = rebalance_pair(freeness, sources, destinations & self.room_for(view, source), gap_blocks)
        return self.noop if chosen is None else np.array(chosen, dtype=np.int64)


@register
class LlumnixMigration(MigrationPolicy):
    """K-tier Llumnix rebalancing (Llumnix-K §3.5): least free → freest when
    ΔF_full ≥ θ = 0.3; see the module docstring."""

    name = "llumnix_migration"

    def __init__(self, env: gym.Env, gap_blocks: float = REBALANCE_GAP_BLOCKS) -> None:
        super().__init__(env)
        if not (isinstance(gap_blocks, (int, float)) and math.isfinite(gap_blocks) and gap_blocks >= 0):
            raise ValueError(f"gap_blocks must be a non-negative finite number, got {gap_blocks!r}")
        self.gap_blocks = float(gap_blocks)

    def act(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        view = self.decode(observation)
        sources, destinations = self.masks(view)
        return self.pair(view, view.instances["freeness_full"], sources, destinations, self.gap_blocks)


@register
class LlumnixMigrationPublic(MigrationPolicy):
    """Public Llumnix defaults (AlibabaPAI/llumnix): migrate out of instances below 3 free
    blocks per request into instances above it; see the module docstring."""

    name = "llumnix_migration_public"

    def __init__(self, env: gym.Env, threshold_blocks: float = MIGRATE_OUT_FREENESS_BLOCKS) -> None:
        super().__init__(env)
        if not (isinstance(threshold_blocks, (int, float)) and math.isfinite(threshold_blocks)):
            raise ValueError(f"threshold_blocks must be a finite number, got {threshold_blocks!r}")
        self.threshold_blocks = float(threshold_blocks)

    @staticmethod
    def migration_freeness(view: DecodedObservation) -> np.ndarray:
        """Public Llumnix's migration freeness: F_normal less the watermark per batch slot."""
        normal = view.instances["freeness_normal"]
        with np.errstate(invalid="ignore"):
            return np.where(np.isfinite(normal), normal - WATERMARK_FRACTION * view.instances["kv_blocks_per_request"],
                            normal)

    def act(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        view = self.decode(observation)
        sources, destinations = self.masks(view)
        freeness = self.migration_freeness(view)
        sources = sources & (freeness < self.threshold_blocks)
        destinations = destinations & (freeness > self.threshold_blocks)
        return self.pair(view, freeness, sources, destinations, 0.0)
