"""The agent-vs-heuristic comparison over training seeds and evaluation seeds (probability of
improvement, Agarwal et al. NeurIPS 2021, with rliable); an episode's headline metrics are
``agents.headline``'s."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from agents.headline import better_when_higher
from agents.statistics import Interval, probability_of_improvement


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
