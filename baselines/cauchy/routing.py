"""Cauchy's combo scheduler (Cauchy §3.4.1) and its §4.4 comparison policies, for
servegym/Routing-v0 on a ``ComboScenario``: each arrival goes to a combo (its entry slot);
inside the combo the scenario's instance scheduler (§3.4.2) places it.

* ``cauchy_gwrr``: Goodput-Weighted Round Robin, combos picked in proportion to their
  profiled goodput (smooth weighted RR, deterministic);
* ``basic_rr``: combos in turn;
* ``token_weighted_rr``: the combo with the most remaining KV token room (free GPU KV minus
  what its queued requests still need, summed over its instances): "the GPU Combo with the
  highest remaining token count" read as remaining token capacity.

Combos whose entry is masked out (not serving) are skipped by all three.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from baselines.policy import register
from baselines.routing_classic import RoutingPolicy
from envs.combo_scenario import ComboScenario
from envs.schema import DecodedObservation
from simulator.routers.weighted_rr import SmoothWeightedRoundRobin


class ComboRoutingPolicy(RoutingPolicy):
    """Base: maps the scenario's combos to their entry slots; subclasses ``pick_combo``."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        scenario = self.scenario
        if not isinstance(scenario, ComboScenario):
            raise ValueError(
                f"policy {self.name!r} routes across GPU combos; scenario {scenario.name!r} is not a ComboScenario "
                "(build one with envs.combo_scenario.combo_scenario)"
            )
        self.entry_slots = np.array(scenario.entry_slots())
        self.member_slots = scenario.member_slots()

    def route(self, view: DecodedObservation, valid: np.ndarray) -> int:
        eligible = valid[self.entry_slots]
        if not eligible.any():
            raise ValueError("no combo entry is valid in observation['action_mask']")
        return int(self.entry_slots[self.pick_combo(view, eligible)])

    def pick_combo(self, view: DecodedObservation, eligible: np.ndarray) -> int:
        raise NotImplementedError


@register
class GoodputWeightedRR(ComboRoutingPolicy):
    """§3.4.1: weights = each combo's goodput over the service's total goodput."""

    name = "cauchy_gwrr"

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.turns = SmoothWeightedRoundRobin(self.scenario.combo_goodput_rps)

    def reset(self) -> None:
        self.turns.reset()

    def pick_combo(self, view: DecodedObservation, eligible: np.ndarray) -> int:
        return self.turns.pick(eligible)


@register
class BasicComboRR(ComboRoutingPolicy):
    """§4.4 Basic Round Robin: combos in a cycle, whatever their capacity."""

    name = "basic_rr"

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.next_combo = 0

    def reset(self) -> None:
        self.next_combo = 0

    def pick_combo(self, view: DecodedObservation, eligible: np.ndarray) -> int:
        count = len(eligible)
        order = (self.next_combo + np.arange(count)) % count
        choice = int(order[np.argmax(eligible[order])])
        self.next_combo = (choice + 1) % count
        return choice


@register
class TokenWeightedRR(ComboRoutingPolicy):
    """§4.4 Token-Weighted Round Robin: the combo with the most remaining KV token room."""

    name = "token_weighted_rr"

    def pick_combo(self, view: DecodedObservation, eligible: np.ndarray) -> int:
        room = self.unclaimed_kv_tokens(view)
        per_combo = np.array([room[slots].sum() for slots in self.member_slots])
        per_combo[~eligible] = -np.inf
        return int(np.argmax(per_combo))
