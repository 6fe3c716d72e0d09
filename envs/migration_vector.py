"""servegym/Migration-v0's native vector env (``envs.vector``): ``MigrationPool``, N
``MigrationEnv``s (``mode="periodic"``) whose migration intervals the compiled core's
``MigrationVectorEngine`` runs (the action's validity and fallback, the live migration, the
engine to the next tick, the instance matrix, ``migration_context``, the mask, the reward)
without the GIL.

What the kernel covers, checked at construction (anything else raises ``NotCoveredError`` naming
it): ``MigrationEnv`` itself on the compiled backend in ``mode="periodic"`` with any of its routers
(``round_robin``, ``least_loaded``, ``llumnix``: all compiled); the rewards of
``COVERED_REWARDS``; ``strict=False``; ``render_mode=None``; a plain ``Scenario`` whose cluster runs
no Python callback. Its actions are (source slot, destination slot) pairs, one row of 2 per env.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from servegym_core import _core

from envs.migration import MigrationEnv
from envs.native_pool import NativePool, check_common, fill_episode_numbers, not_covered
from envs.rewards import LatencyReward, SLOReward, tier_weights

COVERED_REWARDS = {"slo": (0, SLOReward), "latency": (1, LatencyReward)}
"""The rewards the kernel computes, by name: the kernel's code and the Python class it ports."""
CLUSTER_CONTEXT = ("phase_mode", "recent_qps", "arrived", "live_migrations", "prompt_tokens", "generated_tokens")
SLOT_CONTEXT = ("has_queued_candidate", "has_running_candidate", "candidate_kv_tokens", "candidate_tier",
                "freeness_full")
"""``migration_context``'s fields, the cluster's then each slot's, as the kernel writes them."""


def migration_kernel_spec(env: MigrationEnv) -> Any:
    """The core's ``MigrationSpec`` of ``env`` (an unwrapped env), or ``NotCoveredError`` naming
    what the kernel does not compute."""
    check_common(env, MigrationEnv)
    if env.mode != "periodic":
        raise not_covered(f"mode={env.mode!r} (the kernel runs mode='periodic')")
    if env.strict:
        raise not_covered("strict=True (a refused pair is known only inside the kernel)")
    if env.reward_name not in COVERED_REWARDS or type(env.reward_fn) is not COVERED_REWARDS[env.reward_name][1]:
        raise not_covered(f"reward={env.reward_name!r} (covered: {', '.join(COVERED_REWARDS)})")
    schema = env.schema
    if schema.context_names != CLUSTER_CONTEXT + SLOT_CONTEXT:
        raise not_covered(f"context fields {schema.context_names} (the kernel writes {CLUSTER_CONTEXT + SLOT_CONTEXT})")
    if [part.name for part in schema.mask_parts] != ["source", "destination"]:
        raise not_covered(f"mask parts {[part.name for part in schema.mask_parts]}")
    spec = env.features.observation_spec(_core.MigrationSpec())
    spec.context_k, spec.context_c = (a.tolist() for a in schema.context_encoder.coefficients)
    for name in CLUSTER_CONTEXT:
        setattr(spec, f"ctx_{name}", int(schema.context_positions(name)[0]))
    for name in SLOT_CONTEXT:
        setattr(spec, f"ctx_{name}", schema.context_positions(name).tolist())
    spec.freeness_headroom = [float(h) for h in env._default_headroom]
    spec.migration_interval_s = env.migration_interval_s
    spec.invalid_action_penalty = float(env.invalid_action_penalty)
    spec.reward = COVERED_REWARDS[env.reward_name][0]
    spec.tier_weights = tier_weights(env.scenario)
    spec.e2e_scale_s = LatencyReward.E2E_SCALE_S
    return spec


def migration_episode_numbers(env: MigrationEnv) -> Any:
    """The core's ``MigrationEpisode`` of ``env`` just reset: the common numbers
    (``envs.native_pool.fill_episode_numbers``), then the instances' model codes, the next tick
    and the counters ``MigrationEnv`` keeps."""
    episode = fill_episode_numbers(env, _core.MigrationEpisode())
    cluster = env.cluster
    if len(cluster.outcomes) != cluster.engine.num_outcomes:
        raise not_covered("outcomes recorded outside the engine (a completion hook or a cascade)")
    if env._in_flight:
        raise not_covered("live migrations in flight at the reset")
    episode.model_codes = env._model_codes().tolist()
    episode.next_tick_s = float(env._next_tick_s)
    episode.submitted = cluster.pending_requests() + len(cluster.outcomes)
    episode.seen = env._seen
    return episode


class MigrationPool(NativePool):
    """N ``MigrationEnv``s (compiled backend, periodic) and the core's ``MigrationVectorEngine`` stepping them."""

    env_type = MigrationEnv

    def make_core(self, num_threads: int) -> Any:
        core = _core.MigrationVectorEngine(migration_kernel_spec(self.envs[0]), self.num_envs, num_threads)
        self.slots = self.envs[0].noop_index + 1
        return core

    def episode(self, env: MigrationEnv) -> Any:
        return migration_episode_numbers(env)

    def step(self, actions: Any) -> None:
        """Step every env: ``actions`` a (source slot, destination slot) pair per env (shape
        (num_envs, 2)), each in ``[0, max_instances]`` (else ``ValueError`` naming it)."""
        array = np.asarray(actions)
        shape = (self.num_envs, 2)
        if array.shape != shape or array.dtype.kind not in "iu":
            raise ValueError(f"actions {actions!r}: need {shape[0]} (source, destination) integer pairs (shape "
                             f"{shape}), got shape {array.shape} of {array.dtype}")
        bad = np.argwhere((array < 0) | (array >= self.slots))
        if len(bad):
            i, d = bad[0].tolist()
            raise ValueError(f"actions {actions!r}: {('source', 'destination')[d]} slot {array[i, d]} of env {i} is "
                             f"outside [0, {self.slots - 1}]")
        self.core.step(np.ascontiguousarray(array, dtype=np.int64))

    def info_arrays(self) -> dict[str, np.ndarray]:
        core = self.core
        return super().info_arrays() | {"migrations_started": core.migrations_started,
                                        "migrations_done": core.migrations_done,
                                        "migrations_aborted": core.migrations_aborted}

    def end_env(self, i: int) -> None:
        self.envs[i]._in_flight = {}
