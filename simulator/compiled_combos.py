"""GPU combos on the compiled engine (``simulator.combo_cluster``, Cauchy §3.4.2): a prefill
instance hands each request to a decode instance of its combo after the prefill; the engine
routes that hand-off itself (``Engine.add_combo``: decode instances in turn, or the one with
the fewest requests). Scaling-v0's ``WeightedUnitRouter`` routes arrivals in the engine too,
which runs a request in place on an idle member with the opportunistic instance scheduler
(``Engine.place_in_combo``); any other router runs in Python at each arrival."""

from __future__ import annotations

from typing import Any

from simulator.combo_cluster import ComboCluster
from simulator.combos import Combo
from simulator.compiled import CompiledCluster


class CompiledComboCluster(ComboCluster, CompiledCluster):
    """``ComboCluster`` whose requests are served by the compiled engine; a ``WeightedUnitRouter``
    and the in-place placement run in the engine, any other router in Python at each arrival
    (``ComboCluster.dispatch`` may place a request in place)."""

    def __init__(self, gpu_inventory: dict[str, int], **options: Any) -> None:
        self._in_place_python = 0
        super().__init__(gpu_inventory, **options)
        if self.router_spec.name != "units":
            self.router_spec.name = "external"  # arrivals stop for the router and ComboCluster.dispatch

    @property
    def in_place_dispatches(self) -> int:
        """Requests run wholly in place on an idle member: placed by Python, or by the engine."""
        return self._in_place_python + (self._engine.in_place_dispatches if self._engine is not None else 0)

    @in_place_dispatches.setter
    def in_place_dispatches(self, count: int) -> None:
        self._in_place_python = count

    def _compiled_hook(self, name: str, hook: Any) -> bool:
        return name == "decode_router" and getattr(hook, "__func__", None) is ComboCluster._route_prefilled

    def deploy_combo(self, combo: Combo, model: str, *, ready_now: bool = False) -> int:
        index = super().deploy_combo(combo, model, ready_now=ready_now)
        if self._engine is not None:
            self._add_combo(index)
        return index

    def adopt_combo(self, combo: Combo, instance_ids: list[int]) -> int:
        """``deploy_combo`` of ``combo`` whose instances (``adopt``ed, entry first) a native
        vector env's kernel deployed and registered with the engine itself (``envs.scaling_vector``):
        the Python side's record only. Returns its index."""
        return self._register_combo(combo, instance_ids)

    def submit(self, requests: Any) -> None:
        super().submit(requests)
        for index in range(len(self.combos)):
            self._add_combo(index)

    def _add_combo(self, index: int) -> None:
        deployed = self.combos[index]
        self._engine.add_combo(deployed.entry_id, list(deployed.decode_ids), self.instance_scheduler == "basic_rr")


