"""Classic load-balancing routers for servegym/Routing-v0: round-robin, random, least outstanding
requests, least KV. They place new requests only: at a reasoning request's ``</think>`` phase
decision they keep it where it is (no migration), moving it only when its instance can no
longer take it (masked out, e.g. draining), and then by their own arrival rule.

``RoutingPolicy`` is the base the other Routing-v0 heuristics (INFaaS, PASCAL) build on: it
reads the decision's context (arrival or phase change, request size, source instance) and
un-squashes per-instance features back to counts and tokens (``envs.observation``).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from baselines.policy import Policy, register
from envs.observation import COUNT_SCALE, TOKEN_SCALE

ROUTING_ENV_ID = "servegym/Routing-v0"
KV_SCALE_TOKENS = 1e6  # the squash scale of ``kv_capacity`` and ``kv_footprint``


def unsquash(squashed: np.ndarray | float, scale: float) -> np.ndarray:
    """Invert ``x / (x + scale)``: the raw value (count, tokens, seconds) as float64."""
    s = np.asarray(squashed, dtype=np.float64)
    return scale * s / (1.0 - s)


class RoutingPolicy(Policy):
    """Base of the Routing-v0 heuristics: ``act`` sends arrivals to ``route`` and phase
    decisions to ``place_answer`` (default: stay on the source instance)."""

    env_ids = (ROUTING_ENV_ID,)

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.max_instances = int(self.env.observation_space["instances"].shape[0])

    # ----------------------------------------------------------------- decision
    def act(self, observation: dict[str, np.ndarray]) -> int:
        valid = self.valid_slots(observation)
        if not valid.any():
            raise ValueError("no valid instance in observation['action_mask']: nothing to route to")
        source = self.source_slot(observation)
        if source is None:
            return self.route(observation, valid)
        return self.place_answer(observation, valid, source)

    def route(self, observation: dict[str, np.ndarray], valid: np.ndarray) -> int:
        """The instance for a new request (``valid`` is the action mask as booleans)."""
        raise NotImplementedError

    def place_answer(self, observation: dict[str, np.ndarray], valid: np.ndarray, source: int) -> int:
        """The instance for a request that just finished reasoning on slot ``source``: stay,
        unless the source is masked out (then route it like a new request)."""
        return source if valid[source] else self.route(observation, valid)

    # ----------------------------------------------------------------- observation reading
    @staticmethod
    def valid_slots(observation: dict[str, np.ndarray]) -> np.ndarray:
        return np.asarray(observation["action_mask"]).reshape(-1) > 0.5

    def source_slot(self, observation: dict[str, np.ndarray]) -> int | None:
        """The instance a phase-change request finished reasoning on; None for an arrival."""
        context = observation["context"]
        if context[1] < 0.5:
            return None
        return int(np.argmax(context[-self.max_instances:]))

    @staticmethod
    def request_kv_tokens(observation: dict[str, np.ndarray]) -> float:
        """KV the decision's request holds or will hold: prompt plus generated tokens."""
        context = observation["context"]
        return float(unsquash(context[2], TOKEN_SCALE) + unsquash(context[3], TOKEN_SCALE))

    def counts(self, observation: dict[str, np.ndarray], name: str) -> np.ndarray:
        """A per-instance request count (``waiting``, ``reasoning``, ...) as integers."""
        return np.rint(unsquash(self.feature(observation, name), COUNT_SCALE)).astype(np.int64)

    def outstanding(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        """Requests waiting, running or swapped out on each instance."""
        return sum(self.counts(observation, name) for name in ("waiting", "running", "swapped"))

    def kv_footprint_tokens(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        """KV tokens held on the GPU plus in host memory (swapped requests), per instance."""
        return unsquash(self.feature(observation, "kv_footprint"), KV_SCALE_TOKENS)

    def free_kv_tokens(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        """Free GPU KV tokens per instance: (1 - used fraction) x capacity."""
        capacity = unsquash(self.feature(observation, "kv_capacity"), KV_SCALE_TOKENS)
        return (1.0 - self.feature(observation, "kv_used_fraction").astype(np.float64)) * capacity

    def unclaimed_kv_tokens(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        """Free GPU KV tokens minus what queued requests wait for: the prompt tokens of waiting
        requests still to prefill and the KV of swapped requests (in host memory, to swap in)."""
        gpu_tokens = self.feature(observation, "kv_used_fraction").astype(np.float64) * unsquash(
            self.feature(observation, "kv_capacity"), KV_SCALE_TOKENS
        )
        host_tokens = np.maximum(self.kv_footprint_tokens(observation) - gpu_tokens, 0.0)
        pending_tokens = unsquash(self.feature(observation, "pending_prefill_tokens"), TOKEN_SCALE)
        return self.free_kv_tokens(observation) - pending_tokens - host_tokens

    def least_kv_slot(self, observation: dict[str, np.ndarray], candidates: np.ndarray) -> int:
        """The candidate with the smallest KV footprint (GPU + host); ties go to fewer waiting
        requests (queued, holding no KV yet, e.g. one routed a moment ago), then the lower slot."""
        footprint = self.kv_footprint_tokens(observation)
        waiting = self.counts(observation, "waiting")
        slots = np.flatnonzero(candidates)
        order = np.lexsort((slots, waiting[slots], footprint[slots]))
        return int(slots[order[0]])


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

    def route(self, observation: dict[str, np.ndarray], valid: np.ndarray) -> int:
        order = (self.next_slot + np.arange(self.max_instances)) % self.max_instances
        choice = int(order[np.argmax(valid[order])])
        self.next_slot = (choice + 1) % self.max_instances
        return choice


@register
class RandomRouting(RoutingPolicy):
    """Uniformly random valid instance. The generator is ``np.random.default_rng(seed)``, rebuilt
    at every episode start, so an episode's choices depend only on ``seed`` and the episode."""

    name = "random"

    def __init__(self, env: gym.Env, seed: int = 0) -> None:
        super().__init__(env)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.seed = int(seed)
        self.rng = np.random.default_rng(self.seed)

    def reset(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def route(self, observation: dict[str, np.ndarray], valid: np.ndarray) -> int:
        return int(self.rng.choice(np.flatnonzero(valid)))


@register
class LeastOutstandingRouting(RoutingPolicy):
    """Fewest outstanding requests (waiting + running + swapped), ties to the lower slot: the
    least-loaded / join-the-shortest-queue baseline."""

    name = "least_outstanding"

    def route(self, observation: dict[str, np.ndarray], valid: np.ndarray) -> int:
        return first_minimum(self.outstanding(observation), valid)


@register
class LeastKVRouting(RoutingPolicy):
    """Smallest KV footprint, GPU plus host memory: PASCAL's placement for its FCFS and RR
    baselines (pascal.txt §V-A: "reasoning requests are placed on the instance with the smallest
    KV footprint, and no migration occurs at phase transitions"). Ties as ``least_kv_slot``."""

    name = "least_kv"

    def route(self, observation: dict[str, np.ndarray], valid: np.ndarray) -> int:
        return self.least_kv_slot(observation, valid)
