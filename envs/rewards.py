"""Reward functions, chosen by the environments' ``reward=`` argument.

Each is computed from the requests that *finished* (completed or rejected) during the step
and from the cluster's cost, so a reward is never credited twice:

- ``slo``: Σ over finished requests of w_tier · (+1 if it met its SLO else −1), divided by
  the largest tier weight (tier weights from the scenario, Llumnix-K's tiers).
- ``latency``: −Σ over completed requests of E2E / 10 s, −1 per rejected request.
- ``latency_dense``: −(∫ requests in the system dt over the step) / 10 s. By Little's law the
  episode's sum is −Σ over all requests of their time in the system / 10 s, the ``latency``
  total (rejected requests counted by their time until rejection), but paid while the time
  accrues: a decision that lengthens queues costs at once, and postponing a request's end
  (which the delayed ``slo`` / ``latency`` rewards favour under discounting) saves nothing.
- ``ttft_dense``: −Σ over tiers k of (w_k / max w) · ∫ W_k(t) dt over the step / 1 s, W_k the
  tier-k requests that have arrived and have no first token yet. By Little's law the episode's
  sum is −Σ over requests of (w_tier / max w) · TTFT / 1 s (a rejected request counted until its
  rejection): the tier-weighted prefill latency of Llumnix-K §5.1, paid while the
  wait accrues rather than when the request finishes.
- ``ttft_balance``: ``ttft_dense`` plus the shaping of ``latency_balance``. Under a burst the
  dense TTFT alone cannot tell a good placement from a bad one within a discounted horizon (a
  request waits in either queue until long after), the shaping charges the queue it joins at once.
- ``slo_dense``: −(w_tier / max w) for every request that misses its SLO, charged at the first
  moment the miss is certain instead of when the request finishes: at its TTFT deadline
  (arrival + TTFT target) if no first token came by then; at its TPOT deadline (first token +
  TPOT target × (output tokens − 1)) if it has not finished by then, since its mean time per
  output token can then only exceed the target; otherwise when it ends (a rejection, or a
  target the deadlines do not cover). Each request is charged at most once, so the episode's
  return is exactly −Σ over missed requests of w_tier / max w: with one tier, −(requests) ×
  (1 − SLO attainment), the headline metric. TTFT misses are known within one TTFT target of
  the routing decision that caused them, not a whole output later.
- ``slo_balance``: ``slo_dense`` plus the shaping of ``latency_balance``, whose terms sum to 0
  over an episode, so the return is still −(tier-weighted misses).
- ``latency_balance``: ``latency_dense`` plus potential-based shaping (Ng, Harada & Russell,
  ICML 1999, with γ = 1) Φ(s') − Φ(s), Φ = −Σ over instances of (requests on it / 16)²: routing
  to an instance with n requests costs (2n + 1) / 256 at once, and the shaping terms of an
  episode sum to Φ(end) − Φ(start) = 0 (every instance is empty at both ends).
- ``cost``: SLO-meeting output tokens / 1,000 − ``usd_weight`` · (dollars spent during the
  step), ``usd_weight`` = 1,000 / (the scenario's full-cluster $ per hour); the ratio of the
  two terms is tokens per USD (Cauchy §3.2) against an SLO floor. With
  ``reference_tokens_per_usd`` R the reward is (SLO-meeting output tokens − R · dollars) / 1,000,
  the parametric form of the ratio objective (Dinkelbach, Management Science 1967): a window
  earns a positive reward exactly when its SLO-meeting tokens per USD beat R, so maximising it
  from R = a heuristic's ratio can only raise the ratio. With ``waiting_potential`` c > 0 it adds
  potential-based shaping Φ(s') − Φ(s), Φ = −c · (requests waiting in the cluster) (Ng, Harada &
  Russell, ICML 1999, γ = 1): a decision that makes the queue grow pays at once instead of when
  the delayed requests miss their SLOs tens of steps later, and the episode's shaping sums to
  Φ(end) − Φ(start) = 0 (nothing waits at either end).
- ``quality`` (cascade scenarios): −J(θ) of Cascadia §3.3, −L − μ · max(0, q_min − Q) /
  (z₁ − z₂), with L the p95 E2E (seconds) of the completed requests, Q their mean accepted
  score (a rejected request scores 0), z₁ / z₂ the mean scores of the cascade's last / first
  model (``simulator.cascade_quality.stage_mean_scores``); 0 when nothing finished.
- ``quality_episode`` (cascade scenarios): −J(θ) with the quality constraint on the *episode's*
  mean score, as §3.3 states it for a workload, instead of each interval's: −L − μ · ΔD /
  ((z₁ − z₂) · r), D = max(0, q_min · n − Σ scores) the running deficit over the n requests
  finished so far, r the requests an interval (rate × control interval). The penalties telescope
  to μ · (N / r) · max(0, q_min − Q_episode) / (z₁ − z₂), N the episode's requests and N / r its
  intervals at the mean rate: a noisy interval below q_min costs nothing while the episode
  stays above it.
- ``slo_quality_episode`` (cascade scenarios): ``quality_episode`` with the latency term
  replaced by the interval's SLO misses per expected arrival, −m / r, m the finished requests
  that missed their SLO (a rejected request misses). The episode's return is −(N / r) ·
  ((1 − SLO attainment) + μ · max(0, q_min − Q_episode) / (z₁ − z₂)): maximise SLO attainment
  subject to an accuracy target, CascadeServe's objective with an accuracy SLO
  (CascadeServe §3), in the penalty form of Cascadia §3.3.
- ``quality_latency`` (cascade scenarios): Cascadia App. C's latency-constrained objective,
  negated: Q / 100 − ν · max(0, L − L_max) / (z_lat,max − z_lat,min), with L and Q as above,
  L_max the latency budget and z_lat,min = 0, z_lat,max = L_max unless given; 0 when nothing
  finished.
"""

