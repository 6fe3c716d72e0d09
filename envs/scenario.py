"""Scenarios: a named, overridable description of a serving setup (hardware, deployment,
workload, SLOs, episode length) that every environment is built from."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hardware.gpus import get_gpu
from simulator.cluster import Cluster
from simulator.backends import DEFAULT_BACKEND, make_cluster
from simulator.instance import InstanceConfig, Role
from simulator.metrics import QoETargets
from simulator.request import SLO, Request
from simulator.workloads import (
    ARRIVAL_PROCESSES,
    LENGTH_SAMPLER_NAMES,
    arrival_process,
    check_arrival_options,
    generate_request_table,
    length_sampler,
    load_azure_trace,
    sample_tiers,
)
from simulator.workloads.hash_traces import hash_trace_path, load_hash_trace, read_hash_trace

AZURE_ARRIVALS = ("azure_conv", "azure_code")  # replayed from the Azure 2023 trace, not drawn
HASH_TRACE_ARRIVALS = ("mooncake_conversation", "mooncake_synthetic")  # Mooncake's traces, with block hashes
TRACE_ARRIVALS = AZURE_ARRIVALS + HASH_TRACE_ARRIVALS
TRACE_LENGTHS = "trace"  # with trace arrivals: the trace's own lengths


def _number(name: str, value: Any, *, positive: bool) -> None:
    """Raise unless ``value`` is a finite real number, > 0 (``positive``) or >= 0."""
    if (isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value)
            or (value <= 0 if positive else value < 0)):
        raise ValueError(f"{name} must be a finite number {'> 0' if positive else '>= 0'}, got {value!r}")


def _integer(name: str, value: Any, minimum: int) -> None:
    """Raise unless ``value`` is an int (not a bool) >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _of_type(name: str, value: Any, kind: type | tuple[type, ...], what: str) -> None:
    """Raise unless ``value`` is a ``kind`` (``what`` says so in the message)."""
    if not isinstance(value, kind):
        raise ValueError(f"{name} must be {what}, got {value!r}")


def _as_tuple(owner: Any, name: str) -> tuple[Any, ...]:
    """Field ``name`` of a frozen dataclass as a tuple (a list, e.g. from YAML, is converted)."""
    value = getattr(owner, name)
    if isinstance(value, list):
        value = tuple(value)
        object.__setattr__(owner, name, value)
    _of_type(name, value, tuple, "a tuple")
    return value


@dataclass(frozen=True)
class InstanceGroup:
    """``count`` identical replicas."""

    config: InstanceConfig
    count: int

    def __post_init__(self) -> None:
        if not isinstance(self.count, int) or self.count < 0:
            raise ValueError(f"InstanceGroup.count must be a non-negative integer, got {self.count!r}")
        self.config.resolved()


