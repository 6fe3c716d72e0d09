"""Priority-tier distributions over K tiers, tier 0 the highest (Llumnix-K §4.2).

The paper defines them in words (§4.2):

* ``uniform``: probability 1/K per tier.
* ``gaussian``: weights centred at tier floor(K/2) with standard deviation K/4, i.e.
  w_k proportional to exp(-(k - floor(K/2))^2 / (2 (K/4)^2)), normalised.
* ``enterprise``: ~10% to tier 0 (critical), ~70% to the mid tiers, 5-20% to background
  tier K-1. With tier 0 at 10% and the mid tiers at 70%, the background share that sums to
  one is 20%, so: 0.10, then 0.70 split evenly over tiers 1..K-2, then 0.20. K = 2 has no mid
  tiers: 0.10 / 0.90. K = 1: everything in tier 0.

(The authors' public fork, andersvestrum/llumnix_sim ``priority_sampler.py``, hard-codes
other tables for some K, e.g. enterprise K=5 = [.10, .30, .50, .08, .02]; we follow the paper.)
"""

from __future__ import annotations

import numpy as np

from simulator.workloads._checks import count

PRIORITY_DISTRIBUTIONS = ("enterprise", "gaussian", "uniform")


def tier_probabilities(name: str, num_tiers: int) -> np.ndarray:
    """Probability of each tier 0..num_tiers-1 under distribution ``name``."""
    if name not in PRIORITY_DISTRIBUTIONS:
        raise ValueError(f"unknown priority distribution {name!r}; known: {list(PRIORITY_DISTRIBUTIONS)}")
    num_tiers = count("num_tiers", num_tiers, minimum=1)
    if name == "uniform" or num_tiers == 1:
        return np.full(num_tiers, 1.0 / num_tiers)
    if name == "gaussian":
        distance = np.arange(num_tiers) - num_tiers // 2
        weights = np.exp(-(distance**2) / (2 * (num_tiers / 4) ** 2))
        return weights / weights.sum()
    if num_tiers == 2:
        return np.array([0.10, 0.90])
    return np.concatenate([[0.10], np.full(num_tiers - 2, 0.70 / (num_tiers - 2)), [0.20]])


def sample_tiers(name: str, num_tiers: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` i.i.d. tiers (int64, 0 highest) from distribution ``name`` over ``num_tiers`` tiers."""
    cumulative = np.cumsum(tier_probabilities(name, num_tiers))
    tiers = np.searchsorted(cumulative, rng.random(count("n", n)) * cumulative[-1], side="right")
    return np.minimum(tiers, num_tiers - 1).astype(np.int64)