from __future__ import annotations

import heapq
import inspect
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from hardware.gpus import get_gpu

from envs.observation import COUNT_SCALE
from envs.scenario import Scenario
from simulator.cascade_quality import SCORE_MAX, stage_mean_scores
from simulator.cluster import Cluster
from simulator.metrics import meets_slo
from simulator.metrics.stats import mean_float64, percentile_linear
from simulator.outcome import RequestOutcome


def tier_weights(scenario: Scenario) -> list[float]:
    """The scenario's tier weights divided by the largest, so the top tier weighs 1."""
    top = max(scenario.tier_weights)
    if top <= 0:
        raise ValueError(f"tier_weights must have a positive entry, got {scenario.tier_weights}")
    return [w / top for w in scenario.tier_weights]


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
        self.weights = tier_weights(scenario)

    def __call__(self, cluster: Cluster, finished: Sequence[RequestOutcome]) -> float:
        weights = self.weights
        return sum(weights[o.tier] * (1.0 if meets_slo(o) else -1.0) for o in finished)


class LatencyReward(RewardFunction):
    E2E_SCALE_S = 10.0

    def __call__(self, cluster: Cluster, finished: Sequence[RequestOutcome]) -> float:
        return -sum(o.e2e_s / self.E2E_SCALE_S if o.completed else 1.0 for o in finished)


