"""servegym/Cascade-v0: set a model cascade's judge thresholds every control interval."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from envs.base import ServingEnv
from envs.observation import COUNT_SCALE, squash
from envs.rewards import QualityReward
from simulator.cascade import JUDGE_LATENCY_S, SCORE_MAX, CascadeRouter, assign_cascade_quality

E2E_SCALE_S = 10.0  # seconds; the context's p95 latency is squashed by it


class CascadeEnv(ServingEnv):
    """Tune the thresholds of a model cascade (cascadia.txt §3.3, Fig. 4) online.

    ## Description
    A step is one control interval (the scenario's ``control_interval_s``). Requests enter the
    cascade's first (smallest) model; when an answer of stage i completes, a judge taking
    ``judge_latency_s`` (0.27 s, cascadia.txt App. H) accepts it if the request's score for
    that model is at least threshold h_i, else the request starts over (queue, prefill,
    decode) on stage i + 1; the last stage always accepts (``simulator.cascade``). Scores come
    from ``simulator.cascade``'s difficulty model, drawn at reset from the episode's seed.
    Within a stage, requests go to the instance with the fewest requests. The clock starts at
    0 at reset; the first interval runs after the first action. This is the minimal version:
    the deployment is the scenario's and stays fixed.

    ## Action space
    ``MultiDiscrete([threshold_levels] * (stages - 1))``: level k of stage i sets
    h_i = 100 · k / (threshold_levels − 1) (default 11 levels: 0, 10, ..., 100); level 0
    accepts every answer, level ``threshold_levels − 1`` only perfect scores. Mask
    (``action_masks()``, per-stage masks concatenated): a stage whose next model has no
    serving instance allows level 0 only. A masked-out action keeps the current thresholds
    (no-op), costs ``invalid_action_penalty`` and sets ``info["invalid_action"]``;
    ``strict=True`` raises. Thresholds start at level 0 (everything answered by the first
    model).

    ## Observation space
    ``Dict``: ``instances`` (max_instances x features, ``envs.observation``), ``action_mask``
    and ``context`` = [arrivals per second over the last 10 s (squashed by 16), episode
    progress, cluster $ per hour (squashed by 100), requests finished in the last interval
    (squashed by 16), their p95 E2E (squashed by 10 s), their mean accepted score / 100] + per
    stage [waiting and running requests on its instances (squashed by 16), share of the
    interval's finished requests accepted there] + the current thresholds / 100.

    ## Rewards
    ``reward="quality"`` (default): −(p95 E2E of the interval's requests in seconds) −
    μ · max(0, q_min − Q) / (z₁ − z₂), cascadia.txt §3.3's latency-quality score J(θ) negated,
    with Q the interval's mean accepted score, z₁ / z₂ the mean scores of the last / first
    model, q_min = ``quality_min`` (default 80) and μ = ``quality_penalty_mu`` (default 100);
    see ``envs.rewards.QualityReward``. ``"slo"`` and ``"latency"`` as in ``envs.rewards``.

    ## Episode end
    Truncated at the end of the interval in which the last of the ``episode_requests``
    requests was accepted or rejected; never terminated. The last step's
    ``info["episode_metrics"]`` holds the summary (``quality_mean`` included).

    ## Arguments
    ``scenario`` (name or ``Scenario`` with a ``cascade`` of at least two models, each served by
    one of its instance groups, the first with at least one instance), ``threshold_levels``,
    ``quality_min``, ``quality_penalty_mu``, ``judge_latency_s``, ``reward``, ``strict``,
    ``invalid_action_penalty``, ``render_mode="ansi"``, and scenario / workload overrides.

    ## Scenarios
    ``cascadia`` (default); any scenario whose ``cascade`` names its models smallest first.
    """

    env_id = "servegym/Cascade-v0"

    def __init__(
        self,
        scenario: Any = "cascadia",
        *,
        threshold_levels: int = 11,
        quality_min: float = 80.0,
        quality_penalty_mu: float = 100.0,
        judge_latency_s: float = JUDGE_LATENCY_S,
        reward: str = "quality",
        **kwargs: Any,
    ) -> None:
        if not isinstance(threshold_levels, int) or isinstance(threshold_levels, bool) or threshold_levels < 2:
            raise ValueError(f"threshold_levels must be an integer >= 2, got {threshold_levels!r}")
        self.threshold_levels = threshold_levels
        super().__init__(scenario, reward=reward, **kwargs)
        if reward == "quality":
            self.reward_fn = QualityReward(self.scenario, quality_min=quality_min, penalty_mu=quality_penalty_mu)
        self.models = self.scenario.cascade
        self._check_cascade()
        self.router = CascadeRouter(self.models, [0.0] * (len(self.models) - 1), judge_latency_s)
        self.action_space = spaces.MultiDiscrete([threshold_levels] * (len(self.models) - 1))
        self._levels = np.zeros(len(self.models) - 1, dtype=np.int64)
        self._until_s = 0.0
        self._window_first_outcome = 0

    def _check_cascade(self) -> None:
        models, name = self.models, self.scenario.name
        if len(models) < 2:
            raise ValueError(f"Cascade-v0 needs a cascade of at least two models; scenario {name!r} has {list(models)}")
        served = {g.config.model for g in self.scenario.instances}
        missing = [m for m in models if m not in served]
        if missing:
            raise ValueError(
                f"cascade models {missing} have no instance group in scenario {name!r}; groups serve {sorted(served)}"
            )
        outside = sorted(served - set(models))
        if outside:
            raise ValueError(f"scenario {name!r} deploys {outside}, which are not in its cascade {list(models)}")
        if sum(g.count for g in self.scenario.instances if g.config.model == models[0]) == 0:
            raise ValueError(f"the cascade's first model {models[0]} has no instance in scenario {name!r}")

    def context_size(self) -> int:
        stages = len(self.scenario.cascade)
        return 6 + 3 * stages + max(stages - 1, 0)

    def mask_size(self) -> int:
        return self.threshold_levels * max(len(self.scenario.cascade) - 1, 0)

    def cluster_options(self) -> dict[str, Any]:
        return self.router.cluster_options()

    def on_reset(self) -> None:
        assert self.cluster is not None
        assign_cascade_quality(self.cluster.submitted_requests, self.models, self.np_random)
        self._levels = np.zeros(len(self.models) - 1, dtype=np.int64)
        self.router.set_thresholds(self.thresholds())
        self._until_s = 0.0
        self._window_first_outcome = 0

    def thresholds(self) -> list[float]:
        """The current thresholds h_1..h_{C-1} (scores 0-100)."""
        return [SCORE_MAX * int(k) / (self.threshold_levels - 1) for k in self._levels]

    def advance(self) -> bool:
        assert self.cluster is not None
        self._window_first_outcome = len(self.cluster.outcomes)
        self.cluster.advance(self._until_s)
        return self.cluster.pending_requests() == 0

    def _serving_models(self) -> set[str]:
        assert self.cluster is not None
        return {self.cluster.instances[i].model.name for i in self.cluster.routable_ids()}

    def action_masks(self) -> np.ndarray:
        serving = self._serving_models()
        mask = np.zeros((len(self.models) - 1, self.threshold_levels), dtype=bool)
        mask[:, 0] = True
        for stage in range(len(self.models) - 1):
            if self.models[stage + 1] in serving:
                mask[stage, :] = True
        return mask.reshape(-1)

    def is_valid(self, action: Any, mask: np.ndarray) -> bool:
        per_stage = mask.reshape(len(self.models) - 1, self.threshold_levels)
        return all(per_stage[stage, int(level)] for stage, level in enumerate(action))

    def fallback_action(self) -> np.ndarray:
        return self._levels.copy()

    def apply(self, action: Any, valid: bool) -> None:
        assert self.cluster is not None
        self._levels = np.array([int(level) for level in action], dtype=np.int64)
        self.router.set_thresholds(self.thresholds())
        self._until_s = self.cluster.events.now_s + self.scenario.control_interval_s

    def context(self) -> np.ndarray:
        assert self.cluster is not None
        cluster = self.cluster
        stages = len(self.models)
        vector = np.zeros(self.context_size(), dtype=np.float32)
        finished = cluster.outcomes[self._window_first_outcome:]
        completed = [o for o in finished if o.completed]
        vector[0] = squash(self.recent_qps(), COUNT_SCALE)
        vector[1] = cluster.arrived / self.scenario.episode_requests
        vector[2] = squash(cluster.cost_rate_usd_per_s() * 3600.0, 100.0)
        vector[3] = squash(len(finished), COUNT_SCALE)
        if completed:
            vector[4] = squash(float(np.percentile([o.e2e_s for o in completed], 95)), E2E_SCALE_S)
            vector[5] = float(np.mean([o.quality for o in completed])) / SCORE_MAX
        accepted = [0] * stages
        for outcome in completed:
            accepted[self.router.stage_of(cluster.instances[outcome.instance_id])] += 1
        waiting = [0] * stages
        running = [0] * stages
        for instance in cluster.active_instances():
            stage = self.router.stage_of(instance)
            waiting[stage] += len(instance.waiting)
            running[stage] += len(instance.running)
        for stage in range(stages):
            vector[6 + 3 * stage] = squash(waiting[stage], COUNT_SCALE)
            vector[7 + 3 * stage] = squash(running[stage], COUNT_SCALE)
            vector[8 + 3 * stage] = accepted[stage] / len(finished) if finished else 0.0
        vector[6 + 3 * stages:] = np.asarray(self.thresholds(), dtype=np.float32) / SCORE_MAX
        return vector
