"""The event queue: a binary heap ordered by (time, insertion order) so ties are deterministic."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any


class EventQueue:
    """Time-ordered callbacks. Events at the same time run in the order they were scheduled."""

    __slots__ = ("_heap", "_counter", "now_s")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[[Any], None], Any]] = []
        self._counter = 0
        self.now_s = 0.0

    def schedule(self, time_s: float, callback: Callable[[Any], None], arg: Any = None) -> None:
        if time_s < self.now_s:
            raise ValueError(f"cannot schedule an event at {time_s} s, before the clock ({self.now_s} s)")
        self._counter += 1
        heapq.heappush(self._heap, (time_s, self._counter, callback, arg))

    def __len__(self) -> int:
        return len(self._heap)

    def peek_time_s(self) -> float:
        return self._heap[0][0] if self._heap else float("inf")

    def pop_and_run(self) -> None:
        time_s, _, callback, arg = heapq.heappop(self._heap)
        self.now_s = time_s
        callback(arg)
