"""Reward functions, chosen by the environments' ``reward=`` argument.

Each is computed from the requests that *finished* (completed or rejected) during the step
and from the cluster's cost, so a reward is never credited twice:

- ``slo``: Σ over finished requests of w_tier · (+1 if it met its SLO else −1), divided by
  the largest tier weight (tier weights from the scenario, multitier-llumnix.txt's tiers).
- ``latency``: −Σ over completed requests of E2E / 10 s, −1 per rejected request.
- ``cost``: SLO-meeting output tokens / 1,000 − ``usd_weight`` · (dollars spent during the
  step), ``usd_weight`` = 1,000 / (the scenario's full-cluster $ per hour); the ratio of the
  two terms is tokens per USD (cauchy.txt §3.2) against an SLO floor.
"""

from __future__ import annotations

from collections.abc import Sequence

from hardware.gpus import get_gpu

from envs.scenario import Scenario
from simulator.cluster import Cluster
from simulator.metrics import meets_slo
from simulator.outcome import RequestOutcome


class RewardFunction:
    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario

    def reset(self, cluster: Cluster) -> None:
        """Called at the start of each episode."""

    def met(self, outcome: RequestOutcome) -> bool:
        return meets_slo(outcome)

    def __call__(self, cluster: Cluster, finished: Sequence[RequestOutcome]) -> float:
        raise NotImplementedError


class SLOReward(RewardFunction):
    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        top = max(scenario.tier_weights)
        if top <= 0:
            raise ValueError(f"tier_weights must have a positive entry, got {scenario.tier_weights}")
        self.weights = [w / top for w in scenario.tier_weights]

    def __call__(self, cluster: Cluster, finished: Sequence[RequestOutcome]) -> float:
        weights = self.weights
        return sum(weights[o.tier] * (1.0 if meets_slo(o) else -1.0) for o in finished)


class LatencyReward(RewardFunction):
    E2E_SCALE_S = 10.0

    def __call__(self, cluster: Cluster, finished: Sequence[RequestOutcome]) -> float:
        return -sum(o.e2e_s / self.E2E_SCALE_S if o.completed else 1.0 for o in finished)


class CostReward(RewardFunction):
    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        full_rate_usd_per_h = sum(get_gpu(g).price_per_hour_usd * n for g, n in scenario.gpu_inventory.items())
        self.usd_weight = 1000.0 / full_rate_usd_per_h
        self._last_cost_usd = 0.0

    def reset(self, cluster: Cluster) -> None:
        self._last_cost_usd = cluster.cost_usd()

    def __call__(self, cluster: Cluster, finished: Sequence[RequestOutcome]) -> float:
        cost = cluster.cost_usd()
        spent, self._last_cost_usd = cost - self._last_cost_usd, cost
        good_tokens = sum(o.output_tokens for o in finished if meets_slo(o))
        return good_tokens / 1000.0 - self.usd_weight * spent


REWARDS: dict[str, type[RewardFunction]] = {"slo": SLOReward, "latency": LatencyReward, "cost": CostReward}
