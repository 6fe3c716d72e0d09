"""servegym/Cascade-v0: set a model cascade's judge thresholds, or pick a gear, every control interval."""

from __future__ import annotations

from collections.abc import Sequence as SequenceOf
from typing import Any

import numpy as np
from gymnasium import spaces

from envs.base import ServingEnv, boolean
from envs.observation import COUNT_SCALE, arrived_field, cost_rate_field, count_field, instance_fields_doc
from envs.schema import (
    IDENTITY,
    Block,
    Entry,
    Field,
    MaskPart,
    linear,
    observation_tables,
    ratio,
    with_observation_tables,
)
from simulator.cascade import assign_cascade_quality
from simulator.routers.cascade import JUDGE_LATENCY_S, CascadeRouter
from simulator.cascade_quality import QUALITY_KINDS, SCORE_MAX
from simulator.instance_arrays import RUNNING, WAITING
from simulator.metrics.stats import mean_float64, percentile_linear

E2E_SCALE_S = 10.0  # seconds; the context's p95 latency is squashed by it
BURST_WINDOW_S = 0.1  # CascadeServe's producer measures QPS every 100 ms (CascadeServe §3)
ACTION_MODES = ("thresholds", "gear", "continuous")
QUALITY_REWARDS = ("quality", "quality_episode", "slo_quality_episode")  # take quality_min, penalty_mu, kind, difficulty_mean


def cascade_context(
    stages: int, episode_requests: int, gears: int | None, min_queue_lengths: SequenceOf[int] | None,
    episode_quality: bool = False,
) -> tuple[Entry, ...]:
    """Cascade-v0's context fields (``envs.schema``): the last interval, per stage its queues,
    the thresholds, then the gear (gear mode), minimum queue lengths (batching) and the
    episode's quality so far (``observe_episode_quality``)."""
    per_stage = (
        count_field("waiting", "requests waiting on the stage's instances"),
        count_field("running", "requests running on them"),
        Field("accepted_share", "fraction", IDENTITY, "share of the interval's finished requests accepted there"),
    )
    entries: tuple[Entry, ...] = (
        Field("arrivals_per_s", "req/s", ratio(COUNT_SCALE), "arrivals per second over the last control interval"),
        Field("burst_arrivals_per_s", "req/s", ratio(COUNT_SCALE), "arrivals per second over the last 100 ms"),
        arrived_field(episode_requests),
        cost_rate_field(),
        count_field("finished", "requests finished in the last interval"),
        Field("p95_e2e_s", "s", ratio(E2E_SCALE_S), "their p95 E2E latency (0 when none completed)"),
        Field("mean_score", "score", linear(SCORE_MAX), "their mean accepted score (a rejected one counts 0)"),
        Block("stage", stages, per_stage, count_text="S"),
        Field("threshold", "score", linear(SCORE_MAX), "the judge thresholds h_1 … h_{S−1} in force",
              size=stages - 1, size_text="S − 1"),
    )
    if gears is not None:
        entries += (Field("gear", "gear", linear(max(gears - 1, 1)), "the gear in force", integer=True,
                          scale_text="max(G − 1, 1)"),)
    if min_queue_lengths is not None:
        entries += (Field("min_queue_length", "requests", linear(min_queue_lengths[-1]),
                          "each model's minimum queue length (with min_queue_lengths)", size=stages,
                          integer=True, size_text="S", scale_text="the largest choice"),)
    if episode_quality:
        entries += (
            Field("episode_finished", "requests", linear(episode_requests),
                  "requests finished so far this episode (with observe_episode_quality)", integer=True, scale_text="E"),
            Field("episode_mean_score", "score", linear(SCORE_MAX),
                  "their mean accepted score (a rejected one counts 0, as in the episode rewards; 0 before "
                  "the first; with observe_episode_quality)"),
        )
    return entries


