"""``simulator.headroom``: Llumnix-K's per-tier headroom budgets (eq. 3) and F_full / F_normal
(eq. 1-4) by hand, their bounds taken, and every bad argument refused with its whole message."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulator.cluster import Cluster
from simulator.headroom import (
    HEADROOM_MAX_FRACTION,
    check_headroom_fractions,
    decay_rate,
    default_headroom_fractions,
    freeness_full,
    freeness_normal,
    tier_headroom_blocks,
)
from simulator.instance import InstanceConfig
from simulator.request import Request


def test_decay_rate_by_hand_and_its_refusals():
    """λ = 3 / (K − 1): 1.0 at K = 4 (the paper's Fig. 3), 3.0 at K = 2, none (0.0) at K = 1."""
    assert (decay_rate(1), decay_rate(2), decay_rate(4)) == (0.0, 3.0, 1.0)
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(ValueError, match=f"^num_tiers must be a positive integer, got {bad!r}$"):
            decay_rate(bad)


def test_default_fractions_by_hand_and_the_bounds_of_h_max():
    """h_p = h_max · e^(−λp); one tier has no budget; h_max may be 0 or 1, not more or NaN."""
    np.testing.assert_array_equal(default_headroom_fractions(1), [0.0])
    np.testing.assert_array_equal(default_headroom_fractions(2), [HEADROOM_MAX_FRACTION, HEADROOM_MAX_FRACTION * math.exp(-3.0)])
    np.testing.assert_array_equal(default_headroom_fractions(3, max_fraction=0.0), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(default_headroom_fractions(3, max_fraction=1.0), np.exp(-1.5 * np.arange(3)))
    for bad in (1.5, -0.1, math.nan):
        with pytest.raises(ValueError, match=rf"^max_fraction must be in \[0, 1\], got {bad!r}$"):
            default_headroom_fractions(2, max_fraction=bad)


def test_checked_fractions_are_floats_in_the_unit_interval():
    checked = check_headroom_fractions([0, 1])
    assert checked.dtype == np.float64 and checked.tolist() == [0.0, 1.0]
    for bad, message in (([[0.1]], r"^headroom fractions must be a non-empty 1-D array, got shape \(1, 1\)$"),
                         ([], r"^headroom fractions must be a non-empty 1-D array, got shape \(0,\)$"),
                         ([0.1, 1.5], r"^headroom fractions must be in \[0, 1\], got \[1.5\] in \[0.1, 1.5\]$"),
                         ([math.inf], r"^headroom fractions must be in \[0, 1\], got \[inf\] in \[inf\]$")):
        with pytest.raises(ValueError, match=message):
            check_headroom_fractions(bad)


def instance_with_tiers(tiers: list[int]):
    cluster = Cluster({"A100-80GB": 1}, router="round_robin")
    instance = cluster.instances[cluster.deploy(InstanceConfig(
        gpu="A100-80GB", model="Llama-3.1-8B", engine="vidur-2024", kv_blocks=100, block_size=16), ready_now=True)]
    cluster.submit([Request(i, 0.0, 64, 100, tier=tier) for i, tier in enumerate(tiers)])
    cluster.advance(until_s=0.05)
    return cluster, instance


def test_tier_budgets_and_freeness_by_hand():
    """Tiers 0 and 2 present on a 100-block instance: H = 100 · (h_0 + h_2), charged once per
    tier; F_full = (M − used − H) / B, F_normal without H; a tier beyond the fractions is
    refused naming it; a draining instance is −∞ either way."""
    cluster, instance = instance_with_tiers([0, 2, 2])
    fractions = [0.1, 0.2, 0.3]
    assert tier_headroom_blocks(instance, fractions) == 100 * (0.1 + 0.3)
    used, batch = instance.kv_used_blocks_now(), len(instance.running) + bool(instance.waiting or instance.swapped)
    assert batch == 3 and used > 0
    assert freeness_normal(instance) == (100 - used) / 3
    assert freeness_full(instance, fractions) == (100 - (used + 100 * (0.1 + 0.3))) / 3
    with pytest.raises(ValueError, match=r"^requests of tier\(s\) \[2\] on instance 0, but headroom fractions cover "
                                         r"tiers 0\.\.1$"):
        tier_headroom_blocks(instance, [0.1, 0.2])
    cluster.drain(0)
    assert freeness_full(instance, fractions) == freeness_normal(instance) == -math.inf
