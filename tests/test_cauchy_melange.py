"""Mélange (Cauchy §4.2's baseline; ../shared/DESIGN.md): request-size buckets, the slice
ILP on a toy instance solved by hand, and its run-time router."""

from __future__ import annotations

import numpy as np
import pytest

from baselines.cauchy.melange import (
    EDGES_TOKENS,
    MIN_BUCKET_SHARE,
    BucketLengths,
    MelangePlan,
    bucket_of,
    bucket_shares,
    deploy_melange,
    nearest_bucket,
    solve_melange,
)
from baselines.cauchy.workloads import get_workload
from simulator.request import Request
from simulator.sequence import Sequence

A800, H20 = "A800-PCIe", "H20-NVL"  # 1.19 and 1.50 $/hour

# Bucket a at 6 req/s, bucket b at 2 req/s, two slices each (3 and 1 req/s).
RATES = {"a": 6.0, "b": 2.0}
GOODPUT = {H20: {"a": 4.0, "b": 2.0}, A800: {"a": 3.0, "b": 0.5}}
# A slice of a loads H20 by 3/4 = 0.75 or A800 by 3/3 = 1.0; a slice of b loads H20 by 0.5 or A800 by 2.0.
#   everything on H20: 2.5 -> 3 x 1.50 = 4.50
#   a on A800 (2.0 -> 2 A800), b on H20 (1.0 -> 1 H20): 2 x 1.19 + 1.50 = 3.88  <- optimum
#   one a slice each, b on H20: H20 1.75 -> 2, A800 1.0 -> 1: 3.00 + 1.19 = 4.19
#   everything on A800: 6.0 -> 6 x 1.19 = 7.14


def test_bucket_of_uses_the_length_edges():
    assert EDGES_TOKENS == (0, 256, 1024, 4096)
    assert bucket_of(1, 1) == "0,0"
    assert bucket_of(255, 256) == "0,1"
    assert bucket_of(1024, 4095) == "2,2"
    assert bucket_of(5000, 9000) == "3,3"


def test_melange_ilp_returns_the_hand_optimum():
    plan = solve_melange(RATES, GOODPUT, {A800: 8, H20: 8}, slices=2)
    assert plan.counts == {A800: 2, H20: 1}
    assert plan.fractions == {"a": {A800: 1.0}, "b": {H20: 1.0}}
    assert plan.cost_per_hour_usd == pytest.approx(3.88)


def test_melange_ilp_respects_the_inventory():
    # one A800 only: one slice of a there, the rest on H20 (1.75 -> 2 H20): 1.19 + 3.00
    plan = solve_melange(RATES, GOODPUT, {A800: 1, H20: 8}, slices=2)
    assert plan.counts == {A800: 1, H20: 2}
    assert plan.fractions == {"a": {A800: 0.5, H20: 0.5}, "b": {H20: 1.0}}
    assert plan.cost_per_hour_usd == pytest.approx(4.19)


def test_melange_ilp_errors():
    with pytest.raises(ValueError, match="cannot carry 8 req/s"):
        solve_melange(RATES, GOODPUT, {A800: 1, H20: 1}, slices=2)
    with pytest.raises(ValueError, match="no GPU type in .* serves bucket b"):
        solve_melange(RATES, {H20: {"a": 4.0, "b": 0.0}}, {H20: 8})
    with pytest.raises(ValueError, match="slices must be a positive integer, got 0"):
        solve_melange(RATES, GOODPUT, {H20: 8}, slices=0)
    with pytest.raises(ValueError, match="bucket a rate must be finite and >= 0, got -1.0"):
        solve_melange({"a": -1.0}, GOODPUT, {H20: 8})


def test_bucket_shares_sum_to_one_and_rare_buckets_merge():
    shares = bucket_shares(get_workload("cnn_dailymail"))
    assert sum(shares.values()) == pytest.approx(1.0)
    assert all(share >= MIN_BUCKET_SHARE for share in shares.values())
    # exponential prompts of mean 702: P(prompt < 256) = 1 - exp(-256/702) ~ 0.305
    below_256 = sum(s for k, s in shares.items() if k.startswith("0,"))
    assert below_256 == pytest.approx(1 - np.exp(-256 / 702), abs=0.01)
    assert nearest_bucket("3,3", {"0,0": 1, "2,2": 1, "3,0": 1}) == "2,2"


def test_bucket_lengths_stay_inside_their_bucket():
    prompts, outputs = BucketLengths(get_workload("longwriter"), "1,2").sample(500, np.random.default_rng(0))
    assert len(prompts) == 500
    assert np.all((prompts >= 256) & (prompts < 1024)) and np.all((outputs >= 1024) & (outputs < 4096))


def test_router_splits_a_bucket_by_the_plan_fractions():
    plan = MelangePlan({A800: 1, H20: 1}, {"0,0": {A800: 0.25, H20: 0.75}}, 2.69, 0.0)
    cluster = deploy_melange(plan, {A800: 1, H20: 1})
    route = cluster.router
    picks = [cluster.instances[route(cluster, Sequence(Request(i, 0.0, 10, 10), False))].gpu.name for i in range(400)]
    assert picks.count(A800) == 100 and picks.count(H20) == 300
    # a request of a bucket the plan does not know goes by its nearest planned bucket
    assert cluster.instances[route(cluster, Sequence(Request(9, 0.0, 5000, 5000), False))].gpu.name in (A800, H20)
