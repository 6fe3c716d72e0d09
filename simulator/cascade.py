"""Model cascades (cascadia.txt §3.3, Fig. 4): requests start at the smallest model, a judge
scores each answer and forwards it to the next, larger model when the score is below that
stage's threshold; the last stage always accepts.

Two parts:

- a *difficulty model* that gives every request a score per model (``assign_cascade_quality``);
  the scores stand in for the judge's grades (cascadia.txt uses GPT-4o grading 0-100);
- ``CascadeRouter``, the cluster's router and completion hook that carries a request through
  the stages, so each request still ends with exactly one ``RequestOutcome``.
"""

from __future__ import annotations

from collections.abc import Sequence as SequenceOf
from typing import Any

import numpy as np

from hardware.models import get_model
from simulator.cluster import Cluster
from simulator.instance import Instance
from simulator.request import Request
from simulator.sequence import Sequence

JUDGE_LATENCY_S = 0.27  # one GPT-4o judgement, cascadia.txt §4 footnote 4 and App. H
SCORE_MAX = 100.0

# Difficulty model (not fitted: the cascade issue will fit it to real judge grades).
# Latent difficulty d ~ U(0, 1); a model with P parameters (total, MoE included) scores
# clip(100 * (1 - d) ** a(P) + N(0, SCORE_NOISE_STD), 0, 100), with
# a(P) = REFERENCE_EXPONENT * (P / REFERENCE_PARAMS) ** -SIZE_ELASTICITY: bigger models have a
# smaller exponent, hence a higher score on every request. The noiseless mean score is
# 100 / (1 + a): about 70 for an 8B model, 85 for 70B and 93 for 671B, which puts 70B above
# and 671B above the quality requirements cascadia.txt §4.2 compares them at (80 and 90).
REFERENCE_PARAMS = 8e9
REFERENCE_EXPONENT = 0.43
SIZE_ELASTICITY = 0.4
SCORE_NOISE_STD = 5.0


def quality_exponent(model: str) -> float:
    """``a(P)`` of the difficulty model for ``model`` (see the module constants)."""
    params = get_model(model).params_total
    return REFERENCE_EXPONENT * (params / REFERENCE_PARAMS) ** -SIZE_ELASTICITY


def expected_quality(model: str) -> float:
    """Mean score of ``model`` without noise: E[100 (1 - d)^a] = 100 / (1 + a) for d ~ U(0, 1)."""
    return SCORE_MAX / (1.0 + quality_exponent(model))


def assign_cascade_quality(
    requests: SequenceOf[Request],
    models: SequenceOf[str],
    rng: np.random.Generator,
    noise_std: float = SCORE_NOISE_STD,
) -> None:
    """Set ``difficulty`` and ``quality_by_model`` (scores 0-100 for each of ``models``) on every
    request, in place. Draws, in this order: all difficulties, then the noise as an
    (n_requests x n_models) matrix, so the same generator state gives the same scores."""
    if not noise_std >= 0:
        raise ValueError(f"noise_std must be >= 0, got {noise_std}")
    exponents = np.array([quality_exponent(m) for m in models])
    difficulty = rng.uniform(0.0, 1.0, len(requests))
    noise = rng.normal(0.0, noise_std, (len(requests), len(models)))
    scores = np.clip(SCORE_MAX * (1.0 - difficulty[:, None]) ** exponents[None, :] + noise, 0.0, SCORE_MAX)
    for request, d, row in zip(requests, difficulty.tolist(), scores.tolist()):
        request.difficulty = d
        request.quality_by_model = dict(zip(models, row))


