"""An ended episode's request outcomes, as ``info["episode_outcomes"]`` carries them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from simulator.metrics.columns import LazyOutcomes
from simulator.outcome import RequestOutcome


class EpisodeOutcomes(tuple):
    """Every request's ``RequestOutcome`` of an ended episode, in completion order.

    Nothing writes these outcomes again: the episode's cluster is dropped at the next
    ``reset``. So a deep copy shares them instead of copying thousands of objects: SB3's
    ``DummyVecEnv`` deep-copies every step's infos, and copying the outcomes took 15 ms at each
    episode end on Tier-v0's default scenario (1,000 requests in about 92 steps)."""

    __slots__ = ()

    def __deepcopy__(self, memo: dict[int, Any]) -> EpisodeOutcomes:
        return self


def episode_outcomes(outcomes: Sequence[RequestOutcome]) -> Sequence[RequestOutcome]:
    """What ``info["episode_outcomes"]`` carries for a cluster's ``outcomes`` at an episode's end:
    ``LazyOutcomes`` as they are (a native vector env's; their objects built when first read),
    any other sequence as ``EpisodeOutcomes``. Both compare equal to the same outcomes and are
    shared, not copied, by a deep copy."""
    return outcomes if isinstance(outcomes, LazyOutcomes) else EpisodeOutcomes(outcomes)