def cascade_mask(
    stages: int, action_mode: str, threshold_levels: int, gears: int, queue_choices: int | None
) -> tuple[MaskPart, ...]:
    if action_mode == "gear":
        return (MaskPart("gear", (gears,), "the gears whose thresholds and entry stage are allowed (action='gear')",
                         shape_text="G"),)
    if action_mode == "continuous":
        return (MaskPart("stage", (stages - 1,), "stages whose threshold may be above 0 (action='continuous')",
                         shape_text="S − 1"),)
    parts = (MaskPart("threshold_level", (stages - 1, threshold_levels), "each stage's allowed levels",
                      shape_text="(S − 1) x levels"),)
    if queue_choices is not None:
        parts += (MaskPart("queue_length", (stages, queue_choices),
                           "each model's minimum queue length choices (always valid; with min_queue_lengths)",
                           shape_text="S x choices"),)
    return parts


class CascadeEnv(ServingEnv):
    """Tune the thresholds of a model cascade (Cascadia §3.3, Fig. 4) online.

    ## Description
    A step is one control interval (the scenario's ``control_interval_s``). Requests enter the
    cascade's first (smallest) model; when an answer of stage i completes, a judge taking
    ``judge_latency_s`` (0.27 s, Cascadia App. H) accepts it if the request's judge signal
    for that model is at least threshold h_i, else the request starts over (queue, prefill,
    decode) on stage i + 1, its earlier output discarded; the last stage always accepts
    (``simulator.cascade``). Scores are drawn at reset from the episode's seed by
    ``simulator.cascade_quality`` (kind ``quality_kind``): ``"judge"`` scores 0-100 (the judge
    sees the score), ``"correct"`` correct = 100 / incorrect = 0 (the judge sees the model's
    certainty, CascadeServe), or the replay kinds ``"mt_bench"``, ``"mmlu"``, ``"gsm8k"``
    (real RouteLLM rows, two-model cascades). Within a stage, requests go to the instance with
    the fewest requests. The clock starts at 0 at reset; the first interval runs after the
    first action. The deployment is the scenario's and stays fixed.

    ## Action space
    ``action="thresholds"`` (default): ``MultiDiscrete([threshold_levels] * (stages - 1))``;
    level k of stage i sets h_i = 100 · k / (threshold_levels − 1) (default 11 levels: 0, 10,
    ..., 100); level 0 accepts every answer, the top level only perfect scores. Thresholds
    start at level 0. ``action="gear"``: ``Discrete(len(gears))``, gear g sets the thresholds
    ``gears[g]`` (a CascadeServe gear plan's cascades, CascadeServe §3); the episode starts
    in gear 0. ``action="continuous"``: ``Box(-1, 1, (stages - 1,), float32)``, entry a_i sets
    h_i = 50 · (a_i + 1), any real threshold in [0, 100] (the symmetric, normalised box SB3
    recommends for Gaussian policies; thresholds are ordinal, so a Gaussian explores
    neighbouring thresholds where a categorical treats every level as unrelated); thresholds start
    at 0 (a_i = −1). With ``entry_stages`` (gear mode only) gear g's arrivals enter stage
    ``entry_stages[g]`` instead of the first (a model served alone: model switching,
    CascadeServe §6.2); thresholds of earlier stages then do not matter. Mask
    (``action_masks()``): a threshold above 0 at stage i needs a serving instance of model
    i + 1 (threshold mode: per-stage masks concatenated, level 0 always allowed; gear mode: one
    entry per gear, which also needs its entry stage's model served when that stage is not 0;
    continuous mode: one entry per stage but the last, True when h_i above 0 is allowed). A
    masked-out action keeps the current thresholds (no-op), costs ``invalid_action_penalty``
    and sets ``info["invalid_action"]``; ``strict=True`` raises.

    Batching (optional, threshold mode only): with ``min_queue_lengths`` (strictly increasing
    positive integers, e.g. ``(1, 2, 4, 8, 16)``) the action gets one more entry per model,
    ``MultiDiscrete([threshold_levels] * (stages - 1) + [len(min_queue_lengths)] * stages)``;
    entry stages - 1 + i picks the minimum queue length of every instance of model i
    (CascadeServe's §4.5 batching, ``Instance.set_min_queue_length``): an instance starts no new
    prefill batch until that many requests wait there or the oldest has waited
    ``max_queue_wait_s`` (default: one control interval, the period at which a CascadeServe
    producer revisits its gear, §3/§5, so a stale length holds a request at most one decision
    period). These entries are never masked; episodes start at the first choice. Without
    ``min_queue_lengths`` (default) the action, observation and instances are unchanged.

    ## Observation space
    ``Dict``: ``instances`` (max_instances x features, ``envs.observation``), ``context`` (the
    last interval's arrivals, completions, latency and quality, per stage its queues and
    acceptances, the thresholds in force; in gear mode the gear, with batching the minimum
    queue lengths; with ``observe_episode_quality`` the episode's finished requests and mean score
    so far) and ``action_mask``; the tables at the end (from ``self.schema``) give
    every entry, its unit and encoding.

    ## Rewards
    ``reward="quality"`` (default): −(p95 E2E of the interval's requests in seconds) −
    μ · max(0, q_min − Q) / (z₁ − z₂), Cascadia §3.3's J(θ) negated, with Q the interval's
    mean accepted score, z₁ / z₂ the mean scores of the last / first model
    (``stage_mean_scores``), q_min = ``quality_min`` (default 80), μ = ``quality_penalty_mu``
    (default 100). ``reward="quality_episode"``: the same latency term, the quality constraint
    on the episode's running mean score (``envs.rewards``). ``reward="slo_quality_episode"``:
    ``quality_episode`` charging the interval's SLO misses instead of its p95 (maximise SLO
    attainment at an accuracy target). ``reward="quality_latency"``:
    Cascadia App. C negated, Q / 100 − ν · max(0, L − L_max) / L_max with L_max = ``latency_max_s`` (default: the scenario's E2E
    SLO) and ν = ``latency_penalty_nu`` (default 1). ``"slo"``, ``"latency"`` and ``"cost"`` as
    in ``envs.rewards``. Every reward counts the requests that finished during the step.

    ## Episode end
    Truncated at the end of the interval in which the last of the ``episode_requests``
    requests was accepted or rejected; never terminated. The last step's
    ``info["episode_metrics"]`` holds the summary (``quality_mean`` included) and
    ``info["episode_outcomes"]`` every request's outcome.

    ## Arguments
    ``scenario`` (name or ``Scenario`` with a ``cascade`` of at least two models, each served by
    one of its instance groups, the first with at least one instance), ``action``
    (``"thresholds"`` | ``"gear"`` | ``"continuous"``), ``threshold_levels``, ``gears`` (list of
    threshold vectors, required for and only for ``action="gear"``), ``quality_kind``, ``difficulty_mean`` (δ of
    the difficulty model; ``TRACE_DIFFICULTY_MEAN`` has Cascadia's traces), ``quality_min``,
    ``quality_penalty_mu``, ``latency_max_s``, ``latency_penalty_nu``, ``judge_latency_s``, ``entry_stages``,
    ``min_queue_lengths``, ``max_queue_wait_s``, ``observe_episode_quality`` (add the episode's
    quality so far to the context: under an episode-level quality constraint, ``quality_episode``
    and ``slo_quality_episode``, the penalty a step pays depends on the running deficit, so the
    state augmented with it is Markov; the budget augmentation of Sootla et al., "Sauté RL",
    ICML 2022), ``reward``, ``strict``, ``invalid_action_penalty``,
    ``render_mode`` ("ansi" or "rgb_array", ``envs.frame``), ``backend``
    (``"compiled"``, the default: the compiled simulator core; or ``"python"``, the reference engine), and scenario /
    workload overrides.

    ## Scenarios
    ``cascadia`` (default); ``cascadeserve`` (use ``quality_kind="correct"``); any scenario
    whose ``cascade`` names its models smallest first.
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
        action: str = "thresholds",
        gears: SequenceOf[SequenceOf[float]] | None = None,
        quality_kind: str = "judge",
        difficulty_mean: float = 0.0,
        latency_max_s: float | None = None,
        latency_penalty_nu: float = 1.0,
        min_queue_lengths: SequenceOf[int] | None = None,
        max_queue_wait_s: float | None = None,
        entry_stages: SequenceOf[int] | None = None,
        observe_episode_quality: bool = False,
        **kwargs: Any,
    ) -> None:
        if not isinstance(threshold_levels, int) or isinstance(threshold_levels, bool) or threshold_levels < 2:
            raise ValueError(f"threshold_levels must be an integer >= 2, got {threshold_levels!r}")
        if action not in ACTION_MODES:
            raise ValueError(f"unknown action mode {action!r}; known: {list(ACTION_MODES)}")
        if (gears is None) == (action == "gear"):
            raise ValueError(f"gears are required for action='gear' and only for it; got action={action!r}, gears={gears!r}")
        if quality_kind not in QUALITY_KINDS:
            raise ValueError(f"unknown quality_kind {quality_kind!r}; known: {list(QUALITY_KINDS)}")
        self.min_queue_lengths = None if min_queue_lengths is None else _check_lengths(min_queue_lengths, action)
        self.observe_episode_quality = boolean("observe_episode_quality", observe_episode_quality)
        self.threshold_levels = threshold_levels
        self.quality_min = quality_min
        self.quality_penalty_mu = quality_penalty_mu
        self.action_mode = action
        self.gears = [] if gears is None else [tuple(float(h) for h in gear) for gear in gears]
        if action == "gear" and not self.gears:
            raise ValueError("action='gear' needs at least one gear")
        reward_kwargs = dict(kwargs.pop("reward_kwargs", None) or {})
        if reward in QUALITY_REWARDS:
            reward_kwargs.update(quality_min=quality_min, penalty_mu=quality_penalty_mu, kind=quality_kind,
                                 difficulty_mean=difficulty_mean)
        elif reward == "quality_latency":
            reward_kwargs.update(latency_max_s=latency_max_s, penalty_nu=latency_penalty_nu)
        super().__init__(scenario, reward=reward, reward_kwargs=reward_kwargs, **kwargs)
        self.models = self.scenario.cascade
        self._check_cascade()
        self.max_queue_wait_s = self.scenario.control_interval_s if max_queue_wait_s is None else max_queue_wait_s
        if not (isinstance(self.max_queue_wait_s, (int, float)) and 0.0 <= self.max_queue_wait_s < float("inf")):
            raise ValueError(f"max_queue_wait_s must be a finite number >= 0, got {max_queue_wait_s!r}")
        self.quality_kind = quality_kind
        self.difficulty_mean = difficulty_mean
        self.entry_stages = _check_entry_stages(entry_stages, len(self.gears), len(self.models))
        self.router = CascadeRouter(self.models, [0.0] * (len(self.models) - 1), judge_latency_s)
        for gear in self.gears:
            self.router.set_thresholds(gear)  # validates each gear's length and range
        if action == "gear":
            self.action_space = spaces.Discrete(len(self.gears))
        elif action == "continuous":
            self.action_space = spaces.Box(-1.0, 1.0, shape=(len(self.models) - 1,), dtype=np.float32)
        else:
            self.action_space = spaces.MultiDiscrete(
                [threshold_levels] * (len(self.models) - 1) + [len(self.min_queue_lengths or ())] * self._batch_entries()
            )
        self._levels = np.zeros(len(self.models) - 1, dtype=np.int64)
        self._continuous_thresholds = [0.0] * (len(self.models) - 1)
        self._queue_choices = np.zeros(self._batch_entries(), dtype=np.int64)
        self._gear = 0
        self._until_s = 0.0
        self._window_first_outcome = 0
        self._scored_outcomes = 0
        self._score_sum = 0.0
        self._stages_cluster: Any = None
        self._stage_of = np.zeros(0, dtype=np.int64)
        self._stage_matrix = np.zeros((0, 0), dtype=np.int64)
        self._stage_list: list[int] = []
        self._mask_key: tuple[Any, int] = (None, -1)
        self._serving_mask = np.zeros(0, dtype=bool)

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

    def _batch_entries(self) -> int:
        """Action entries choosing minimum queue lengths: one per model with batching, else 0."""
        return 0 if self.min_queue_lengths is None else len(self.scenario.cascade)

    def context_entries(self) -> tuple[Entry, ...]:
        gears = len(self.gears) if self.action_mode == "gear" else None
        return cascade_context(len(self.scenario.cascade), self.scenario.episode_requests, gears, self.min_queue_lengths,
                               self.observe_episode_quality)

    def mask_parts(self) -> tuple[MaskPart, ...]:
        choices = None if self.min_queue_lengths is None else len(self.min_queue_lengths)
        return cascade_mask(len(self.scenario.cascade), self.action_mode, self.threshold_levels, len(self.gears), choices)

    def cluster_options(self) -> dict[str, Any]:
        return self.router.cluster_options()

    def on_reset(self) -> None:
        assert self.cluster is not None
        signals = assign_cascade_quality(self.cluster.submitted_requests, self.models, self.np_random,
                                         kind=self.quality_kind, difficulty_mean=self.difficulty_mean)
        self.router.set_judge_signals(signals)
        self._levels = np.zeros(len(self.models) - 1, dtype=np.int64)
        self._continuous_thresholds = [0.0] * (len(self.models) - 1)
        self._gear = 0
        self.router.set_thresholds(self.thresholds())
        self.router.set_entry_stage(self.entry_stage())
        self._queue_choices = np.zeros(self._batch_entries(), dtype=np.int64)
        self._apply_min_queue_lengths()
        self._until_s = 0.0
        self._window_first_outcome = 0
        self._scored_outcomes = 0
        self._score_sum = 0.0

    def thresholds(self) -> list[float]:
        """The current thresholds h_1..h_{C-1} (scores 0-100)."""
        if self.action_mode == "gear":
            return list(self.gears[self._gear])
        if self.action_mode == "continuous":
            return list(self._continuous_thresholds)
        return [SCORE_MAX * k / (self.threshold_levels - 1) for k in self._levels.tolist()]

    def entry_stage(self) -> int:
        """The stage arrivals enter now (0 but in gear mode with ``entry_stages``)."""
        return self.entry_stages[self._gear] if self.entry_stages else 0

    def current_min_queue_lengths(self) -> dict[str, int]:
        """Each model's minimum queue length now (1 everywhere without batching)."""
        if self.min_queue_lengths is None:
            return {m: 1 for m in self.models}
        return {m: self.min_queue_lengths[int(k)] for m, k in zip(self.models, self._queue_choices)}

    def _apply_min_queue_lengths(self) -> None:
        if self.min_queue_lengths is None:
            return
        assert self.cluster is not None
        lengths = self.current_min_queue_lengths()
        for instance in self.cluster.instances.values():
            instance.set_min_queue_length(lengths[instance.model.name], self.max_queue_wait_s)

    def advance(self) -> bool:
        assert self.cluster is not None
        self._window_first_outcome = len(self.cluster.outcomes)
        self.cluster.advance(self._until_s)
        return self.cluster.pending_requests() == 0

    def _serving_models(self) -> set[str]:
        assert self.cluster is not None
        return {self.cluster.instances[i].model.name for i in self.cluster.routable_ids()}

    def _forwarding_allowed(self) -> list[bool]:
        """Per stage but the last: may a threshold above 0 forward requests to the next model?"""
        serving = self._serving_models()
        return [self.models[stage + 1] in serving for stage in range(len(self.models) - 1)]

    def compute_action_mask(self) -> np.ndarray:
        """The mask of the serving instances' models: made again only when an instance was added
        or changed lifecycle (the instance arrays' ``layout_version``)."""
        assert self.cluster is not None and self.cluster.arrays is not None
        key = (self.cluster, self.cluster.arrays.layout_version)
        if self._mask_key[0] is not key[0] or self._mask_key[1] != key[1]:
            self._mask_key, self._serving_mask = key, self._serving_action_mask()
        return self._serving_mask.copy()

    def _serving_action_mask(self) -> np.ndarray:
        allowed = self._forwarding_allowed()
        if self.action_mode == "gear":
            serving = self._serving_models()
            entries = self.entry_stages or (0,) * len(self.gears)
            return np.array([
                (entry == 0 or self.models[entry] in serving)
                and all(h == 0.0 or ok for stage, (h, ok) in enumerate(zip(gear, allowed)) if stage >= entry)
                for gear, entry in zip(self.gears, entries)
            ], dtype=bool)
        if self.action_mode == "continuous":
            return np.array(allowed, dtype=bool)
        stages, levels = len(self.models) - 1, self.threshold_levels
        mask = np.ones(self.mask_size(), dtype=bool)  # the batching entries: every choice valid
        thresholds = mask[:stages * levels].reshape(stages, levels)
        thresholds[[stage for stage, ok in enumerate(allowed) if not ok], 1:] = False  # 0 (keep all) stays valid
        return mask

    def is_valid(self, action: Any, mask: np.ndarray) -> bool:
        if self.action_mode == "gear":
            return bool(mask[int(action)])
        if self.action_mode == "continuous":
            return all(h == 0.0 or ok for h, ok in zip(_box_to_thresholds(action), mask))
        stages = len(self.models) - 1
        per_stage = mask[:stages * self.threshold_levels].reshape(stages, self.threshold_levels)
        return all(per_stage[stage, int(level)] for stage, level in enumerate(action[:stages]))

    def fallback_action(self) -> Any:
        if self.action_mode == "gear":
            return self._gear
        if self.action_mode == "continuous":
            return np.array([h / (SCORE_MAX / 2) - 1.0 for h in self._continuous_thresholds], dtype=np.float32)
        return np.concatenate([self._levels, self._queue_choices])

    def apply(self, action: Any, valid: bool) -> None:
        assert self.cluster is not None
        if self.action_mode == "gear":
            self._gear = int(action)
        elif self.action_mode == "continuous":
            if valid:  # a masked action keeps the thresholds exactly (no float round trip)
                self._continuous_thresholds = _box_to_thresholds(action)
        else:
            stages = len(self.models) - 1
            self._levels = np.array([int(level) for level in action[:stages]], dtype=np.int64)
            if self.min_queue_lengths is not None:
                self._queue_choices = np.array([int(k) for k in action[stages:]], dtype=np.int64)
                self._apply_min_queue_lengths()
        self.router.set_thresholds(self.thresholds())
        self.router.set_entry_stage(self.entry_stage())
        self._until_s = self.cluster.events.now_s + self.scenario.control_interval_s

    def context(self) -> np.ndarray:
        assert self.cluster is not None and self.cluster.arrays is not None
        cluster = self.cluster
        stages = len(self.models)
        finished = cluster.outcomes[self._window_first_outcome:]
        completed = [o for o in finished if o.completed]
        stage_of = self._stage_of_instances()
        stage_list = self._stage_list
        accepted = [0] * stages
        for outcome in completed:
            accepted[stage_list[outcome.instance_id]] += 1
        queues = self._stage_matrix @ cluster.arrays.table[:len(stage_of), WAITING:RUNNING + 1]  # stages x 2, exact
        raw: dict[str, Any] = {
            "arrivals_per_s": self.recent_qps(self.scenario.control_interval_s),
            "burst_arrivals_per_s": self.recent_qps(BURST_WINDOW_S),
            "arrived": cluster.arrived,
            "cost_rate": cluster.cost_rate_usd_per_s() * 3600.0,
            "finished": len(finished),
            "p95_e2e_s": percentile_linear([o.e2e_s for o in completed], 95) if completed else 0.0,
            "mean_score": mean_float64([o.quality if o.completed else 0.0 for o in finished]) if finished else 0.0,
            "waiting": queues[:, 0],
            "running": queues[:, 1],
            "accepted_share": np.array(accepted, dtype=np.float64) / len(finished) if finished else 0.0,
            "threshold": self.thresholds(),
        }
        if self.action_mode == "gear":
            raw["gear"] = self._gear
        if self.min_queue_lengths is not None:
            raw["min_queue_length"] = [self.min_queue_lengths[int(k)] for k in self._queue_choices]
        if self.observe_episode_quality:
            raw["episode_finished"], raw["episode_mean_score"] = self._episode_quality()
        return self.schema.encode_context(raw)

    def _episode_quality(self) -> tuple[int, float]:
        """Requests finished so far this episode and their mean accepted score (running sums)."""
        assert self.cluster is not None
        outcomes = self.cluster.outcomes
        for outcome in outcomes[self._scored_outcomes:]:
            self._score_sum += outcome.quality if outcome.completed else 0.0
        self._scored_outcomes = len(outcomes)
        return len(outcomes), self._score_sum / len(outcomes) if outcomes else 0.0

    def _stage_of_instances(self) -> np.ndarray:
        """Each instance's cascade stage, by instance id (the deployment is fixed)."""
        assert self.cluster is not None
        if self._stages_cluster is not self.cluster:
            self._stages_cluster = self.cluster
            self._stage_of = np.array([self.router.stage_of(i) for i in self.cluster.instances.values()], dtype=np.int64)
            self._stage_matrix = (np.arange(len(self.models))[:, None] == self._stage_of[None, :]).astype(np.int64)
            self._stage_list = self._stage_of.tolist()
        return self._stage_of


