"""INFaaS-style cost routing, the global-scheduler baseline of Llumnix-K §3.7.

Eq. 5: ``cost(r) = alpha * q_r + beta * s_r + gamma * penalty(r)``, the request going to the
cheapest replica. ``q_r`` is the estimated queue depth (waiting + running + swapped requests),
``s_r`` the expected service time, an EWMA of the service time (first scheduled to finish) of
the requests completed on ``r`` (the ``service_time_ewma`` feature, newest weight 0.6), and
``penalty(r)`` is 0 for ACTIVE, elevated for OVERLOADED and INTERFERED. INFaaS never migrates:
a request finishing reasoning stays where it is.

The paper gives the formula, not its constants; they come from the K-tier paper's published
simulator (andersvestrum/llumnix_sim, ``infaas_global_scheduler.py`` and the ``infaas_vllm``
experiment configuration): alpha = beta = gamma = 1 (q in requests, s in seconds), penalties
OVERLOADED 1.0 and INTERFERED 0.5, latency target 1 s. States (``InfaasThresholds``):

- OVERLOADED when ``s_r > 1.3 x target`` and ``q_r > 2``: slow and queueing;
- INTERFERED when ``s_r > 1.15 x target`` and ``q_r <= 1``: slow without a queue, so something
  else (co-located work) slows it down;
- a replica keeps the state for 3 (2) decisions, counting the last one at which the condition
  held (its cooldown), then returns to ACTIVE at the first decision where neither holds.

Routing considers the ACTIVE replicas only, and all replicas when none is ACTIVE (as the
published code does); the penalty then ranks the unhealthy ones. States are re-evaluated at
every decision (the published code re-evaluates a replica when one of its requests completes
and counts cooldowns in scheduling rounds; a decision is our scheduling round).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum

import gymnasium as gym
import numpy as np

from baselines.policy import register
from baselines.routing_classic import RoutingPolicy
from envs.schema import DecodedObservation


class ReplicaState(IntEnum):
    ACTIVE = 0
    OVERLOADED = 1
    INTERFERED = 2


STATE_PENALTY = {ReplicaState.ACTIVE: 0.0, ReplicaState.OVERLOADED: 1.0, ReplicaState.INTERFERED: 0.5}


@dataclass(frozen=True)
class InfaasThresholds:
    """When a replica is OVERLOADED or INTERFERED (defaults: andersvestrum/llumnix_sim)."""

    target_latency_s: float = 1.0
    overload_latency_factor: float = 1.3
    interference_latency_factor: float = 1.15
    overload_queue_depth: int = 2  # OVERLOADED needs a queue deeper than this
    interference_queue_depth: int = 1  # INTERFERED needs a queue no deeper than this
    overload_cooldown_decisions: int = 3
    interference_cooldown_decisions: int = 2

    def __post_init__(self) -> None:
        for name in ("target_latency_s", "overload_latency_factor", "interference_latency_factor"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"InfaasThresholds.{name} must be a positive finite number, got {value!r}")
        for name in (
            "overload_queue_depth", "interference_queue_depth",
            "overload_cooldown_decisions", "interference_cooldown_decisions",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"InfaasThresholds.{name} must be a non-negative integer, got {value!r}")

    def condition(self, service_s: float, queue_depth: int) -> ReplicaState:
        """The state a replica's current service-time estimate and queue depth put it in."""
        if service_s > self.overload_latency_factor * self.target_latency_s and queue_depth > self.overload_queue_depth:
            return ReplicaState.OVERLOADED
        if (
            service_s > self.interference_latency_factor * self.target_latency_s
            and queue_depth <= self.interference_queue_depth
        ):
            return ReplicaState.INTERFERED
        return ReplicaState.ACTIVE

    def cooldown(self, state: ReplicaState) -> int:
        if state == ReplicaState.OVERLOADED:
            return self.overload_cooldown_decisions
        if state == ReplicaState.INTERFERED:
            return self.interference_cooldown_decisions
        return 0


@register
class Infaas(RoutingPolicy):
    """INFaaS cost routing (Llumnix-K §3.7, eq. 5); constants and states in the
    module docstring."""

    name = "infaas"

    def __init__(
        self,
        env: gym.Env,
        alpha: float = 1.0,
        beta: float = 1.0,
        gamma: float = 1.0,
        thresholds: InfaasThresholds = InfaasThresholds(),
    ) -> None:
        super().__init__(env)
        for name, value in (("alpha", alpha), ("beta", beta), ("gamma", gamma)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a non-negative finite number, got {value!r}")
        self.alpha, self.beta, self.gamma = float(alpha), float(beta), float(gamma)
        self.thresholds = thresholds
        self.reset()

    def reset(self) -> None:
        self.states = [ReplicaState.ACTIVE] * self.max_instances
        self.cooldowns = [0] * self.max_instances

    def update_states(self, service_s: np.ndarray, queue_depth: np.ndarray) -> None:
        """One scheduling round of the state machine: tick cooldowns, enter a state whose
        condition holds (restarting its cooldown), leave it once cooled down and clear."""
        for slot in range(self.max_instances):
            self.cooldowns[slot] = max(0, self.cooldowns[slot] - 1)
            condition = self.thresholds.condition(float(service_s[slot]), int(queue_depth[slot]))
            if condition != ReplicaState.ACTIVE:
                self.states[slot] = condition
                self.cooldowns[slot] = self.thresholds.cooldown(condition)
            elif self.cooldowns[slot] == 0:
                self.states[slot] = ReplicaState.ACTIVE

    def costs(self, service_s: np.ndarray, queue_depth: np.ndarray) -> np.ndarray:
        """Eq. 5 per replica, with the current states' penalties."""
        penalty = np.array([STATE_PENALTY[s] for s in self.states])
        return self.alpha * queue_depth + self.beta * service_s + self.gamma * penalty

    def estimates(self, view: DecodedObservation) -> tuple[np.ndarray, np.ndarray]:
        """Per replica: expected service time s_r (seconds) and queue depth q_r (requests)."""
        return view.instances["service_time_ewma"], self.outstanding(view)

    def act(self, observation: dict[str, np.ndarray]) -> int:
        self.update_states(*self.estimates(self.decode(observation)))
        return super().act(observation)

    def route(self, view: DecodedObservation, valid: np.ndarray) -> int:
        service_s, queue_depth = self.estimates(view)
        active = valid & np.array([s == ReplicaState.ACTIVE for s in self.states])
        candidates = active if active.any() else valid
        slots = np.flatnonzero(candidates)
        return int(slots[np.argmin(self.costs(service_s, queue_depth)[slots])])