@dataclass(frozen=True)
class Workload:
    """The request stream of one episode.

    ``arrival``: a registered arrival process (``simulator.workloads.ARRIVAL_PROCESSES``:
    ``poisson`` or ``gamma`` (with ``cv``) at ``rate_rps``; ``servegen``, the pooled ServeGen day
    scaled to mean ``rate_rps``; ``piecewise``, the rates of ``arrival_options`` ``boundaries_s``
    / ``rates_rps``; more through ``register_arrival_process``), built with ``arrival_options``;
    or ``azure_conv`` / ``azure_code`` (the real Azure 2023 trace's arrival times rescaled to
    ``rate_rps``, as Cauchy §4.1 does); or ``mooncake_conversation`` / ``mooncake_synthetic``
    (Mooncake's traces with their prompts' block hashes, ``simulator.workloads.hash_traces``: an
    episode is a window of consecutive requests starting at a row drawn uniformly from the
    generator, its arrivals rescaled to mean ``rate_rps``; lengths and hashes are the trace's,
    so ``lengths`` must be ``"trace"``). ``lengths`` names a length sampler
    (``simulator.workloads.LENGTH_SAMPLER_NAMES``); with trace arrivals ``"trace"`` keeps the
    trace's own lengths.
    ``slo_by_tier[k]`` is tier k's targets (one entry serves every tier); a mapping such as
    ``{"ttft_s": 1.0}`` (from YAML) becomes an ``SLO``. A field of the wrong type or out of
    range raises ``ValueError`` naming it and its value.
    """

    arrival: str = "poisson"
    rate_rps: float = 10.0
    cv: float = 1.0
    arrival_options: dict[str, Any] = field(default_factory=dict)
    lengths: str = "sharegpt"
    lengths_options: dict[str, Any] = field(default_factory=dict)
    priorities: str | None = None
    num_tiers: int = 1
    slo_by_tier: tuple[SLO, ...] = (SLO(),)

    def __post_init__(self) -> None:
        known_arrivals = [*ARRIVAL_PROCESSES, *TRACE_ARRIVALS]
        if not isinstance(self.arrival, str) or self.arrival not in known_arrivals:
            raise ValueError(f"unknown arrival {self.arrival!r}; known: {known_arrivals}")
        _number("rate_rps", self.rate_rps, positive=True)
        _number("cv", self.cv, positive=True)
        _of_type("arrival_options", self.arrival_options, Mapping, "a mapping of arrival-process options")
        if self.arrival in TRACE_ARRIVALS:
            if self.arrival_options:
                raise ValueError(f"arrival {self.arrival!r} replays a trace and takes no arrival_options, "
                                 f"got {dict(self.arrival_options)}")
        else:
            check_arrival_options(self.arrival, dict(self.arrival_options))
        known_lengths = [*LENGTH_SAMPLER_NAMES, TRACE_LENGTHS]
        if not isinstance(self.lengths, str) or self.lengths not in known_lengths:
            raise ValueError(f"unknown lengths {self.lengths!r}; known: {known_lengths}")
        if self.lengths == TRACE_LENGTHS and self.arrival not in TRACE_ARRIVALS:
            raise ValueError(f"lengths 'trace' needs trace arrivals {list(TRACE_ARRIVALS)}, got arrival {self.arrival!r}")
        if self.arrival in HASH_TRACE_ARRIVALS and self.lengths != TRACE_LENGTHS:
            raise ValueError(f"arrival {self.arrival!r} brings its lengths with its block hashes: lengths must be "
                             f"'trace', got {self.lengths!r}")
        _of_type("lengths_options", self.lengths_options, Mapping, "a mapping of length-sampler options")
        _of_type("priorities", self.priorities, (str, type(None)), "a priority distribution name or None")
        _integer("num_tiers", self.num_tiers, 1)
        slos = _as_tuple(self, "slo_by_tier")
        if any(isinstance(slo, Mapping) for slo in slos):
            object.__setattr__(self, "slo_by_tier", tuple(_slo(k, slo) for k, slo in enumerate(slos)))
        for k, slo in enumerate(self.slo_by_tier):
            _of_type(f"slo_by_tier[{k}]", slo, SLO, "an SLO")
        if len(self.slo_by_tier) not in (1, self.num_tiers):
            raise ValueError(f"slo_by_tier has {len(self.slo_by_tier)} entries for {self.num_tiers} tiers")

    def slo(self, tier: int) -> SLO:
        """Tier ``tier``'s targets (immutable: every request of the tier holds the same ``SLO``)."""
        return self.slo_by_tier[tier if len(self.slo_by_tier) > 1 else 0]

    def sample(self, num_requests: int, rng: np.random.Generator) -> Sequence[Request]:
        """``num_requests`` requests, the same for the same generator state: a trace's as a list,
        synthetic ones as a ``RequestTable`` (their objects made when first read)."""
        if self.arrival in HASH_TRACE_ARRIVALS:
            rows = len(read_hash_trace(hash_trace_path(self.arrival)))
            if num_requests > rows:
                raise ValueError(f"{self.arrival} has only {rows} requests, {num_requests} asked")
            first = int(rng.integers(rows - num_requests + 1))
            requests = load_hash_trace(self.arrival, first_request=first, max_requests=num_requests,
                                       target_rate_rps=self.rate_rps)
            for request in self._with_tiers(requests, rng):
                request.slo = self.slo(request.tier)
            return requests
        if self.arrival in TRACE_ARRIVALS:
            requests = load_azure_trace(self.arrival, max_requests=num_requests, target_rate_rps=self.rate_rps)
            if len(requests) < num_requests:
                raise ValueError(f"{self.arrival} has only {len(requests)} requests, {num_requests} asked")
            if self.lengths != "trace":
                sampled = length_sampler(self.lengths, **self.lengths_options).sample(num_requests, rng)
                for request, prompt, output in zip(requests, sampled[0].tolist(), sampled[1].tolist()):
                    request.prompt_tokens, request.output_tokens = prompt, output
            for request in self._with_tiers(requests, rng):
                request.slo = self.slo(request.tier)
            return requests
        arrivals = arrival_process(self.arrival, self.rate_rps, self.cv, **self.arrival_options)
        return generate_request_table(
            arrivals, length_sampler(self.lengths, **self.lengths_options), num_requests, rng,
            priorities=self.priorities, num_tiers=self.num_tiers, slo=self.slo,
        )


    def _with_tiers(self, requests: list[Request], rng: np.random.Generator) -> list[Request]:
        """``requests`` with tiers drawn from ``priorities`` (all tier 0 without)."""
        if self.priorities is not None:
            tiers = sample_tiers(self.priorities, self.num_tiers, len(requests), rng)
            for request, tier in zip(requests, tiers.tolist()):
                request.tier = tier
        return requests