class CascadeRouter:
    """Routes arrivals to the first model and re-routes judged-out answers to the next one.

    Give it to a cluster with ``Cluster(..., **router.cluster_options())``. Within a stage a
    request goes to the serving instance of that model with the fewest requests (lowest id on
    ties). When a stage-i answer completes, the judge takes ``judge_latency_s``; then the answer
    is accepted if the request's score for that model is >= ``thresholds[i]``, else the request
    is re-submitted to stage i + 1 as a new sequence: it queues and prefills again and its
    earlier output is discarded. The last stage always accepts, without a judge.

    The request's one ``RequestOutcome`` is written at acceptance: ``arrival_s`` is the
    original arrival, ``finish_s`` the acceptance time (completion + judge latency, or the last
    stage's completion), token timings those of the accepted stage, ``first_scheduled_s`` the
    first stage's, preemption and migration counts summed over stages, ``instance_id`` the
    accepting instance and ``quality`` the accepted score.
    """

    def __init__(
        self, models: SequenceOf[str], thresholds: SequenceOf[float], judge_latency_s: float = JUDGE_LATENCY_S
    ) -> None:
        if len(models) == 0:
            raise ValueError("a cascade needs at least one model")
        if len(set(models)) != len(models):
            raise ValueError(f"cascade models must be distinct, got {list(models)}")
        for model in models:
            get_model(model)
        if not judge_latency_s >= 0:
            raise ValueError(f"judge_latency_s must be >= 0, got {judge_latency_s}")
        self.models = tuple(models)
        self.judge_latency_s = judge_latency_s
        self._stage_of_model = {model: stage for stage, model in enumerate(self.models)}
        self.thresholds: tuple[float, ...] = ()
        self.set_thresholds(thresholds)

    def set_thresholds(self, thresholds: SequenceOf[float]) -> None:
        """Thresholds h_1..h_{C-1} (cascadia.txt §3.3), one per stage but the last, each in [0, 100];
        they apply to every judgement made from now on."""
        if len(thresholds) != len(self.models) - 1:
            raise ValueError(
                f"{len(self.models)} stages need {len(self.models) - 1} thresholds, got {list(thresholds)}"
            )
        for threshold in thresholds:
            if not 0.0 <= threshold <= SCORE_MAX:
                raise ValueError(f"thresholds must be in [0, {SCORE_MAX:g}], got {threshold!r}")
        self.thresholds = tuple(float(t) for t in thresholds)

    def cluster_options(self) -> dict[str, Any]:
        return {"router": self.route, "completion_hook": self.on_complete}

    def stage_of(self, instance: Instance) -> int:
        model = instance.model.name
        if model not in self._stage_of_model:
            raise ValueError(
                f"instance {instance.instance_id} serves {model}, which is not in the cascade {list(self.models)}"
            )
        return self._stage_of_model[model]

    def score(self, request: Request, model: str) -> float:
        scores = request.quality_by_model
        if scores is None or model not in scores:
            known = [] if scores is None else sorted(scores)
            raise ValueError(f"request {request.request_id} has no quality score for {model}; it has {known}")
        return scores[model]

    def instance_for(self, cluster: Cluster, stage: int) -> int:
        """The serving instance of stage ``stage``'s model with the fewest requests."""
        model = self.models[stage]
        best_id, best_load = -1, 0
        for instance_id in cluster.routable_ids():
            instance = cluster.instances[instance_id]
            if instance.model.name == model and (best_id < 0 or instance.num_requests < best_load):
                best_id, best_load = instance_id, instance.num_requests
        if best_id < 0:
            raise RuntimeError(f"no serving instance of {model} for cascade stage {stage}")
        return best_id

    def route(self, cluster: Cluster, seq: Sequence) -> int:
        return self.instance_for(cluster, 0)

    def on_complete(self, cluster: Cluster, instance: Instance, seq: Sequence) -> bool:
        """The cluster's completion hook: always takes the request over (returns False)."""
        stage = self.stage_of(instance)
        score = self.score(seq.request, self.models[stage])
        if stage == len(self.models) - 1:
            self._accept(cluster, seq, score)
            return False
        cluster.events.schedule(
            cluster.events.now_s + self.judge_latency_s, lambda _: self._judged(cluster, seq, stage, score), None
        )
        return False

    def _judged(self, cluster: Cluster, seq: Sequence, stage: int, score: float) -> None:
        if score >= self.thresholds[stage]:
            self._accept(cluster, seq, score)
            return
        forwarded = Sequence(seq.request, cluster.record_token_curves)
        forwarded.first_scheduled_s = seq.first_scheduled_s
        forwarded.preempted_s = seq.preempted_s
        forwarded.num_preemptions = seq.num_preemptions
        forwarded.num_migrations = seq.num_migrations
        cluster.dispatch(forwarded, self.instance_for(cluster, stage + 1))

    @staticmethod
    def _accept(cluster: Cluster, seq: Sequence, score: float) -> None:
        outcome = seq.outcome(cluster.events.now_s)
        outcome.quality = score
        cluster.outcomes.append(outcome)
