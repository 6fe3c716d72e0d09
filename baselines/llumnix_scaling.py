"""Llumnix freeness-band auto-scaling for servegym/Scaling-v0.

``llumnix_scaling`` is the K-tier paper's rule (Llumnix-K §3.6): the cluster-average
normal freeness F̄_normal = (1/N) Σ_i F_normal,i over the N serving instances; scale out when
F̄_normal < −0.5, scale in when F̄_normal > 1.5, otherwise hold. F_normal (no headroom) is the
``freeness_normal`` feature, so priority isolation is not read as a capacity shortage.

``llumnix_scaling_public`` is public Llumnix's band (DESIGN.md, AlibabaPAI/llumnix defaults):
scale up when the average dispatch freeness is below 10 blocks per request, down when above
60. Dispatch freeness counts every waiting request's blocks and the watermark (the
``freeness`` feature, ``envs.observation.freeness``).

An idle serving instance is infinitely free (eq. 1 with B = 0), so any idle instance makes the
average infinite: scale in. One instance changes per window: scale-out adds one of the first
instance kind that may be added, scale-in drains one of the last kind that may be removed
(Scaling-v0 drains that kind's most recently added instance); when the mask allows neither,
the policy holds.
"""

from __future__ import annotations

import math
from typing import ClassVar

import gymnasium as gym
import numpy as np

from baselines.policy import Policy, register
from envs.scaling import ADD, HOLD, REMOVE
from envs.schema import DecodedObservation

SCALING_ENV_ID = "servegym/Scaling-v0"
SCALE_OUT_BELOW_BLOCKS = -0.5  # §3.6
SCALE_IN_ABOVE_BLOCKS = 1.5  # §3.6
PUBLIC_SCALE_UP_BELOW_BLOCKS = 10.0  # AlibabaPAI/llumnix default scale-up threshold
PUBLIC_SCALE_DOWN_ABOVE_BLOCKS = 60.0  # AlibabaPAI/llumnix default scale-down threshold


def band_decision(mean_freeness: float, scale_out_below: float, scale_in_above: float) -> int:
    """ADD when ``mean_freeness < scale_out_below``, REMOVE when ``> scale_in_above``, else HOLD
    (both edges hold: the paper's inequalities are strict)."""
    if math.isnan(mean_freeness):
        raise ValueError("mean freeness is NaN: no serving instance to average over")
    if mean_freeness < scale_out_below:
        return ADD
    if mean_freeness > scale_in_above:
        return REMOVE
    return HOLD


class FreenessBandScaling(Policy):
    """Average a freeness feature over the serving instances and apply ``band_decision``."""

    env_ids: ClassVar[tuple[str, ...]] = (SCALING_ENV_ID,)
    action_modes: ClassVar[tuple[str, ...]] = ("per_kind",)
    freeness_feature: ClassVar[str] = ""

    def __init__(self, env: gym.Env, scale_out_below: float, scale_in_above: float) -> None:
        super().__init__(env)
        for label, value in (("scale_out_below", scale_out_below), ("scale_in_above", scale_in_above)):
            if not (isinstance(value, (int, float)) and math.isfinite(value)):
                raise ValueError(f"{label} must be a finite number, got {value!r}")
        if not scale_out_below < scale_in_above:
            raise ValueError(f"scale_out_below ({scale_out_below}) must be below scale_in_above ({scale_in_above})")
        self.scale_out_below, self.scale_in_above = float(scale_out_below), float(scale_in_above)
        self.kinds = len(self.env.units)

    def mean_freeness(self, view: DecodedObservation) -> float:
        """Average of the freeness feature over the serving instances (∞ if one is idle)."""
        serving = view.instances["serving"]
        if not serving.any():
            raise ValueError("no serving instance in the observation: nothing to average")
        return float(np.mean(view.instances[self.freeness_feature][serving]))

    def act(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        view = self.decode(observation)
        decision = band_decision(self.mean_freeness(view), self.scale_out_below, self.scale_in_above)
        action = np.full(self.kinds, HOLD, dtype=np.int64)
        if decision == HOLD:
            return action
        allowed = view.mask("choice")[:, decision]
        kinds = np.flatnonzero(allowed)
        if kinds.size:
            action[kinds[0] if decision == ADD else kinds[-1]] = decision
        return action


@register
class LlumnixScaling(FreenessBandScaling):
    """K-tier Llumnix auto-scaling (Llumnix-K §3.6): F̄_normal < −0.5 adds an
    instance, > 1.5 removes one."""

    name = "llumnix_scaling"
    freeness_feature = "freeness_normal"

    def __init__(
        self, env: gym.Env, scale_out_below: float = SCALE_OUT_BELOW_BLOCKS, scale_in_above: float = SCALE_IN_ABOVE_BLOCKS
    ) -> None:
        super().__init__(env, scale_out_below, scale_in_above)


@register
class LlumnixScalingPublic(FreenessBandScaling):
    """Public Llumnix auto-scaling: average dispatch freeness < 10 blocks per request adds an
    instance, > 60 removes one."""

    name = "llumnix_scaling_public"
    freeness_feature = "freeness"

    def __init__(
        self, env: gym.Env, scale_out_below: float = PUBLIC_SCALE_UP_BELOW_BLOCKS,
        scale_in_above: float = PUBLIC_SCALE_DOWN_ABOVE_BLOCKS,
    ) -> None:
        super().__init__(env, scale_out_below, scale_in_above)
