"""servegym/Scaling-v0's native vector env (``envs.vector``): ``ScalingPool``, N ``ScalingEnv``s
whose scaling windows the compiled core's ``ScalingVectorEngine`` runs (the action's validity and
fallback, the drains and deployments with their GPUs and dollars, the units' routing, the engine to
the window's end, the instance matrix over the env's slots, ``scaling_context``, the mask, the
reward) without the GIL. At an episode's end the pool replays the kernel's deployments and releases
on the env's Python cluster (``CompiledCluster.adopt`` / ``adopt_release``), so its instances, GPUs
and cost are the single env's.

What the kernel covers, checked at construction (anything else raises ``NotCoveredError`` naming
it): ``ScalingEnv`` itself on the compiled backend, in either action mode; the rewards of
``COVERED_REWARDS``; ``strict=False``; ``render_mode=None``; a plain ``Scenario`` (units of one
aggregated instance each) or a ``ComboScalingScenario`` (units of GPU combos, Cauchy §3.1) whose
cluster runs no Python callback. Its actions are one row per env: the per-kind choices (``action="per_kind"``) or the
one index (``action="one_unit"``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from servegym_core import _core

from envs.combo_scenario import ComboScalingScenario
from envs.native_pool import NativePool, check_common, fill_episode_numbers, not_covered
from envs.rewards import CostReward, LatencyReward, SLOReward, tier_weights
from envs.scaling import DeployedUnit, ScalingEnv
from envs.scenario import Scenario
from hardware.latency import weight_load_time_s
from simulator.compiled import CompiledCluster
from simulator.compiled_combos import CompiledComboCluster
from simulator.compiled_setup import instance_settings
from simulator.instance import InstanceConfig
from simulator.pipeline import create_instance

COVERED_REWARDS = {"slo": (0, SLOReward), "latency": (1, LatencyReward), "cost": (2, CostReward)}
"""The rewards the kernel computes, by name: the kernel's code and the Python class it ports."""
CLUSTER_CONTEXT = ("arrivals_per_s", "waiting", "running", "swapped", "cost_rate", "slo_attainment", "finished",
                   "arrived")
KIND_CONTEXT = ("serving_units", "starting_units", "draining_units")
"""``scaling_context``'s fields, the cluster's then each kind's, as the kernel writes them."""
MASK_PARTS = {"per_kind": ["choice"], "one_unit": ["hold", "add", "remove"]}
SCENARIO_TYPES = (Scenario, ComboScalingScenario)
"""The scenarios the kernel covers: units of one aggregated instance, or GPU combos."""


def unit_configs(env: ScalingEnv) -> list[InstanceConfig]:
    """Every config the env's unit kinds deploy, kind by kind (the spec's ``configs``)."""
    return [config for unit in env.units for config in unit.configs]


def gpu_types(env: ScalingEnv) -> list[str]:
    """The GPU types the kernel counts: the inventory's, then any other a unit's config names (none free)."""
    types = list(env.scenario.gpu_inventory)
    return types + list(dict.fromkeys(c.gpu for c in unit_configs(env) if c.gpu not in types))


def kernel_configs(env: ScalingEnv) -> list[Any]:
    """The core's ``ScalingConfig`` of each of ``unit_configs(env)``: the engine settings, latency
    model, GPUs, price, weight-load time and static observation features of an instance of it
    (made on a cluster of the scenario's own; each episode gives its model and GPU indexes)."""
    cluster = env.scenario.build_cluster(track_arrays=True, backend="compiled")
    types = gpu_types(env)
    configs = []
    for config in unit_configs(env):
        instance = create_instance(len(cluster.instances), config, cluster.events, cluster, coalesce=cluster.coalesce)
        gpu, n, role = instance.gpu, config.num_gpus, instance.role.value
        static = [float(role == "aggregated"), float(role == "prefill"), float(role == "decode"),
                  float(gpu.fp16_tflops * n), float(gpu.mem_bandwidth_gbps * n), float(gpu.price_per_hour_usd * n)]
        load_s = weight_load_time_s(instance.model, gpu, config.tp, config.pp, config.dtype)
        configs.append(_core.ScalingConfig(instance_settings(instance, 0), instance.latency._evaluator,
                                           types.index(config.gpu), n, gpu.price_per_second_usd, load_s, static))
    return configs


