"""Scenarios deployed as GPU Combos (Cauchy §3.1: prefill + decode instances, or one
aggregated instance, deployed and removed as one unit).

* ``ComboScenario``: a fixed deployment (e.g. an ILP plan made concrete) for
  servegym/Routing-v0. Its instances are the combos' instances, combo by combo (entry first);
  its cluster is a ``ComboCluster``, so the intra-combo instance scheduler (§3.4.2) runs as the
  cluster's dispatch and decode hooks while the env's policy picks the combo (by its entry
  slot, §3.4.1).
* ``ComboScalingScenario``: combos as the unit kinds servegym/Scaling-v0 adds and removes,
  under a ``piecewise`` load profile (§4.6).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from envs.scenario import InstanceGroup, ScalingUnit, Scenario
from envs.scenarios.cauchy import CAUCHY_ENGINE, CAUCHY_MODEL
from simulator.backends import make_combo_cluster
from simulator.combo_cluster import INSTANCE_SCHEDULERS, ComboCluster
from simulator.combos import Combo


def instance_options_with_engine(instance_options: dict[str, Any] | None) -> dict[str, Any]:
    """``instance_options`` with Cauchy's engine unless they name one."""
    return {"engine": CAUCHY_ENGINE, **(instance_options or {})}


def combo_instance_groups(
    combos: Sequence[Combo], model: str = CAUCHY_MODEL, instance_options: dict[str, Any] | None = None
) -> tuple[InstanceGroup, ...]:
    """The combos' instances (with ``instance_options``, ``Combo.instance_configs``; Cauchy's
    engine unless they name one) in deployment order, consecutive identical configs grouped."""
    groups: list[InstanceGroup] = []
    for combo in combos:
        for config in combo.instance_configs(model, **instance_options_with_engine(instance_options)):
            if groups and groups[-1].config == config:
                groups[-1] = InstanceGroup(config, groups[-1].count + 1)
            else:
                groups.append(InstanceGroup(config, 1))
    return tuple(groups)


def check_combo_deployment(
    scenario: Scenario, combos: Sequence[Combo], goodput_rps: Sequence[float], instance_scheduler: str,
    deployed: Sequence[Combo], model: str, instance_options: dict[str, Any] | None = None,
) -> None:
    """Validate a combo scenario: one positive goodput per combo, a known instance scheduler,
    and ``scenario.instances`` exactly the instances of the ``deployed`` combos."""
    if len(goodput_rps) != len(combos):
        raise ValueError(f"{len(goodput_rps)} goodputs for {len(combos)} combos")
    for combo, goodput in zip(combos, goodput_rps):
        if not (math.isfinite(goodput) and goodput > 0):
            raise ValueError(f"goodput of {combo.name} must be positive and finite, got {goodput!r}")
    if instance_scheduler not in INSTANCE_SCHEDULERS:
        raise ValueError(f"unknown instance scheduler {instance_scheduler!r}; known: {list(INSTANCE_SCHEDULERS)}")
    if scenario.instances != combo_instance_groups(deployed, model, instance_options):
        raise ValueError(f"scenario {scenario.name!r}: instances must be exactly the deployed combos' instances")


def build_combo_cluster(
    scenario: Scenario, deployed: Sequence[Combo], model: str, instance_scheduler: str,
    instance_options: dict[str, Any] | None = None, **cluster_options: Any,
) -> ComboCluster:
    """A ``ComboCluster`` with the scenario's inventory and the ``deployed`` combos serving, on the
    compiled engine or the Python one (``backend``, default ``DEFAULT_BACKEND``)."""
    cluster = make_combo_cluster(
        scenario.gpu_inventory, instance_scheduler=instance_scheduler, instance_options=instance_options,
        provisioning_s=scenario.provisioning_s, record_token_curves=scenario.record_token_curves, **cluster_options,
    )
    for combo in deployed:
        cluster.deploy_combo(combo, model, ready_now=True)
    return cluster


@dataclass(frozen=True)
class ComboScenario(Scenario):
    """``combos`` with their profiled goodputs (req/s), served by ``instance_scheduler``, every
    instance with ``instance_options`` (``ComboCluster``)."""

    combos: tuple[Combo, ...] = ()
    combo_goodput_rps: tuple[float, ...] = ()
    model: str = CAUCHY_MODEL
    instance_scheduler: str = "opportunistic"
    instance_options: dict[str, Any] = field(default_factory=lambda: instance_options_with_engine(None))

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.combos:
            raise ValueError(f"scenario {self.name!r} deploys no combo")
        check_combo_deployment(self, self.combos, self.combo_goodput_rps, self.instance_scheduler, self.combos, self.model,
                               self.instance_options)

    def entry_slots(self) -> list[int]:
        """Observation / action slot of each combo's entry instance (deployment order)."""
        return [members[0] for members in self.member_slots()]

    def member_slots(self) -> list[list[int]]:
        """Slots of each combo's instances, entry first."""
        slots, start = [], 0
        for combo in self.combos:
            size = 1 if combo.aggregated else 1 + combo.num_decode_instances
            slots.append(list(range(start, start + size)))
            start += size
        return slots

    def build_cluster(self, **cluster_options: Any) -> ComboCluster:
        return build_combo_cluster(self, self.combos, self.model, self.instance_scheduler, self.instance_options,
                                   **cluster_options)