class CostReward(RewardFunction):
    def __init__(self, scenario: Scenario, reference_tokens_per_usd: float | None = None,
                 waiting_potential: float = 0.0) -> None:
        super().__init__(scenario)
        if not (isinstance(waiting_potential, (int, float)) and 0.0 <= waiting_potential < math.inf):
            raise ValueError(f"waiting_potential must be a finite number >= 0, got {waiting_potential!r}")
        self.waiting_potential = float(waiting_potential)
        self._potential = 0.0
        if reference_tokens_per_usd is None:
            full_rate_usd_per_h = sum(get_gpu(g).price_per_hour_usd * n for g, n in scenario.gpu_inventory.items())
            self.usd_weight = 1000.0 / full_rate_usd_per_h
        elif isinstance(reference_tokens_per_usd, (int, float)) and math.isfinite(reference_tokens_per_usd) \
                and reference_tokens_per_usd > 0:
            self.usd_weight = reference_tokens_per_usd / 1000.0
        else:
            raise ValueError(f"reference_tokens_per_usd must be a positive finite number, got {reference_tokens_per_usd!r}")
        self._last_cost_usd = 0.0

    def potential(self, cluster: Cluster) -> float:
        if not self.waiting_potential:
            return 0.0
        return -self.waiting_potential * sum(len(i.waiting) for i in cluster.instances.values())

    def reset(self, cluster: Cluster) -> None:
        self._last_cost_usd = cluster.cost_usd()
        self._potential = self.potential(cluster)

    def __call__(self, cluster: Cluster, finished: Sequence[RequestOutcome]) -> float:
        cost = cluster.cost_usd()
        spent, self._last_cost_usd = cost - self._last_cost_usd, cost
        good_tokens = sum(o.output_tokens for o in finished if meets_slo(o))
        potential = self.potential(cluster)
        shaping, self._potential = potential - self._potential, potential
        return good_tokens / 1000.0 - self.usd_weight * spent + shaping


class DenseLatencyReward(RewardFunction):
    """``latency_dense``: ∫ N(t) dt over the step, N the requests arrived and not yet ended, as
    N(t_prev)·Δt + Σ over arrivals in the step (t − arrival) − Σ over ends in the step (t − end)."""

    E2E_SCALE_S = LatencyReward.E2E_SCALE_S

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self._last_s = 0.0
        self._arrived = 0
        self._ended = 0

    def reset(self, cluster: Cluster) -> None:
        self._last_s = cluster.events.now_s
        self._arrived = cluster.arrived
        self._ended = len(cluster.outcomes)

    def __call__(self, cluster: Cluster, finished: Sequence[RequestOutcome]) -> float:
        now_s = cluster.events.now_s
        in_system = self._arrived - self._ended
        arrivals = cluster.submitted_requests[self._arrived:cluster.arrived]
        request_s = in_system * (now_s - self._last_s)
        request_s += sum(now_s - r.arrival_s for r in arrivals)
        request_s -= sum(now_s - o.finish_s for o in cluster.outcomes[self._ended:])
        self._last_s, self._arrived, self._ended = now_s, cluster.arrived, len(cluster.outcomes)
        return -request_s / self.E2E_SCALE_S


class DenseTTFTReward(RewardFunction):
    """``ttft_dense``: the tier-weighted ∫ W_k(t) dt of the step, from each waiting request's
    overlap with the step, [max(last step, arrival), min(now, first token or rejection)]."""

    TTFT_SCALE_S = 1.0

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.weights = tier_weights(scenario)
        self._last_s = 0.0
        self._seen = 0
        self._waiting: list[Any] = []  # simulator Sequences without a first token at the last step

    def reset(self, cluster: Cluster) -> None:
        self._last_s = cluster.events.now_s
        self._seen = len(cluster.arrived_sequences)
        self._waiting = list(cluster.arrived_sequences)

    def __call__(self, cluster: Cluster, finished: Sequence[RequestOutcome]) -> float:
        now_s, last_s = cluster.events.now_s, self._last_s
        rejected_s = {o.request_id: o.finish_s for o in finished if not o.completed}
        candidates = self._waiting + cluster.arrived_sequences[self._seen:]
        waited_s, still = 0.0, []
        for seq in candidates:
            end_s = seq.first_token_s
            if math.isnan(end_s):
                end_s = rejected_s.get(seq.request_id, math.inf)
            if end_s > now_s:
                still.append(seq)
            waited_s += self.weights[seq.tier] * max(0.0, min(end_s, now_s) - max(last_s, seq.arrival_s))
        self._last_s, self._seen, self._waiting = now_s, len(cluster.arrived_sequences), still
        return -waited_s / self.TTFT_SCALE_S