def scaling_kernel_spec(env: ScalingEnv) -> Any:
    """The core's ``ScalingSpec`` of ``env`` (an unwrapped env), or ``NotCoveredError`` naming
    what the kernel does not compute."""
    check_common(env, ScalingEnv, SCENARIO_TYPES)
    if env.strict:
        raise not_covered("strict=True (the joint limits of a per-kind action are known only inside the kernel)")
    if env.reward_name not in COVERED_REWARDS or type(env.reward_fn) is not COVERED_REWARDS[env.reward_name][1]:
        raise not_covered(f"reward={env.reward_name!r} (covered: {', '.join(COVERED_REWARDS)})")
    schema = env.schema
    if schema.context_names != CLUSTER_CONTEXT + KIND_CONTEXT:
        raise not_covered(f"context fields {schema.context_names} (the kernel writes {CLUSTER_CONTEXT + KIND_CONTEXT})")
    if [part.name for part in schema.mask_parts] != MASK_PARTS[env.action_mode]:
        raise not_covered(f"mask parts {[part.name for part in schema.mask_parts]}")
    spec = env.features.observation_spec(_core.ScalingSpec())
    spec.context_k, spec.context_c = (a.tolist() for a in schema.context_encoder.coefficients)
    for name in CLUSTER_CONTEXT:
        setattr(spec, f"ctx_{name}", int(schema.context_positions(name)[0]))
    for name in KIND_CONTEXT:
        setattr(spec, f"ctx_{name}", schema.context_positions(name).tolist())
    spec.window_s = env.scaling_window_s
    spec.one_unit = env.action_mode == "one_unit"
    sizes = [len(unit.configs) for unit in env.units]
    spec.kind_offsets = np.cumsum([0] + sizes).tolist()
    spec.kind_configs = list(range(sum(sizes)))
    spec.kind_weights = [float(unit.routing_weight) for unit in env.units]
    spec.provisioning_s = float(env.scenario.provisioning_s)
    spec.combos = isinstance(env.scenario, ComboScalingScenario)
    spec.combo_basic_rr = spec.combos and env.scenario.instance_scheduler == "basic_rr"
    spec.configs = kernel_configs(env)
    spec.gpu_inventory = [env.scenario.gpu_inventory.get(gpu, 0) for gpu in gpu_types(env)]
    spec.invalid_action_penalty = float(env.invalid_action_penalty)
    spec.reward = COVERED_REWARDS[env.reward_name][0]
    spec.tier_weights = tier_weights(env.scenario)
    spec.e2e_scale_s = LatencyReward.E2E_SCALE_S
    if isinstance(env.reward_fn, CostReward):
        spec.usd_weight = env.reward_fn.usd_weight
        spec.waiting_potential = env.reward_fn.waiting_potential
    return spec


