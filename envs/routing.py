"""servegym/Routing-v0: choose the instance for each request."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from envs.base import ServingEnv
from envs.observation import COUNT_SCALE, TOKEN_SCALE, arrived_field, cost_rate_field, flag_field, instance_fields_doc
from envs.schema import ONE_HOT, Entry, Field, MaskPart, observation_tables, ratio, with_observation_tables
from simulator.cluster import Decision
from simulator.sequence import Sequence


def routing_context(num_tiers: int, max_instances: int, episode_requests: int) -> tuple[Entry, ...]:
    """Routing-v0's context fields (``envs.schema``)."""
    return (
        flag_field("is_arrival", "the decision routes a new request"),
        flag_field("is_phase_change", "the decision places a request that finished reasoning"),
        Field("prompt_tokens", "tokens", ratio(TOKEN_SCALE), "the request's prompt"),
        Field("generated_tokens", "tokens", ratio(TOKEN_SCALE), "tokens it generated so far"),
        Field("tier", "tier", ONE_HOT, "its priority tier (−1: no decision)", size=num_tiers, size_text="K"),
        Field("recent_qps", "req/s", ratio(COUNT_SCALE), "arrivals per second over the last 10 s"),
        cost_rate_field(),
        arrived_field(episode_requests),
        Field("source_slot", "slot", ONE_HOT, "where a phase-change request finished reasoning (−1: arrival)",
              size=max_instances, size_text="N"),
    )


def routing_mask(max_instances: int) -> tuple[MaskPart, ...]:
    return (MaskPart("instance", (max_instances,), "the slots that may take the request", shape_text="N"),)


class RoutingEnv(ServingEnv):
    """Route every arriving request (and, in reasoning scenarios, every request that finished
    reasoning) to an instance.

    ## Description
    A step is one decision of the cluster's global scheduler: a new arrival, or a reasoning
    request at its ``</think>`` token (PASCAL §IV-B), which may continue where it is or
    move, with a KV transfer, to another instance. The simulation runs between decisions.

    ## Action space
    ``Discrete(max_instances)``: the instance slot. Valid slots (``action_masks()``): serving
    instances that can take the request (not starting, draining, stopped or absent; for new
    requests not decode-only). A masked-out action falls back to the first valid slot, costs
    ``invalid_action_penalty`` and sets ``info["invalid_action"]``; ``strict=True`` raises.

    ## Observation space
    ``Dict``: ``instances`` (max_instances x features, ``envs.observation``), ``context`` (the
    decision: the request, the load, the source instance of a phase change) and
    ``action_mask``; the tables at the end (from ``self.schema``, K = tiers, N = slots, E =
    episode requests) give every entry, its unit and encoding.

    ## Rewards
    ``reward="slo"`` (default; ±1 per request when it finishes), ``"slo_dense"`` / ``"slo_balance"``
    (−1 per SLO miss at the moment it is certain; the main job's reward, its return is
    −(missed requests)), ``"latency"``, ``"latency_dense"``, ``"latency_balance"``,
    ``"ttft_dense"``, ``"ttft_balance"`` or ``"cost"``: formulas in ``envs.rewards``.

    ## Episode end
    Truncated after the scenario's ``episode_requests`` arrivals have been routed and every
    request has finished; never terminated. The last step's ``info["episode_metrics"]`` holds
    the episode summary (TTFT/TBT/E2E percentiles, SLO attainment, goodput, cost, ...) and
    ``info["episode_outcomes"]`` every request's outcome (``simulator.outcome.RequestOutcome``).

    ## Arguments
    ``scenario`` (name or ``Scenario``), ``reward``, ``strict``, ``invalid_action_penalty``,
    ``render_mode`` ("ansi" or "rgb_array", ``envs.frame``), ``backend``
    (``"compiled"``, the default: the compiled simulator core; or ``"python"``, the reference engine), and scenario / workload overrides as
    keywords (e.g. ``rate_rps``).

    ## Scenarios
    ``default``, ``multitier``, ``pascal``, ``cauchy`` (see ``envs.presets.scenario_names()``).
    """

    env_id = "servegym/Routing-v0"
    observes_prefix_match = True

    def __init__(self, scenario: Any = "default", **kwargs: Any) -> None:
        super().__init__(scenario, **kwargs)
        self.action_space = spaces.Discrete(self.scenario.max_instances)
        self._decision: Decision | None = None
        self._reasoning = False

    def context_entries(self) -> tuple[Entry, ...]:
        return routing_context(self.scenario.num_tiers, self.scenario.max_instances, self.scenario.episode_requests)

    def mask_parts(self) -> tuple[MaskPart, ...]:
        return routing_mask(self.scenario.max_instances)

    def cluster_options(self) -> dict[str, Any]:
        return {"router": None, "external_phase_decisions": True}

    def on_reset(self) -> None:
        self._decision = None

    def routed_request(self) -> Sequence | None:
        """The arriving request (phase changes carry their KV and match nothing)."""
        decision = self._decision
        return decision.seq if decision is not None and decision.kind == "route" else None

    def advance(self) -> bool:
        assert self.cluster is not None
        self._decision = self.cluster.advance()
        return self._decision is None

    def compute_action_mask(self) -> np.ndarray:
        assert self.cluster is not None and self.cluster.arrays is not None
        mask = np.zeros(self.scenario.max_instances, dtype=bool)
        decision = self._decision
        if decision is None:
            return mask
        valid = self.cluster.accepting(decision.seq, new_request=decision.kind == "route")
        mask[:valid.size] = valid
        return mask

    def is_valid(self, action: Any, mask: np.ndarray) -> bool:
        return bool(mask[int(action)])

    def fallback_action(self) -> int:
        valid = np.flatnonzero(self.action_masks())
        if valid.size == 0:
            raise RuntimeError("no instance can take the request: every instance is masked out")
        return int(valid[0])

    def apply(self, action: Any, valid: bool) -> None:
        assert self.cluster is not None and self._decision is not None
        instance_id = list(self.cluster.instances)[int(action)]
        decision = self._decision
        if decision.kind == "route":
            self.cluster.dispatch(decision.seq, instance_id)
        else:
            self.cluster.place_answering(decision.seq, instance_id)

    def context(self) -> np.ndarray:
        assert self.cluster is not None
        decision = self._decision
        seq = decision.seq if decision is not None else None
        phase = decision is not None and decision.kind == "phase"
        return self.schema.encode_context({
            "is_arrival": decision is not None and decision.kind == "route",
            "is_phase_change": phase,
            "prompt_tokens": seq.prompt_tokens if seq is not None else 0,
            "generated_tokens": seq.generated_tokens if seq is not None else 0,
            "tier": min(seq.tier, self.scenario.num_tiers - 1) if seq is not None else -1,
            "recent_qps": self.recent_qps(),
            "cost_rate": self.cluster.cost_rate_usd_per_s() * 3600.0,
            "arrived": self.cluster.arrived,
            "source_slot": list(self.cluster.instances).index(decision.instance_id) if phase else -1,
        })


RoutingEnv.__doc__ = with_observation_tables(
    RoutingEnv.__doc__, observation_tables(instance_fields_doc(prefix_match=True), routing_context(1, 1, 1),
                                           routing_mask(1))
)
