"""The router of a model cascade (Cascadia §3.3, Fig. 4): arrivals enter a stage's model,
judged-out answers go on to the next stage (``simulator.cascade`` gives requests their scores)."""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence as SequenceOf
from typing import TYPE_CHECKING, Any

import numpy as np

from hardware.models import get_model
from simulator.cascade_quality import SCORE_MAX
from simulator.request import Request
from simulator.routers.base import fewest_requests
from simulator.sequence import Sequence

if TYPE_CHECKING:
    from simulator.cluster import Cluster
    from simulator.instance import Instance

JUDGE_LATENCY_S = 0.27  # one GPT-4o judgement, Cascadia §4 footnote 4 and App. H


class CascadeRouter:
    """Routes arrivals to the first model and re-routes judged-out answers to the next one.

    Give it to a cluster with ``Cluster(..., **router.cluster_options())``. Arrivals enter the
    entry stage, 0 unless ``set_entry_stage`` picks another (a model served alone, as model
    switching does, CascadeServe §6.2); within a stage a request goes to the serving
    instance of that model with the fewest requests (lowest id on ties). When a stage-i answer completes, the judge takes ``judge_latency_s``; then the answer
    is accepted if the request's score for that model is >= ``thresholds[i]``, else the request
    is re-submitted to stage i + 1 as a new sequence: it queues and prefills again and its
    earlier output is discarded. The last stage always accepts, without a judge. The judge
    compares the request's score, or, after ``set_judge_signals``, its signal (a model's
    certainty for correct/incorrect quality, CascadeServe §4.1) with the threshold.

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
        self.entry_stage = 0
        self.judge_signals: Mapping[int, Mapping[str, float]] | None = None

    def set_judge_signals(self, signals: Mapping[int, Mapping[str, float]] | None) -> None:
        """What the judge sees per request id and model (``assign_cascade_quality``'s return);
        ``None``: the judge sees the quality score itself."""
        self.judge_signals = signals

    def set_thresholds(self, thresholds: SequenceOf[float]) -> None:
        """Thresholds h_1..h_{C-1} (Cascadia §3.3), one per stage but the last, each in [0, 100];
        they apply to every judgement made from now on."""
        if len(thresholds) != len(self.models) - 1:
            raise ValueError(
                f"{len(self.models)} stages need {len(self.models) - 1} thresholds, got {list(thresholds)}"
            )
        for threshold in thresholds:
            if not 0.0 <= threshold <= SCORE_MAX:
                raise ValueError(f"thresholds must be in [0, {SCORE_MAX:g}], got {threshold!r}")
        self.thresholds = tuple(float(t) for t in thresholds)

    def set_entry_stage(self, stage: int) -> None:
        """The stage arrivals enter from now on (requests already in the cascade keep going)."""
        if isinstance(stage, bool) or not isinstance(stage, (int, np.integer)) or not 0 <= stage < len(self.models):
            raise ValueError(f"entry stage must be an integer in [0, {len(self.models) - 1}], got {stage!r}")
        self.entry_stage = int(stage)

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

    def judge_signal(self, request: Request, model: str) -> float:
        if self.judge_signals is None:
            return self.score(request, model)
        signals = self.judge_signals.get(request.request_id)
        if signals is None or model not in signals:
            known = [] if signals is None else sorted(signals)
            raise ValueError(f"request {request.request_id} has no judge signal for {model}; it has {known}")
        return signals[model]

    def instance_for(self, cluster: Cluster, stage: int) -> int:
        """The serving instance of stage ``stage``'s model with the fewest requests (lowest id on ties)."""
        model = self.models[stage]
        ids = [i for i in cluster.routable_ids() if cluster.instances[i].model.name == model]
        if not ids:
            raise RuntimeError(f"no serving instance of {model} for cascade stage {stage}")
        return fewest_requests(cluster, ids, None)

    def route(self, cluster: Cluster, seq: Sequence) -> int:
        return self.instance_for(cluster, self.entry_stage)

    def on_complete(self, cluster: Cluster, instance: Instance, seq: Sequence) -> bool:
        """The cluster's completion hook: always takes the request over (returns False)."""
        stage = self.stage_of(instance)
        score = self.score(seq.request, self.models[stage])
        if stage == len(self.models) - 1:
            self._accept(cluster, seq, score)
            return False
        signal = self.judge_signal(seq.request, self.models[stage])
        cluster.events.schedule(
            cluster.events.now_s + self.judge_latency_s, lambda _: self._judged(cluster, seq, stage, score, signal), None
        )
        return False

    def _judged(self, cluster: Cluster, seq: Sequence, stage: int, score: float, signal: float) -> None:
        if signal >= self.thresholds[stage]:
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