class SLOMissReward(RewardFunction):
    """``slo_dense``: each SLO miss charged once, when it becomes certain (module docstring).

    Two heaps of (deadline, arrival order, sequence): TTFT deadlines of arrivals, and TPOT
    deadlines of requests whose first token came in time; a step pops the deadlines it passed."""

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.weights = tier_weights(scenario)
        self._seen = 0
        self._ended: set[int] = set()
        self._charged: set[int] = set()
        self._ttft_due: list[tuple[float, int, Any]] = []
        self._tpot_due: list[tuple[float, int, Any]] = []

    def reset(self, cluster: Cluster) -> None:
        self._seen = 0
        self._ended, self._charged = set(), set()
        self._ttft_due, self._tpot_due = [], []
        self._admit(cluster)

    def _admit(self, cluster: Cluster) -> None:
        arrivals = cluster.arrived_sequences
        for order in range(self._seen, len(arrivals)):
            seq = arrivals[order]
            target_s = seq.request.slo.ttft_s
            heapq.heappush(self._ttft_due, (seq.arrival_s + (math.inf if target_s is None else target_s), order, seq))
        self._seen = len(arrivals)

    def _charge(self, seq: Any) -> float:
        self._charged.add(seq.request_id)
        return self.weights[seq.tier]

    def __call__(self, cluster: Cluster, finished: Sequence[RequestOutcome]) -> float:
        now_s = cluster.events.now_s
        self._admit(cluster)
        missed = 0.0
        for outcome in finished:
            self._ended.add(outcome.request_id)
            if outcome.request_id not in self._charged and not meets_slo(outcome):
                self._charged.add(outcome.request_id)
                missed += self.weights[outcome.tier]
        while self._ttft_due and self._ttft_due[0][0] <= now_s:
            deadline_s, order, seq = heapq.heappop(self._ttft_due)
            if seq.request_id in self._charged:
                continue
            if not seq.first_token_s <= deadline_s:
                missed += self._charge(seq)
                continue
            tbt_s = seq.request.slo.tbt_s
            if tbt_s is not None and seq.output_tokens > 1 and seq.request_id not in self._ended:
                heapq.heappush(self._tpot_due, (seq.first_token_s + tbt_s * (seq.output_tokens - 1), order, seq))
        while self._tpot_due and self._tpot_due[0][0] < now_s:
            _, _, seq = heapq.heappop(self._tpot_due)
            if seq.request_id not in self._ended and seq.request_id not in self._charged:
                missed += self._charge(seq)
        return -missed


class LoadBalanceShaping:
    """Mixin adding potential-based shaping Φ(s') − Φ(s), Φ = −Σ_k (n_k / ``COUNT_SCALE``)² over the
    instances' request counts, to a reward: joining a queue of n costs (2n + 1) / 256 at once."""

    COUNT_SCALE = COUNT_SCALE  # the observation's request-count scale

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)  # type: ignore[call-arg]
        self._potential = 0.0

    def potential(self, cluster: Cluster) -> float:
        return -sum((i.num_requests / self.COUNT_SCALE) ** 2 for i in cluster.instances.values())

    def reset(self, cluster: Cluster) -> None:
        super().reset(cluster)  # type: ignore[misc]
        self._potential = self.potential(cluster)

    def __call__(self, cluster: Cluster, finished: Sequence[RequestOutcome]) -> float:
        potential = self.potential(cluster)
        shaping, self._potential = potential - self._potential, potential
        return super().__call__(cluster, finished) + shaping  # type: ignore[misc]


class BalancedDenseLatencyReward(LoadBalanceShaping, DenseLatencyReward):
    """``latency_balance``: ``latency_dense`` + the load-balance shaping."""


class BalancedDenseTTFTReward(LoadBalanceShaping, DenseTTFTReward):
    """``ttft_balance``: ``ttft_dense`` + the load-balance shaping."""


class BalancedSLOMissReward(LoadBalanceShaping, SLOMissReward):
    """``slo_balance``: ``slo_dense`` + the load-balance shaping."""


def _interval_latency_and_quality(finished: Sequence[RequestOutcome], reward_name: str) -> tuple[float, float]:
    """p95 E2E (s) of the completed requests and mean accepted score (rejected: 0) of ``finished``."""
    e2e_s = [o.e2e_s for o in finished if o.completed]
    scores = [o.quality if o.completed else 0.0 for o in finished]
    if any(s != s for s in scores):
        raise ValueError(f"reward {reward_name!r} needs outcomes with a quality score (a cascade router)")
    latency_s = percentile_linear(e2e_s, 95) if e2e_s else 0.0
    return latency_s, mean_float64(scores)