def scaling_episode_numbers(env: ScalingEnv) -> Any:
    """The core's ``ScalingEpisode`` of ``env`` just reset: the common numbers
    (``envs.native_pool.fill_episode_numbers``), then the GPUs held and in use, the units, slots
    and counters ``ScalingEnv`` keeps, and the cost reward's state."""
    episode = fill_episode_numbers(env, _core.ScalingEpisode(), (CompiledCluster, CompiledComboCluster))
    cluster = env.cluster
    if cluster.router_spec.name != "units":
        raise not_covered(f"router {cluster.router_spec.name!r} (the kernel routes over the units in the engine)")
    if len(cluster.outcomes) != cluster.engine.num_outcomes:
        raise not_covered("outcomes recorded outside the engine (a completion hook or a cascade)")
    types = gpu_types(env)
    episode.held_ids = list(cluster._held)
    episode.held_gpu_types = [types.index(cluster.instances[i].config.gpu) for i in cluster._held]
    episode.gpus_in_use = [cluster.gpus_in_use.get(gpu, 0) for gpu in types]
    indexes = [cluster.engine_indexes(config.model, config.gpu) for config in unit_configs(env)]
    episode.config_models = [model for model, _ in indexes]
    episode.config_gpus = [gpu for _, gpu in indexes]
    episode.unit_kinds = [unit.kind for unit in env._deployed]
    episode.unit_offsets = np.cumsum([0] + [len(unit.instance_ids) for unit in env._deployed]).tolist()
    episode.unit_members = [i for unit in env._deployed for i in unit.instance_ids]
    episode.slots = [-1 if slot is None else slot for slot in env._slots]
    episode.until_s = float(env._until_s)
    episode.window_first_outcome = env._window_first_outcome
    episode.seen = env._seen
    episode.submitted = cluster.pending_requests() + len(cluster.outcomes)
    if isinstance(env.reward_fn, CostReward):
        episode.last_cost_usd = env.reward_fn._last_cost_usd
        episode.potential = env.reward_fn._potential
    return episode


class ScalingPool(NativePool):
    """N ``ScalingEnv``s (compiled backend) and the core's ``ScalingVectorEngine`` stepping them."""

    env_type = ScalingEnv

    def make_core(self, num_threads: int) -> Any:
        env = self.envs[0]
        core = _core.ScalingVectorEngine(scaling_kernel_spec(env), self.num_envs, num_threads)
        self.configs = unit_configs(env)
        self.config_units = [(kind, position, len(unit.configs)) for kind, unit in enumerate(env.units)
                             for position in range(len(unit.configs))]
        """Per config: its unit kind, its place in the unit, the unit's size."""
        self.combos = env.scenario.combos if isinstance(env.scenario, ComboScalingScenario) else None
        self.action_width = len(env.units) if env.action_mode == "per_kind" else 1
        return core

    def episode(self, env: ScalingEnv) -> Any:
        return scaling_episode_numbers(env)

    def step(self, actions: Any) -> None:
        """Step every env: ``actions`` one row per env, the per-kind choices (shape (num_envs,
        kinds), each in [0, 3)) or the one index (shape (num_envs,) or (num_envs, 1), in [0,
        1 + 2 kinds)); else ``ValueError`` naming it."""
        array = np.asarray(actions)
        if self.action_width == 1 and array.ndim == 1:
            array = array.reshape(-1, 1)
        shape = (self.num_envs, self.action_width)
        if array.shape != shape or array.dtype.kind not in "iu":
            raise ValueError(f"actions {actions!r}: need {shape[0]} x {shape[1]} integer actions (shape {shape}), got "
                             f"shape {np.shape(actions)} of {array.dtype}")
        self.core.step(np.ascontiguousarray(array, dtype=np.int64))

    def end_env(self, i: int) -> None:
        """Replay the kernel's deployments and releases on env i's cluster, in their order, and
        give the env its units, slots and window."""
        env, core = self.envs[i], self.core
        cluster = env.cluster
        adopted: list[int] = []
        for config, instance_id, time_s in core.events(i):
            if config < 0:
                cluster.adopt_release(instance_id, time_s)
                continue
            if cluster.adopt(self.configs[config], time_s) != instance_id:
                raise RuntimeError(f"the kernel's instance {instance_id} was adopted under another id")
            adopted.append(instance_id)
            kind, position, size = self.config_units[config]
            if self.combos is not None and position == size - 1:  # the unit's last instance: its combo
                cluster.adopt_combo(self.combos[kind], adopted[-size:])
        kinds, offsets, members, slots, until_s, first_outcome = core.deployed(i)
        env._deployed = [DeployedUnit(kind, tuple(members[offsets[u]:offsets[u + 1]])) for u, kind in enumerate(kinds)]
        env._slots = [None if slot < 0 else slot for slot in slots]
        env._index_units()
        env._until_s, env._window_first_outcome = until_s, first_outcome
