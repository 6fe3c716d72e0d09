"""servegym/Routing-v0: choose the instance for each request."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from envs.base import ServingEnv
from envs.observation import COUNT_SCALE, TOKEN_SCALE, squash
from simulator.cluster import Decision
from simulator.instance import Lifecycle, Role


class RoutingEnv(ServingEnv):
    """Route every arriving request (and, in reasoning scenarios, every request that finished
    reasoning) to an instance.

    ## Description
    A step is one decision of the cluster's global scheduler: a new arrival, or a reasoning
    request at its ``</think>`` token (pascal.txt §IV-B), which may continue where it is or
    move, with a KV transfer, to another instance. The simulation runs between decisions.

    ## Action space
    ``Discrete(max_instances)``: the instance slot. Valid slots (``action_masks()``): serving
    instances that can take the request (not starting, draining, stopped or absent; for new
    requests not decode-only). A masked-out action falls back to the first valid slot, costs
    ``invalid_action_penalty`` and sets ``info["invalid_action"]``; ``strict=True`` raises.

    ## Observation space
    ``Dict``: ``instances`` (max_instances x features, ``envs.observation``), ``action_mask``
    and ``context`` = [is_arrival, is_phase_change, prompt tokens, tokens generated so far
    (squashed by 4,096), tier one-hot (num_tiers), recent QPS (squashed by 16 req/s), cluster $
    per hour (squashed by 100), episode progress, source-instance one-hot (max_instances; phase changes)].

    ## Rewards
    ``reward="slo"`` (default; ±1 per request when it finishes), ``"slo_dense"`` / ``"slo_balance"``
    (−1 per SLO miss at the moment it is certain; the main job's reward, its return is
    −(missed requests)), ``"latency"``, ``"latency_dense"``, ``"latency_balance"``,
    ``"ttft_dense"``, ``"ttft_balance"`` or ``"cost"``: formulas in ``envs.rewards``.

    ## Episode end
    Truncated after the scenario's ``episode_requests`` arrivals have been routed and every
    request has finished; never terminated. The last step's ``info["episode_metrics"]`` holds
    the episode summary (TTFT/TBT/E2E percentiles, SLO attainment, goodput, cost, ...).

    ## Arguments
    ``scenario`` (name or ``Scenario``), ``reward``, ``strict``, ``invalid_action_penalty``,
    ``render_mode="ansi"``, and scenario / workload overrides as keywords (e.g. ``rate_rps``).

    ## Scenarios
    ``default``, ``multitier``, ``pascal``, ``cauchy`` (see ``envs.presets.scenario_names()``).
    """

    env_id = "servegym/Routing-v0"

    def __init__(self, scenario: Any = "default", **kwargs: Any) -> None:
        super().__init__(scenario, **kwargs)
        self.action_space = spaces.Discrete(self.scenario.max_instances)
        self._decision: Decision | None = None
        self._reasoning = False

    def context_size(self) -> int:
        return 7 + self.scenario.num_tiers + self.scenario.max_instances

    def mask_size(self) -> int:
        return self.scenario.max_instances

    def cluster_options(self) -> dict[str, Any]:
        return {"router": None, "external_phase_decisions": True}

    def on_reset(self) -> None:
        self._decision = None

    def advance(self) -> bool:
        assert self.cluster is not None
        self._decision = self.cluster.advance()
        return self._decision is None

    def action_masks(self) -> np.ndarray:
        assert self.cluster is not None
        mask = np.zeros(self.scenario.max_instances, dtype=bool)
        decision = self._decision
        if decision is None:
            return mask
        model = decision.seq.request.model
        for slot, instance in enumerate(self.cluster.instances.values()):
            mask[slot] = (
                instance.lifecycle == Lifecycle.SERVING
                and (model is None or instance.model.name == model)
                and (instance.role != Role.DECODE if decision.kind == "route" else instance.role != Role.PREFILL)
            )
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
        n_tiers = self.scenario.num_tiers
        vector = np.zeros(self.context_size(), dtype=np.float32)
        decision = self._decision
        if decision is not None:
            seq = decision.seq
            vector[0] = decision.kind == "route"
            vector[1] = decision.kind == "phase"
            vector[2] = squash(seq.prompt_tokens, TOKEN_SCALE)
            vector[3] = squash(seq.generated_tokens, TOKEN_SCALE)
            vector[4 + min(seq.tier, n_tiers - 1)] = 1.0
            if decision.kind == "phase":
                vector[7 + n_tiers + list(self.cluster.instances).index(decision.instance_id)] = 1.0
        vector[4 + n_tiers] = squash(self.recent_qps(), COUNT_SCALE)
        vector[5 + n_tiers] = squash(self.cluster.cost_rate_usd_per_s() * 3600.0, 100.0)
        vector[6 + n_tiers] = self.cluster.arrived / self.scenario.episode_requests
        return vector
