"""Headline metrics of one episode, and the paired agent-vs-heuristic comparison over seeds."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agents.dashboard import higher_is_better
from agents.evaluate import mean_ci
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
    """Agent minus heuristic on one metric, paired by seed: the mean difference, its 95%
    confidence half-width (Student t, n - 1 degrees of freedom) and the verdict."""

    metric: str
    mean_difference: float
    half_width: float
    n: int

    @property
    def verdict(self) -> str:
        """``win`` / ``loss`` when the interval excludes 0 on the better / worse side, else ``tie``."""
        if self.n < 2 or math.isnan(self.half_width):
            return "tie"
        sign = 1.0 if better_when_higher(self.metric) else -1.0
        if sign * self.mean_difference - self.half_width > 0:
            return "win"
        if sign * self.mean_difference + self.half_width < 0:
            return "loss"
        return "tie"


def compare(metric: str, agent: Sequence[float], heuristic: Sequence[float]) -> Comparison:
    """Paired comparison of per-seed values (same seeds, same order); seeds where either is NaN are left out."""
    if len(agent) != len(heuristic):
        raise ValueError(f"paired comparison needs as many agent as heuristic values, got {len(agent)} and {len(heuristic)}")
    differences = [a - h for a, h in zip(agent, heuristic) if not (math.isnan(a) or math.isnan(h))]
    mean, half_width, n = mean_ci(differences)
    return Comparison(metric, mean, half_width, n)
