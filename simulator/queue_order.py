"""Queues kept in priority order as entries join them, instead of re-sorted at every batch.

An instance's ``waiting`` and ``swapped`` lists each keep how many of their leading entries
are in priority order (``LocalScheduler.priority_key``, whose value is fixed while a sequence
is queued); ``order_queue`` sorts only the entries added since into place, giving the list a
full stable sort would, so a batch costs O(new entries x log n) keys rather than O(n).
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def order_queue(queue: list[T], ordered: int, key: Callable[[T], Any]) -> None:
    """Put ``queue`` in the order ``queue.sort(key=key)`` gives, knowing its first ``ordered``
    entries already are: the rest are sorted and inserted by bisection (each after its equals,
    as the stable sort puts them), so a queue of n with k new entries costs O(k log n) keys."""
    if ordered >= len(queue):
        return
    if ordered == 0:
        queue.sort(key=key)
        return
    tail = queue[ordered:]
    del queue[ordered:]
    tail.sort(key=key)
    if not key(tail[0]) < key(queue[-1]):
        queue.extend(tail)
        return
    for item in tail:
        insort(queue, item, key=key)


def take_from_queue(queue: list[T], item: T, ordered: int) -> int:
    """Remove ``item`` from ``queue``; return how many leading entries stay in order."""
    index = queue.index(item)
    del queue[index]
    return ordered - 1 if index < ordered else ordered
