"""Smooth weighted round-robin: the deterministic proportional picker behind Cauchy's
Goodput-Weighted Round Robin (Cauchy §3.4.1) and Mélange's slice routing.

Each pick adds every eligible item's weight to its credit, takes the item with the most
credit (lowest index on ties) and charges it the eligible weights' total (nginx's smooth
WRR). With all items eligible, over any run of picks each item's count stays within one of
``picks x weight / Σ weights``, and picks of one item are spread out rather than bunched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


class SmoothWeightedRoundRobin:
    """Picks indices 0..n-1 in proportion to ``weights`` (non-negative, some positive)."""

    def __init__(self, weights: Sequence[float]) -> None:
        values = [float(w) for w in weights]
        if not values:
            raise ValueError("weighted round-robin needs at least one weight")
        for index, w in enumerate(values):
            if not (math.isfinite(w) and w >= 0):
                raise ValueError(f"weight {index} must be finite and >= 0, got {weights[index]!r}")
        if not any(w > 0 for w in values):
            raise ValueError(f"weights must include a positive one, got {list(weights)}")
        self.weights = np.array(values)
        self.credit = np.zeros(len(values))

    def reset(self) -> None:
        self.credit[:] = 0.0

    def pick(self, eligible: np.ndarray | None = None) -> int:
        """The next index among ``eligible`` (booleans; all when None) with positive weight."""
        mask = self.weights > 0
        if eligible is not None:
            mask = mask & np.asarray(eligible, dtype=bool)
        if not mask.any():
            raise ValueError("no eligible item with a positive weight")
        self.credit[mask] += self.weights[mask]
        choice = int(np.flatnonzero(mask)[np.argmax(self.credit[mask])])
        self.credit[choice] -= self.weights[mask].sum()
        return choice