def _slo(tier: int, targets: Mapping[str, Any] | SLO) -> SLO:
    """``targets`` as an ``SLO``; unknown keys raise naming the tier."""
    if isinstance(targets, SLO):
        return targets
    known = [f.name for f in dataclasses.fields(SLO)]
    unknown = sorted(set(targets) - set(known))
    if unknown:
        raise ValueError(f"slo_by_tier[{tier}] has unknown target(s) {unknown}; known: {known}")
    return SLO(**targets)


@dataclass(frozen=True)
class ScalingUnit:
    """What servegym/Scaling-v0 adds or removes as one: instances deployed together, entry
    first (an aggregated instance, or a prefill instance with its decode instances, a GPU
    combo of Cauchy §3.1). Between scaling decisions arrivals go to the serving unit with
    the fewest requests per ``routing_weight`` (e.g. the unit's goodput)."""

    name: str
    configs: tuple[InstanceConfig, ...]
    routing_weight: float = 1.0

    def __post_init__(self) -> None:
        if not self.configs:
            raise ValueError(f"scaling unit {self.name!r} has no instance")
        if self.configs[0].role == Role.DECODE:
            raise ValueError(f"scaling unit {self.name!r}: its entry (first) instance cannot be decode-only")
        if not (isinstance(self.routing_weight, (int, float)) and np.isfinite(self.routing_weight)
                and self.routing_weight > 0):
            raise ValueError(f"routing_weight of {self.name!r} must be positive and finite, got {self.routing_weight!r}")

    def gpu_counts(self) -> dict[str, int]:
        """GPUs per type the unit holds."""
        counts: dict[str, int] = {}
        for config in self.configs:
            counts[config.gpu] = counts.get(config.gpu, 0) + config.num_gpus
        return counts