def combo_scenario(
    base: Scenario,
    combos: Sequence[tuple[Combo, float]],
    *,
    instance_scheduler: str = "opportunistic",
    model: str = CAUCHY_MODEL,
    instance_options: dict[str, Any] | None = None,
    **overrides: Any,
) -> ComboScenario:
    """``base`` (e.g. ``make_scenario("cauchy_longwriter")``) redeployed as ``combos`` (each with
    its goodput, e.g. ``ComboPlan.combos()``), every instance with ``instance_options``;
    ``overrides`` are scenario or workload fields (``rate_rps``, ``arrival``, ``episode_requests``, ...)."""
    scenario = base.with_overrides(**overrides)
    groups = combo_instance_groups([c for c, _ in combos], model, instance_options)
    values = {f.name: getattr(scenario, f.name) for f in fields(Scenario)}
    values.update(
        name=f"{scenario.name}_combos",
        description=f"{scenario.description}; deployed as GPU combos: " + ", ".join(c.name for c, _ in combos),
        instances=groups,
        max_instances=sum(g.count for g in groups),
    )
    return ComboScenario(
        **values, combos=tuple(c for c, _ in combos), combo_goodput_rps=tuple(float(g) for _, g in combos),
        model=model, instance_scheduler=instance_scheduler, instance_options=instance_options_with_engine(instance_options),
    )


@dataclass(frozen=True)
class ComboScalingScenario(Scenario):
    """A scenario with ``piecewise`` arrivals (a load profile whose mean is the workload's
    ``rate_rps``) whose Scaling-v0 units are GPU combos (Cauchy §3.1):
    ``combos`` are the unit kinds (each with its profiled goodput, its routing weight),
    ``initial_counts[k]`` of ``combos[k]`` serve at reset; ``instances`` must be those
    combos' instances. The cluster is a ``ComboCluster``, so a request sent to a combo is
    placed inside it by ``instance_scheduler`` (§3.4.2), every instance with ``instance_options``
    (``ComboCluster``). ``time_compression`` k is how much
    the scaling clock is compressed (a policy's windows of W real seconds last W / k)."""

    time_compression: float = 1.0
    combos: tuple[Combo, ...] = ()
    initial_counts: tuple[int, ...] = ()
    combo_goodput_rps: tuple[float, ...] = ()
    model: str = CAUCHY_MODEL
    instance_scheduler: str = "opportunistic"
    instance_options: dict[str, Any] = field(default_factory=lambda: instance_options_with_engine(None))

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.workload.arrival != "piecewise":
            raise ValueError(f"scenario {self.name!r}: arrivals must be a 'piecewise' load profile, got {self.workload.arrival!r}")
        mean_rps = float(np.mean(self.workload.arrival_options["rates_rps"]))
        if not math.isclose(self.workload.rate_rps, mean_rps, rel_tol=1e-9):
            raise ValueError(
                f"scenario {self.name!r}: rate_rps={self.workload.rate_rps!r} differs from the mean {mean_rps:g} req/s "
                "of its arrival profile; the profile sets the arrivals, so scale it instead"
            )
        if not self.combos or len(set(self.combos)) != len(self.combos):
            raise ValueError(f"scenario {self.name!r}: combos must be distinct and non-empty, got {self.combos!r}")
        check_combo_counts(self.combos, self.initial_counts)
        check_combo_deployment(
            self, self.combos, self.combo_goodput_rps, self.instance_scheduler, self.initial_combos(), self.model,
            self.instance_options,
        )
        if not (math.isfinite(self.time_compression) and self.time_compression > 0):
            raise ValueError(f"time_compression must be a positive finite number, got {self.time_compression!r}")

    def initial_combos(self) -> list[Combo]:
        """The combos serving at reset, in deployment order."""
        return [combo for combo, count in zip(self.combos, self.initial_counts) for _ in range(count)]

    def scaling_units(self) -> tuple[ScalingUnit, ...]:
        return tuple(
            ScalingUnit(c.name, tuple(c.instance_configs(self.model, **self.instance_options)), g)
            for c, g in zip(self.combos, self.combo_goodput_rps)
        )

    def build_cluster(self, **cluster_options: Any) -> ComboCluster:
        return build_combo_cluster(self, self.initial_combos(), self.model, self.instance_scheduler, self.instance_options,
                                   **cluster_options)

    def deploy_unit(self, cluster: ComboCluster, unit: int, *, ready_now: bool = False) -> tuple[int, ...]:
        deployed = cluster.combos[cluster.deploy_combo(self.combos[unit], self.model, ready_now=ready_now)]
        return (deployed.entry_id, *deployed.decode_ids)

    def deployed_units(self, cluster: ComboCluster) -> list[tuple[int, tuple[int, ...]]]:
        return [(self.combos.index(d.combo), (d.entry_id, *d.decode_ids)) for d in cluster.combos]


def check_combo_counts(combos: Sequence[Combo], counts: Sequence[int]) -> None:
    """One non-negative integer count per combo; ValueError naming the bad one."""
    if len(counts) != len(combos):
        raise ValueError(f"{len(counts)} counts for {len(combos)} combos")
    for combo, count in zip(combos, counts):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"count of {combo.name} must be a non-negative integer, got {count!r}")
