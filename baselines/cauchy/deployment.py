"""A scenario deployed as GPU Combos (an ILP plan made concrete), for servegym/Routing-v0.

``ComboScenario`` is a ``Scenario`` whose instances are the combos' instances, combo by combo
(entry first); its cluster is a ``ComboCluster``, so the intra-combo instance scheduler
(cauchy.txt §3.4.2) runs as the cluster's dispatch and decode hooks while the env's policy
picks the combo (by its entry slot, §3.4.1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from baselines.cauchy.combo_cluster import INSTANCE_SCHEDULERS, ComboCluster
from baselines.cauchy.combos import Combo
from baselines.cauchy.workloads import MODEL
from envs.presets import make_scenario
from envs.scenario import InstanceGroup, Scenario


def combo_instance_groups(combos: Sequence[Combo], model: str = MODEL) -> tuple[InstanceGroup, ...]:
    """The combos' instances in deployment order, consecutive identical configs grouped."""
    groups: list[InstanceGroup] = []
    for combo in combos:
        for config in combo.instance_configs(model):
            if groups and groups[-1].config == config:
                groups[-1] = InstanceGroup(config, groups[-1].count + 1)
            else:
                groups.append(InstanceGroup(config, 1))
    return tuple(groups)


def check_combo_deployment(
    scenario: Scenario, combos: Sequence[Combo], goodput_rps: Sequence[float], instance_scheduler: str,
    deployed: Sequence[Combo], model: str,
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
    if scenario.instances != combo_instance_groups(deployed, model):
        raise ValueError(f"scenario {scenario.name!r}: instances must be exactly the deployed combos' instances")


def build_combo_cluster(
    scenario: Scenario, deployed: Sequence[Combo], model: str, instance_scheduler: str, **cluster_options: Any
) -> ComboCluster:
    """A ``ComboCluster`` with the scenario's inventory and the ``deployed`` combos serving."""
    cluster = ComboCluster(
        scenario.gpu_inventory, instance_scheduler=instance_scheduler, provisioning_s=scenario.provisioning_s,
        record_token_curves=scenario.record_token_curves, **cluster_options,
    )
    for combo in deployed:
        cluster.deploy_combo(combo, model, ready_now=True)
    return cluster


@dataclass(frozen=True)
class ComboScenario(Scenario):
    """``combos`` with their profiled goodputs (req/s), served by ``instance_scheduler``."""

    combos: tuple[Combo, ...] = ()
    combo_goodput_rps: tuple[float, ...] = ()
    model: str = MODEL
    instance_scheduler: str = "opportunistic"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.combos:
            raise ValueError(f"scenario {self.name!r} deploys no combo")
        check_combo_deployment(self, self.combos, self.combo_goodput_rps, self.instance_scheduler, self.combos, self.model)

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
        return build_combo_cluster(self, self.combos, self.model, self.instance_scheduler, **cluster_options)


def combo_scenario(
    base: Scenario | str,
    combos: Sequence[tuple[Combo, float]],
    *,
    instance_scheduler: str = "opportunistic",
    model: str = MODEL,
    **overrides: Any,
) -> ComboScenario:
    """``base`` (a scenario or preset name, e.g. ``"cauchy_longwriter"``) redeployed as
    ``combos`` (each with its goodput, e.g. ``ComboPlan.combos()``); ``overrides`` are scenario
    or workload fields (``rate_rps``, ``arrival``, ``episode_requests``, ...)."""
    scenario = make_scenario(base) if isinstance(base, str) else base
    scenario = scenario.with_overrides(**overrides)
    groups = combo_instance_groups([c for c, _ in combos], model)
    values = {f.name: getattr(scenario, f.name) for f in fields(Scenario)}
    values.update(
        name=f"{scenario.name}_combos",
        description=f"{scenario.description}; deployed as GPU combos: " + ", ".join(c.name for c, _ in combos),
        instances=groups,
        max_instances=sum(g.count for g in groups),
    )
    return ComboScenario(
        **values, combos=tuple(c for c, _ in combos), combo_goodput_rps=tuple(float(g) for _, g in combos),
        model=model, instance_scheduler=instance_scheduler,
    )