@dataclass(frozen=True)
class Scenario:
    """A serving setup an environment runs episodes of.

    ``instances`` are deployed (serving) at reset; ``gpu_inventory`` bounds what scaling may
    add (defaults to exactly what ``instances`` use). ``max_instances`` sizes observation and
    action spaces (slots for instances added by scaling). ``episode_requests`` is the
    episode's length in arrivals. ``tier_weights[k]`` weights tier k in the ``slo`` reward.
    ``qoe`` are the answering-phase targets of reasoning scenarios (PASCAL §V-A).
    ``cascade`` orders the models of a model cascade, smallest first (Cascadia §3.3);
    empty for scenarios without one. A field of the wrong type or out of range raises
    ``ValueError`` naming it and its value.
    """

    name: str
    description: str
    reference: str
    instances: tuple[InstanceGroup, ...]
    workload: Workload
    episode_requests: int = 1000
    gpu_inventory: dict[str, int] = field(default_factory=dict)
    max_instances: int = 0
    control_interval_s: float = 1.0
    tier_weights: tuple[float, ...] = (1.0,)
    qoe: QoETargets | None = None
    provisioning_s: float = 0.0
    record_token_curves: bool = False
    cascade: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("name", "description", "reference"):
            _of_type(name, getattr(self, name), str, "a string")
        for k, group in enumerate(_as_tuple(self, "instances")):
            _of_type(f"instances[{k}]", group, InstanceGroup, "an InstanceGroup")
        if not self.instances or sum(g.count for g in self.instances) == 0:
            raise ValueError(f"scenario {self.name!r} deploys no instance")
        _of_type("workload", self.workload, Workload, "a Workload")
        _integer("episode_requests", self.episode_requests, 1)
        _of_type("gpu_inventory", self.gpu_inventory, Mapping, "a mapping GPU name -> count")
        _integer("max_instances", self.max_instances, 0)
        _number("control_interval_s", self.control_interval_s, positive=True)
        for k, weight in enumerate(_as_tuple(self, "tier_weights")):
            _number(f"tier_weights[{k}]", weight, positive=False)
        _of_type("qoe", self.qoe, (QoETargets, type(None)), "QoETargets or None")
        _number("provisioning_s", self.provisioning_s, positive=False)
        _of_type("record_token_curves", self.record_token_curves, bool, "True or False")
        for k, model in enumerate(_as_tuple(self, "cascade")):
            _of_type(f"cascade[{k}]", model, str, "a model name")
        used: dict[str, int] = {}
        for group in self.instances:
            get_gpu(group.config.gpu)
            used[group.config.gpu] = used.get(group.config.gpu, 0) + group.count * group.config.num_gpus
        inventory = dict(self.gpu_inventory) if self.gpu_inventory else used
        for gpu, count in used.items():
            if inventory.get(gpu, 0) < count:
                raise ValueError(f"scenario {self.name!r} deploys {count} x {gpu} but the inventory has {inventory.get(gpu, 0)}")
        object.__setattr__(self, "gpu_inventory", inventory)
        deployed = sum(g.count for g in self.instances)
        if self.max_instances == 0:
            object.__setattr__(self, "max_instances", deployed)
        if self.max_instances < deployed:
            raise ValueError(f"max_instances={self.max_instances} is below the {deployed} deployed instances")
        if len(self.tier_weights) != self.workload.num_tiers:
            raise ValueError(f"tier_weights has {len(self.tier_weights)} entries for {self.workload.num_tiers} tiers")

    @property
    def num_tiers(self) -> int:
        return self.workload.num_tiers

    @property
    def prefix_caching(self) -> bool:
        """Whether any instance it deploys caches prefixes."""
        return any(group.config.resolved().prefix_caching for group in self.instances)

    @property
    def reasoning(self) -> bool:
        """Whether requests have a reasoning phase (the workload samples reasoning lengths)."""
        return self.workload.lengths == "servegen_deepseek_r1"

    def requests(self, rng: np.random.Generator) -> Sequence[Request]:
        return self.workload.sample(self.episode_requests, rng)

    def build_cluster(self, *, backend: str = DEFAULT_BACKEND, **cluster_options: Any) -> Cluster:
        """A cluster with this scenario's inventory and its instances serving, on the compiled
        engine (``simulator.compiled.CompiledCluster``, which refuses what it does not port) or the
        Python one (``backend="python"``, ``simulator.cluster.Cluster``)."""
        cluster = make_cluster(
            self.gpu_inventory, backend=backend, provisioning_s=self.provisioning_s,
            record_token_curves=self.record_token_curves, **cluster_options,
        )
        for group in self.instances:
            for _ in range(group.count):
                cluster.deploy(group.config, ready_now=True)
        return cluster

    def scaling_units(self) -> tuple[ScalingUnit, ...]:
        """The units Scaling-v0 may add or remove: here each distinct (aggregated) instance
        config, in group order; scenarios that deploy combos override this."""
        units: list[ScalingUnit] = []
        for group in self.instances:
            config = group.config
            if config.role != Role.AGGREGATED:
                raise ValueError(
                    f"scenario {self.name!r}: {config.model} on {config.gpu} has role {config.role!r}; "
                    "scale disaggregated instances as units of a scenario that defines scaling_units()"
                )
            name = f"{config.model}@{config.num_gpus}x{config.gpu}"
            if all(u.configs != (config,) for u in units):
                units.append(ScalingUnit(name, (config,)))
        return tuple(units)

    def deploy_unit(self, cluster: Cluster, unit: int, *, ready_now: bool = False) -> tuple[int, ...]:
        """Deploy one unit ``scaling_units()[unit]``; returns its instance ids, entry first."""
        return tuple(cluster.deploy(config, ready_now=ready_now) for config in self.scaling_units()[unit].configs)

    def deployed_units(self, cluster: Cluster) -> list[tuple[int, tuple[int, ...]]]:
        """(unit index, instance ids) of the units ``build_cluster`` deployed, in id order."""
        configs = [u.configs[0] for u in self.scaling_units()]
        return [(configs.index(i.config), (i.instance_id,)) for i in cluster.instances.values()]

    def with_overrides(self, **overrides: Any) -> Scenario:
        """A copy with fields replaced; workload fields (``rate_rps``, ``lengths``, ...) may be
        given at top level; a subclass's own fields too. Unknown names raise."""
        scenario_fields = {f.name for f in dataclasses.fields(self)}
        workload_fields = {f.name for f in dataclasses.fields(self.workload)}
        top = {k: v for k, v in overrides.items() if k in scenario_fields}
        work = {k: v for k, v in overrides.items() if k in workload_fields and k not in scenario_fields}
        unknown = set(overrides) - set(top) - set(work)
        if unknown:
            raise ValueError(
                f"unknown scenario override(s) {sorted(unknown)}; known: {sorted(scenario_fields | workload_fields)}"
            )
        if work:
            top["workload"] = dataclasses.replace(top.get("workload", self.workload), **work)
        return dataclasses.replace(self, **top)
