"""servegym/Tier-v0's native vector env (``envs.vector``): ``TierPool``, N ``TierEnv``s whose
control intervals the compiled core's ``TierVectorEngine`` runs (headroom budgets from the
levels, the engine to the next control instant, the instance matrix, ``tier_context``, the
reward) without the GIL.

What the kernel covers, checked at construction (anything else raises ``NotCoveredError`` naming
it): ``TierEnv`` itself on the compiled backend with the discrete levels (``continuous=False``);
the rewards of ``COVERED_REWARDS``; ``render_mode=None``; a plain ``Scenario`` whose cluster runs
no Python callback. Its actions are ``MultiDiscrete`` levels, one row of K per env.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from servegym_core import _core

from envs.native_pool import NativePool, check_common, fill_episode_numbers, not_covered
from envs.rewards import LatencyReward, SLOReward, tier_weights
from envs.tier import HEADROOM_CAP_FRACTION, HEADROOM_LEVELS, TierEnv

COVERED_REWARDS = {"slo": (0, SLOReward), "latency": (1, LatencyReward)}
"""The rewards the kernel computes, by name: the kernel's code and the Python class it ports."""
TIER_CONTEXT = ("headroom_fraction", "arrivals_per_s", "finished", "slo_attainment", "mean_ttft_s", "recent_qps",
                "arrived")
"""``tier_context``'s fields, in the order the kernel writes them."""


def tier_kernel_spec(env: TierEnv) -> Any:
    """The core's ``TierSpec`` of ``env`` (an unwrapped env), or ``NotCoveredError`` naming what
    the kernel does not compute."""
    check_common(env, TierEnv)
    if env.continuous:
        raise not_covered("continuous=True (the kernel takes the discrete levels)")
    if env.reward_name not in COVERED_REWARDS or type(env.reward_fn) is not COVERED_REWARDS[env.reward_name][1]:
        raise not_covered(f"reward={env.reward_name!r} (covered: {', '.join(COVERED_REWARDS)})")
    schema = env.schema
    if schema.context_names != TIER_CONTEXT:
        raise not_covered(f"context fields {schema.context_names} (the kernel writes {TIER_CONTEXT})")
    if [part.name for part in schema.mask_parts] != ["level"]:
        raise not_covered(f"mask parts {[part.name for part in schema.mask_parts]}")
    spec = env.features.observation_spec(_core.TierSpec())
    spec.context_k, spec.context_c = (a.tolist() for a in schema.context_encoder.coefficients)
    for name in TIER_CONTEXT[:5]:
        setattr(spec, f"ctx_{name}", schema.context_positions(name).tolist())
    spec.ctx_recent_qps = int(schema.context_positions("recent_qps")[0])
    spec.ctx_arrived = int(schema.context_positions("arrived")[0])
    spec.control_interval_s = float(env.scenario.control_interval_s)
    spec.headroom_levels = HEADROOM_LEVELS
    spec.headroom_cap_fraction = HEADROOM_CAP_FRACTION
    spec.reward = COVERED_REWARDS[env.reward_name][0]
    spec.tier_weights = tier_weights(env.scenario)
    spec.e2e_scale_s = LatencyReward.E2E_SCALE_S
    return spec


def tier_episode_numbers(env: TierEnv) -> Any:
    """The core's ``TierEpisode`` of ``env`` just reset: the common numbers
    (``envs.native_pool.fill_episode_numbers``), then the budgets, the interval's statistics and
    the counters ``TierEnv`` keeps."""
    episode = fill_episode_numbers(env, _core.TierEpisode())
    cluster = env.cluster
    if len(cluster.outcomes) != cluster.engine.num_outcomes:
        raise not_covered("outcomes recorded outside the engine (a completion hook or a cascade)")
    episode.headroom_fractions = env.headroom_fractions.tolist()
    episode.interval_stats = env._interval_stats.ravel().tolist()
    episode.next_control_s = float(env._next_control_s)
    episode.submitted = cluster.pending_requests() + len(cluster.outcomes)
    episode.arrived_before = env._arrived_before
    episode.outcomes_before = env._outcomes_before
    episode.seen = env._seen
    return episode


class TierPool(NativePool):
    """N ``TierEnv``s (compiled backend) and the core's ``TierVectorEngine`` stepping them."""

    env_type = TierEnv

    def make_core(self, num_threads: int) -> Any:
        core = _core.TierVectorEngine(tier_kernel_spec(self.envs[0]), self.num_envs, num_threads)
        self.headroom_fractions = core.headroom_fractions
        size = self.envs[0].mask_size()
        self._mask = np.ones((self.num_envs, size), dtype=np.float32)  # every level is always valid
        self._invalid_action = np.zeros(self.num_envs, dtype=bool)
        self._levels = self.envs[0].action_space.nvec.tolist()
        return core

    def episode(self, env: TierEnv) -> Any:
        return tier_episode_numbers(env)

    @property
    def mask(self) -> np.ndarray:
        return self._mask

    @property
    def invalid_action(self) -> np.ndarray:
        return self._invalid_action

    def step(self, actions: Any) -> None:
        """Step every env: ``actions`` K levels per env (shape (num_envs, K)), each in
        ``[0, HEADROOM_LEVELS)`` (else ``ValueError`` naming it). Every action is valid."""
        array = np.asarray(actions)
        shape = (self.num_envs, len(self._levels))
        if array.shape != shape or array.dtype.kind not in "iu":
            raise ValueError(f"actions {actions!r}: need {shape[0]} x {shape[1]} integer levels (shape {shape}), got "
                             f"shape {array.shape} of {array.dtype}")
        self.core.step(np.ascontiguousarray(array, dtype=np.int64))

    def info_arrays(self) -> dict[str, np.ndarray]:
        return super().info_arrays() | {"headroom_fractions": self.headroom_fractions}
