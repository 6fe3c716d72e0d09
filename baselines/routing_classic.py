"""Classic load-balancing routers for servegym/Routing-v0: round-robin, random, least outstanding
requests, least KV. They place new requests only: at a reasoning request's ``</think>`` phase
decision they keep it where it is (no migration), moving it only when its instance can no
longer take it (masked out, e.g. draining), and then by their own arrival rule.

``RoutingPolicy`` is the base the other Routing-v0 heuristics (INFaaS, PASCAL) build on: it
reads the decision (arrival or phase change, request size, source instance) and the
instances' load from the decoded observation (``envs.schema``): counts, tokens, seconds.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from baselines.policy import Policy, register
from envs.schema import DecodedObservation

ROUTING_ENV_ID = "servegym/Routing-v0"


class RoutingPolicy(Policy):
    """Base of the Routing-v0 heuristics: ``act`` sends arrivals to ``route`` and phase
    decisions to ``place_answer`` (default: stay on the source instance)."""

    env_ids = (ROUTING_ENV_ID,)

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.max_instances = self.schema.max_instances

    # ----------------------------------------------------------------- decision
    def act(self, observation: dict[str, np.ndarray]) -> int:
        view = self.decode(observation)
        valid = view.mask("instance")
        if not valid.any():
            raise ValueError("no valid instance in observation['action_mask']: nothing to route to")
        source = self.source_slot(view)
        if source is None:
            return self.route(view, valid)
        return self.place_answer(view, valid, source)

    def route(self, view: DecodedObservation, valid: np.ndarray) -> int:
        """The instance for a new request (``valid`` is the action mask as booleans)."""
        raise NotImplementedError

    def place_answer(self, view: DecodedObservation, valid: np.ndarray, source: int) -> int:
        """The instance for a request that just finished reasoning on slot ``source``: stay,
        unless the source is masked out (then route it like a new request)."""
        return source if valid[source] else self.route(view, valid)

    # ----------------------------------------------------------------- observation reading
    @staticmethod
    def source_slot(view: DecodedObservation) -> int | None:
        """The instance a phase-change request finished reasoning on; None for an arrival."""
        if not view.context["is_phase_change"]:
            return None
        return view.context["source_slot"]

    @staticmethod
    def request_kv_tokens(view: DecodedObservation) -> float:
        """KV the decision's request holds or will hold: prompt plus generated tokens."""
        return view.context["prompt_tokens"] + view.context["generated_tokens"]

    @staticmethod
    def outstanding(view: DecodedObservation) -> np.ndarray:
        """Requests waiting, running or swapped out on each instance."""
        return view.instances["waiting"] + view.instances["running"] + view.instances["swapped"]

    @staticmethod
    def free_kv_tokens(view: DecodedObservation) -> np.ndarray:
        """Free GPU KV tokens per instance: (1 - used fraction) x capacity."""
        return (1.0 - view.instances["kv_used_fraction"]) * view.instances["kv_capacity"]

    @classmethod
    def unclaimed_kv_tokens(cls, view: DecodedObservation) -> np.ndarray:
        """Free GPU KV tokens minus what queued requests wait for: the prompt tokens of waiting
        requests still to prefill and the KV of swapped requests (in host memory, to swap in)."""
        gpu_tokens = view.instances["kv_used_fraction"] * view.instances["kv_capacity"]
        host_tokens = np.maximum(view.instances["kv_footprint"] - gpu_tokens, 0.0)
        return cls.free_kv_tokens(view) - view.instances["pending_prefill_tokens"] - host_tokens

    @staticmethod
    def least_kv_slot(view: DecodedObservation, candidates: np.ndarray) -> int:
        """The candidate with the smallest KV footprint (GPU + host); ties go to fewer waiting
        requests (queued, holding no KV yet, e.g. one routed a moment ago), then the lower slot."""
        footprint = view.instances["kv_footprint"]
        waiting = view.instances["waiting"]
        slots = np.flatnonzero(candidates)
        order = np.lexsort((slots, waiting[slots], footprint[slots]))
        return int(slots[order[0]])


def check_seed(seed: object) -> int:
    """``seed`` as an int if it is a non-negative integer, else raise naming it."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def first_minimum(values: np.ndarray, candidates: np.ndarray) -> int:
    """The lowest slot among ``candidates`` where ``values`` is smallest."""
    slots = np.flatnonzero(candidates)
    return int(slots[np.argmin(values[slots])])


@register
class RoundRobinRouting(RoutingPolicy):
    """Round-robin over the valid instances: each arrival goes to the next valid slot after the
    previous choice (the simulator's default router, and the usual load-balancer baseline)."""

    name = "round_robin"

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.next_slot = 0

    def reset(self) -> None:
        self.next_slot = 0

    def route(self, view: DecodedObservation, valid: np.ndarray) -> int:
        order = (self.next_slot + np.arange(self.max_instances)) % self.max_instances
        choice = int(order[np.argmax(valid[order])])
        self.next_slot = (choice + 1) % self.max_instances
        return choice


class SeededRouting(RoutingPolicy):
    """A router that draws: its generator is ``np.random.default_rng(seed)``, rebuilt at every
    episode start, so an episode's choices depend only on ``seed`` and the episode."""

    def __init__(self, env: gym.Env, seed: int = 0) -> None:
        super().__init__(env)
        self.seed = check_seed(seed)
        self.rng = np.random.default_rng(self.seed)

    def reset(self) -> None:
        self.rng = np.random.default_rng(self.seed)


@register
class RandomRouting(SeededRouting):
    """Uniformly random valid instance (``SeededRouting``'s generator)."""

    name = "random"

    def route(self, view: DecodedObservation, valid: np.ndarray) -> int:
        return int(self.rng.choice(np.flatnonzero(valid)))


@register
class LeastOutstandingRouting(RoutingPolicy):
    """Fewest outstanding requests (waiting + running + swapped), ties to the lower slot: the
    least-loaded / join-the-shortest-queue baseline."""

    name = "least_outstanding"

    def route(self, view: DecodedObservation, valid: np.ndarray) -> int:
        return first_minimum(self.outstanding(view), valid)


@register
class LeastKVRouting(RoutingPolicy):
    """Smallest KV footprint, GPU plus host memory: PASCAL's placement for its FCFS and RR
    baselines (PASCAL §V-A: "reasoning requests are placed on the instance with the smallest
    KV footprint, and no migration occurs at phase transitions"). Ties as ``least_kv_slot``."""

    name = "least_kv"

    def route(self, view: DecodedObservation, valid: np.ndarray) -> int:
        return self.least_kv_slot(view, valid)
