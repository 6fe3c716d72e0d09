"""Headline metrics of one episode, and the agent-vs-heuristic comparison over training seeds and
evaluation seeds (probability of improvement, Agarwal et al. NeurIPS 2021, with rliable)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from agents.dashboard import higher_is_better
from agents.statistics import Interval, probability_of_improvement
from simulator.metrics import flat_metrics, summarize_by
from simulator.outcome import RequestOutcome

TIER_METRIC = re.compile(r"tier(\d+)\.(\w+)")


def base_metric(name: str) -> str:
    """``tier2.ttft_p99_s`` -> ``ttft_p99_s``; an episode metric's name is its own base."""
    match = TIER_METRIC.fullmatch(name)
    return match[2] if match else name


def better_when_higher(name: str) -> bool:
    """Whether a larger value of ``name`` is better (``agents.dashboard.higher_is_better`` of its base)."""
    return higher_is_better(base_metric(name))


def headline_values(names: Sequence[str], episode: Mapping[str, float], outcomes: Sequence[RequestOutcome],
                    duration_s: float) -> dict[str, float]:
    """Each named metric of one episode: an episode metric (``agents.rollout.run_episode``'s
    dict) or ``tier<k>.<name>``, the ``simulator.metrics`` summary of tier k's requests alone
    (NaN when tier k had no request)."""
    by_tier = None
    values = {}
    for name in names:
        match = TIER_METRIC.fullmatch(name)
        if match is None:
            if name not in episode:
                raise ValueError(f"unknown headline metric {name!r}; known: {sorted(episode)} or tier<k>.<one of them>")
            values[name] = float(episode[name])
            continue
        if by_tier is None:
            summaries = summarize_by(outcomes, "tier", duration_s=duration_s)
            by_tier = {tier: flat_metrics(summary) for tier, summary in summaries.items()}
        tier, metric = int(match[1]), match[2]
        summary = by_tier.get(tier)
        if summary is not None and metric not in summary:
            raise ValueError(f"unknown per-tier metric {metric!r} in {name!r}; known: {sorted(summary)}")
        values[name] = float(summary[metric]) if summary is not None else math.nan
    return values


@dataclass(frozen=True)
class Comparison:
    """The agent against a heuristic on one metric: the probability that the agent does better
    on an evaluation seed (``agents.statistics.probability_of_improvement``: over the agent's
    training seeds x the evaluation seeds, with its 95% stratified-bootstrap interval)."""

    metric: str
    probability: Interval

    @property
    def verdict(self) -> str:
        """``win`` when the interval lies above 0.5, ``loss`` when below, else ``tie``."""
        if self.probability.low > 0.5:
            return "win"
        if self.probability.high < 0.5:
            return "loss"
        return "tie"


def compare(metric: str, agent: Sequence[Sequence[float]], heuristic: Sequence[Sequence[float]]) -> Comparison:
    """Agent (``training seeds x evaluation seeds``) vs heuristic (one row, or one per training
    seed) on ``metric``, lower values better for latencies and costs; evaluation seeds where
    either is NaN are left out."""
    return Comparison(metric, probability_of_improvement(np.asarray(agent, dtype=float), np.asarray(heuristic, dtype=float),
                                                         better_when_higher(metric)))