def _box_to_thresholds(action: Any) -> list[float]:
    """Continuous mode: a_i in [-1, 1] -> h_i = 50 · (a_i + 1) in [0, 100]."""
    return [SCORE_MAX / 2 * (float(a) + 1.0) for a in np.asarray(action).reshape(-1)]


def _check_entry_stages(stages: SequenceOf[int] | None, gears: int, models: int) -> tuple[int, ...]:
    """``entry_stages``: one stage index in [0, models - 1] per gear, gear mode only; () without."""
    if stages is None:
        return ()
    values = tuple(stages)
    if gears == 0:
        raise ValueError(f"entry_stages needs action='gear', got entry_stages={stages!r}")
    if len(values) != gears or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < models
                                   for v in values):
        raise ValueError(f"entry_stages must be {gears} stage indices in [0, {models - 1}], got {stages!r}")
    return tuple(int(v) for v in values)


def _check_lengths(lengths: SequenceOf[int], action: str) -> tuple[int, ...]:
    """``min_queue_lengths``: strictly increasing positive integers, threshold mode only."""
    if action != "thresholds":
        raise ValueError(f"min_queue_lengths needs action='thresholds', got action={action!r}")
    values = tuple(lengths)
    if (
        not values
        or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1 for v in values)
        or any(b <= a for a, b in zip(values, values[1:]))
    ):
        raise ValueError(f"min_queue_lengths must be strictly increasing positive integers, got {lengths!r}")
    return tuple(int(v) for v in values)


CascadeEnv.__doc__ = with_observation_tables(
    CascadeEnv.__doc__,
    observation_tables(
        instance_fields_doc(), cascade_context(2, 1, None, (1,), episode_quality=True),
        cascade_mask(2, "thresholds", 2, 1, 1) + cascade_mask(2, "gear", 2, 1, None) + cascade_mask(2, "continuous", 2, 1, None),
    ) + "\n\nIn gear mode the context ends instead with ``gear`` at 6 + 4S: the gear in force, x / max(G − 1, 1).",
)