def _check_cascade(scenario: Scenario, reward_name: str) -> None:
    if len(scenario.cascade) < 2:
        raise ValueError(f"reward {reward_name!r} needs a cascade of at least two models; scenario {scenario.name!r} "
                         f"has cascade={list(scenario.cascade)}")


class QualityReward(RewardFunction):
    """Cascadia's latency-quality score, negated (Cascadia §3.3 and App. D): utopia z₁ and
    nadir z₂ are the mean scores of the cascade's largest and smallest model under quality kind
    ``kind`` (``simulator.cascade_quality``); ``quality_min`` (q_min, default 80 of 100) and
    ``penalty_mu`` (μ, default 100, the paper's example) set the quality constraint and its weight."""

    def __init__(self, scenario: Scenario, quality_min: float = 80.0, penalty_mu: float = 100.0, kind: str = "judge",
                 difficulty_mean: float = 0.0) -> None:
        super().__init__(scenario)
        _check_cascade(scenario, "quality")
        if not 0.0 <= quality_min <= SCORE_MAX:
            raise ValueError(f"quality_min must be in [0, {SCORE_MAX:g}], got {quality_min!r}")
        if not penalty_mu >= 0:
            raise ValueError(f"penalty_mu must be >= 0, got {penalty_mu!r}")
        means = stage_mean_scores(scenario.cascade, kind, difficulty_mean)
        self.utopia, self.nadir = means[-1], means[0]
        if not self.utopia > self.nadir:
            raise ValueError(f"the cascade's last model ({scenario.cascade[-1]}, mean score {self.utopia:.2f}) must score "
                             f"above its first ({scenario.cascade[0]}, {self.nadir:.2f})")
        self.quality_min = quality_min
        self.penalty_mu = penalty_mu

    def __call__(self, cluster: Cluster, finished: Sequence[RequestOutcome]) -> float:
        if not finished:
            return 0.0
        latency_s, quality = _interval_latency_and_quality(finished, "quality")
        shortfall = max(0.0, self.quality_min - quality) / (self.utopia - self.nadir)
        return -latency_s - self.penalty_mu * shortfall


class EpisodeQualityReward(QualityReward):
    """``quality_episode``: ``quality``'s latency term per interval, its quality constraint on the
    episode's running mean, charged as the running deficit grows (and refunded as it shrinks)."""

    def __init__(self, scenario: Scenario, **kwargs: Any) -> None:
        super().__init__(scenario, **kwargs)
        self.requests_per_interval = scenario.workload.rate_rps * scenario.control_interval_s
        self._finished = 0
        self._score_sum = 0.0
        self._deficit = 0.0

    def reset(self, cluster: Cluster) -> None:
        self._finished, self._score_sum, self._deficit = 0, 0.0, 0.0

    def __call__(self, cluster: Cluster, finished: Sequence[RequestOutcome]) -> float:
        if not finished:
            return 0.0
        latency_s, quality = _interval_latency_and_quality(finished, "quality_episode")
        self._finished += len(finished)
        self._score_sum += quality * len(finished)
        deficit = max(0.0, self.quality_min * self._finished - self._score_sum)
        grown, self._deficit = deficit - self._deficit, deficit
        penalty = self.penalty_mu * grown / ((self.utopia - self.nadir) * self.requests_per_interval)
        return -self.latency_cost(latency_s, finished) - penalty

    def latency_cost(self, latency_s: float, finished: Sequence[RequestOutcome]) -> float:
        """The interval's latency term: its p95 E2E in seconds."""
        return latency_s


class EpisodeSLOQualityReward(EpisodeQualityReward):
    """``slo_quality_episode``: ``quality_episode`` charging the interval's SLO misses per
    expected arrival instead of its p95 E2E (module docstring)."""

    def latency_cost(self, latency_s: float, finished: Sequence[RequestOutcome]) -> float:
        return sum(1 for o in finished if not meets_slo(o)) / self.requests_per_interval


