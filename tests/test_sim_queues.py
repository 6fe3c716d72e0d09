"""Queues ordered on insert (``simulator.queue_order``): the same order as a full stable
sort at every batch, so results stay bit-identical, at O(new entries x log n) priority keys
per batch instead of O(queue length)."""

from __future__ import annotations

import random
from dataclasses import astuple

import numpy as np
import pytest

import simulator.schedulers.base as scheduler_base
from simulator.cluster import Cluster
from simulator.instance import InstanceConfig
from simulator.queue_order import order_queue, take_from_queue
from simulator.schedulers import SCHEDULERS
from simulator.workloads import PoissonArrivals, generate_requests, length_sampler

GPU, MODEL = "A100-80GB", "Llama-3.1-8B"


class Item:
    def __init__(self, key: int, name: str) -> None:
        self.key, self.name = key, name


def _key(item: Item) -> tuple[int]:
    return (item.key,)


def test_order_sorts_the_new_tail_into_the_ordered_head_as_a_stable_sort_would():
    queue = [Item(1, "a"), Item(3, "b"), Item(5, "c"), Item(2, "d"), Item(3, "e"), Item(0, "f")]
    order_queue(queue, 3, _key)
    assert [item.name for item in queue] == ["f", "a", "d", "b", "e", "c"]  # "b" before its equal "e"
    appended = [Item(1, "a"), Item(2, "b"), Item(2, "c"), Item(4, "d")]
    order_queue(appended, 2, _key)  # new entries at or after the last ordered one are appended as they are
    assert [item.name for item in appended] == ["a", "b", "c", "d"]


def test_order_matches_list_sort_on_random_queues_with_ties():
    rng = random.Random(0)
    for _ in range(300):
        ordered = sorted((Item(rng.randrange(6), f"h{i}") for i in range(rng.randrange(8))), key=_key)
        queue = ordered + [Item(rng.randrange(6), f"t{i}") for i in range(rng.randrange(8))]
        expected = sorted(queue, key=_key)
        order_queue(queue, len(ordered), _key)
        assert [item.name for item in queue] == [item.name for item in expected]


def test_take_keeps_count_of_the_ordered_head():
    items = [Item(k, str(k)) for k in (1, 2, 3, 0)]
    queue = list(items)
    assert take_from_queue(queue, items[1], 3) == 2 and [i.name for i in queue] == ["1", "3", "0"]
    assert take_from_queue(queue, items[3], 2) == 2 and [i.name for i in queue] == ["1", "3"]


def _outcomes(scheduler: str, preemption: str | None, tiers: int) -> tuple[list[str], int]:
    """Every outcome's fields (as text, so NaN compares equal) and the preemptions in all."""
    rng = np.random.default_rng(1)
    requests = generate_requests(PoissonArrivals(12.0), length_sampler("sharegpt"), 500, rng,
                                 priorities="uniform" if tiers > 1 else None, num_tiers=tiers)
    cluster = Cluster({GPU: 1})
    cluster.deploy(InstanceConfig(gpu=GPU, model=MODEL, scheduler=scheduler, preemption=preemption, kv_blocks=2500),
                   ready_now=True)
    outcomes = cluster.run(requests)
    return [repr(astuple(outcome)) for outcome in outcomes], sum(outcome.num_preemptions for outcome in outcomes)


@pytest.mark.parametrize("scheduler, preemption, tiers", [
    ("fcfs", None, 1), ("fcfs", "swap", 1), ("priority", None, 3), ("sarathi", "swap", 1), ("rr", None, 1),
    ("pascal", "swap", 2),
])
def test_outcomes_equal_those_of_a_full_sort_at_every_batch(monkeypatch, scheduler, preemption, tiers):
    ordered, preemptions = _outcomes(scheduler, preemption, tiers)
    monkeypatch.setattr(scheduler_base, "order_queue", lambda queue, ordered, key: queue.sort(key=key))
    assert (ordered, preemptions) == _outcomes(scheduler, preemption, tiers)
    assert preemptions > 0  # preempted requests went back into the queues out of order


def test_priority_keys_per_request_stay_flat_under_overload(monkeypatch):
    calls = 0
    key = SCHEDULERS["fcfs"].priority_key

    def counted(self, seq):
        nonlocal calls
        calls += 1
        return key(self, seq)

    monkeypatch.setattr(SCHEDULERS["fcfs"], "priority_key", counted)
    per_request = []
    for count in (1000, 3000):
        calls = 0
        requests = generate_requests(PoissonArrivals(10.0), length_sampler("sharegpt"), count, np.random.default_rng(0))
        cluster = Cluster({GPU: 1})
        cluster.deploy(InstanceConfig(gpu=GPU, model=MODEL), ready_now=True)
        cluster.run(requests)
        per_request.append(calls / count)
    # 10 req/s is ~5x what one A100 serves: thousands wait, yet each request costs a few keys
    # (a re-sort per batch cost ~470 per request at 1,000 and ~2,000 at 4,000 requests)
    assert max(per_request) < 5
