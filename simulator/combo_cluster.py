"""A cluster deployed as GPU Combos, with Cauchy's intra-combo instance scheduler
(Cauchy §3.4.2) as its dispatch and decode-router hooks.

A request sent to a combo (to its entry instance: the prefill instance, or the aggregated
instance) is placed inside the combo by ``instance_scheduler``:

* ``"opportunistic"`` (§3.4.2, §4.5): if an instance of the combo is idle (holds no request),
  the request runs wholly in place there (``Cluster.dispatch_in_place``, the "0 -> null" path
  rewrite), decode instances tried first, lowest id first, then the prefill instance;
  otherwise it is prefilled on the prefill instance and handed to the least-loaded decode
  instance (fewest requests waiting, running or swapped; lowest id on ties).
* ``"basic_rr"`` (§4.5 baseline): always prefill-then-decode, decode instances in turn.

If no decode instance of the combo is left (a combo being drained), a prefilled request
continues decoding on its prefill instance. ``instance_options`` (further ``InstanceConfig``
fields, e.g. ``scheduler="sarathi"`` for a chunked-prefill engine) apply to every instance the
cluster's combos deploy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from simulator.cluster import Cluster
from simulator.combos import Combo
from simulator.instance import Instance, InstanceConfig, Lifecycle
from simulator.sequence import Sequence

INSTANCE_SCHEDULERS = ("opportunistic", "basic_rr")


@dataclass(frozen=True)
class DeployedCombo:
    """A combo's instances in the cluster: ``entry_id`` takes its requests."""

    combo: Combo
    entry_id: int
    decode_ids: tuple[int, ...]


class ComboCluster(Cluster):
    """``Cluster`` whose instances belong to combos, deployed with ``deploy_combo``."""

    def __init__(
        self, gpu_inventory: dict[str, int], *, instance_scheduler: str = "opportunistic",
        instance_options: Mapping[str, Any] | None = None, **options: Any,
    ) -> None:
        if instance_scheduler not in INSTANCE_SCHEDULERS:
            raise ValueError(f"unknown instance scheduler {instance_scheduler!r}; known: {list(INSTANCE_SCHEDULERS)}")
        known = {f.name for f in fields(InstanceConfig)}
        unknown = sorted(set(instance_options or {}) - known)
        if unknown:
            raise ValueError(f"unknown instance options {unknown}; InstanceConfig fields: {sorted(known)}")
        if "decode_router" in options:
            raise ValueError("ComboCluster routes prefilled requests itself; do not pass decode_router")
        super().__init__(gpu_inventory, decode_router=self._route_prefilled, **options)
        self.instance_scheduler = instance_scheduler
        self.instance_options = dict(instance_options or {})
        self.combos: list[DeployedCombo] = []
        self._combo_of: dict[int, int] = {}
        self._decode_turn: dict[int, int] = {}
        self.in_place_dispatches = 0

    def deploy_combo(self, combo: Combo, model: str, *, ready_now: bool = False) -> int:
        """Deploy every instance of ``combo``; returns its index in ``combos``."""
        configs = combo.instance_configs(model, **self.instance_options)
        needed = combo.gpu_counts()
        for gpu, count in needed.items():
            free = self.gpu_inventory.get(gpu, 0) - self.gpus_in_use.get(gpu, 0)
            if count > free:
                raise ValueError(f"cannot deploy {combo.name}: it needs {count} x {gpu}, {free} free")
        ids = [self.deploy(config, ready_now=ready_now) for config in configs]
        return self._register_combo(combo, ids)

    def _register_combo(self, combo: Combo, ids: list[int]) -> int:
        """Record ``combo`` as deployed on instances ``ids`` (entry first); its index."""
        index = len(self.combos)
        self.combos.append(DeployedCombo(combo, ids[0], tuple(ids[1:])))
        for instance_id in ids:
            self._combo_of[instance_id] = index
        self._decode_turn[index] = 0
        return index

    def combo_of(self, instance_id: int) -> int:
        """Index of the combo an instance belongs to."""
        if instance_id not in self._combo_of:
            raise ValueError(f"instance {instance_id} belongs to no combo; known: {sorted(self._combo_of)}")
        return self._combo_of[instance_id]

    # ----------------------------------------------------------------- intra-combo scheduling
    def dispatch(self, seq: Sequence, instance_id: int) -> None:
        """Send a new request to the combo whose entry is ``instance_id`` (other instances are
        addressed directly, as in ``Cluster``)."""
        index = self._combo_of.get(instance_id)
        if index is not None and self.instance_scheduler == "opportunistic":
            deployed = self.combos[index]
            if deployed.entry_id == instance_id and not deployed.combo.aggregated:
                idle = self._idle_member(deployed)
                if idle is not None:
                    self.in_place_dispatches += 1
                    self.dispatch_in_place(seq, idle)
                    return
        super().dispatch(seq, instance_id)

    def _idle_member(self, deployed: DeployedCombo) -> int | None:
        for instance_id in (*deployed.decode_ids, deployed.entry_id):
            instance = self.instances[instance_id]
            if instance.lifecycle == Lifecycle.SERVING and instance.num_requests == 0 and not instance.busy:
                return instance_id
        return None

    def _route_prefilled(self, cluster: Cluster, seq: Sequence, prefill: Instance) -> int:
        """The decode instance for a request prefilled on ``prefill`` (the decode_router hook)."""
        index = self._combo_of[prefill.instance_id]
        live = [
            i for i in self.combos[index].decode_ids
            if self.instances[i].lifecycle in (Lifecycle.SERVING, Lifecycle.DRAINING)
        ]
        if not live:
            return prefill.instance_id
        if self.instance_scheduler == "basic_rr":
            turn = self._decode_turn[index]
            self._decode_turn[index] = turn + 1
            return live[turn % len(live)]
        return min(live, key=lambda i: (self.instances[i].num_requests, i))