class LatencyConstrainedQualityReward(RewardFunction):
    """Cascadia App. C, negated: maximise quality under a latency budget. ``latency_max_s``
    (L_max) defaults to the scenario's tier-0 E2E SLO; ``latency_span_s`` (z_lat,max − z_lat,min)
    defaults to L_max (best latency 0, worst L_max); ``penalty_nu`` ν defaults to 1, so overrunning
    the budget by L_max costs as much as the whole 0-100 quality range."""

    def __init__(self, scenario: Scenario, latency_max_s: float | None = None, latency_span_s: float | None = None,
                 penalty_nu: float = 1.0) -> None:
        super().__init__(scenario)
        _check_cascade(scenario, "quality_latency")
        if latency_max_s is None:
            latency_max_s = scenario.workload.slo(0).e2e_s
            if latency_max_s is None:
                raise ValueError(f"reward 'quality_latency' needs latency_max_s: scenario {scenario.name!r} has no E2E SLO")
        if not latency_max_s > 0:
            raise ValueError(f"latency_max_s must be > 0, got {latency_max_s!r}")
        span_s = latency_max_s if latency_span_s is None else latency_span_s
        if not span_s > 0:
            raise ValueError(f"latency_span_s must be > 0, got {latency_span_s!r}")
        if not penalty_nu >= 0:
            raise ValueError(f"penalty_nu must be >= 0, got {penalty_nu!r}")
        self.latency_max_s = float(latency_max_s)
        self.latency_span_s = float(span_s)
        self.penalty_nu = penalty_nu

    def __call__(self, cluster: Cluster, finished: Sequence[RequestOutcome]) -> float:
        if not finished:
            return 0.0
        latency_s, quality = _interval_latency_and_quality(finished, "quality_latency")
        overrun = max(0.0, latency_s - self.latency_max_s) / self.latency_span_s
        return quality / SCORE_MAX - self.penalty_nu * overrun


REWARDS: dict[str, type[RewardFunction]] = {
    "slo": SLOReward, "latency": LatencyReward, "latency_dense": DenseLatencyReward,
    "latency_balance": BalancedDenseLatencyReward, "ttft_dense": DenseTTFTReward,
    "ttft_balance": BalancedDenseTTFTReward, "slo_dense": SLOMissReward, "slo_balance": BalancedSLOMissReward,
    "cost": CostReward, "quality": QualityReward,
    "quality_episode": EpisodeQualityReward, "slo_quality_episode": EpisodeSLOQualityReward,
    "quality_latency": LatencyConstrainedQualityReward,
}


def make_reward(name: str, scenario: Scenario, **reward_kwargs: Any) -> RewardFunction:
    """The reward ``name`` of ``REWARDS`` for ``scenario``, built with its own keyword arguments
    (e.g. ``cost``'s ``reference_tokens_per_usd``, ``quality``'s ``quality_min``); the one place
    an environment's reward is made. An unknown name or argument raises ``ValueError``."""
    if name not in REWARDS:
        raise ValueError(f"unknown reward {name!r}; known: {sorted(REWARDS)}")
    reward_class = REWARDS[name]
    accepted = _init_arguments(reward_class)
    unknown = sorted(set(reward_kwargs) - set(accepted))
    if unknown:
        raise ValueError(f"reward {name!r} takes no argument(s) {unknown}; it takes: {accepted}")
    return reward_class(scenario, **reward_kwargs)


def _init_arguments(reward_class: type[RewardFunction]) -> list[str]:
    """The keyword arguments ``reward_class(scenario, ...)`` takes; an ``__init__`` passing
    ``**kwargs`` on takes its bases' too."""
    accepted: list[str] = []
    for klass in reward_class.__mro__:
        if "__init__" not in vars(klass):
            continue
        parameters = inspect.signature(vars(klass)["__init__"]).parameters.values()
        accepted += [p.name for p in parameters if p.name not in ("self", "scenario", *accepted)
                     and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
        if not any(p.kind == p.VAR_KEYWORD for p in parameters):
            break
    return accepted
