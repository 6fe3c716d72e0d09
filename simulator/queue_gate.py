"""CascadeServe's minimum queue length (CascadeServe §4.5): an instance starts no new
prefill batch until enough requests wait, so that its batches are large."""

from __future__ import annotations

from collections.abc import Callable

from simulator.events import EventQueue
from simulator.sequence import Sequence


def check_gate(length: int, max_wait_s: float) -> None:
    """A gate's settings: a positive integer length and a finite wait >= 0 (raises naming the bad one)."""
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ValueError(f"min queue length must be a positive integer, got {length!r}")
    if not (isinstance(max_wait_s, (int, float)) and 0.0 <= max_wait_s < float("inf")):
        raise ValueError(f"max_wait_s must be a finite number >= 0, got {max_wait_s!r}")


class QueueGate:
    """Holds an instance's waiting requests back from new prefill batches until ``min_length``
    of them wait or the oldest has waited ``max_wait_s`` seconds (our bound, so no request
    waits forever: the paper's planner simulator only flushes short queues when the trace
    ends, App. C.1). Waiting time counts from entering the instance's queue; running requests
    keep decoding meanwhile. ``min_length=1``, the default, turns the gate off.

    The instance tells the gate when a request enters (``enter``) or leaves (``leave``) its
    waiting queue and asks it at each batch (``holds``); the gate calls ``on_open`` when its
    deadline passes."""

    __slots__ = ("min_length", "max_wait_s", "_since", "_wake_s", "_events", "_on_open")

    def __init__(self, events: EventQueue, on_open: Callable[[], None]) -> None:
        self.min_length = 1
        self.max_wait_s = 0.0
        self._since: dict[int, float] = {}
        """With the gate on: when each waiting request entered the queue (by request id)."""
        self._wake_s = float("inf")
        self._events = events
        self._on_open = on_open

    def set(self, length: int, max_wait_s: float, waiting: list[Sequence]) -> bool:
        """Set the minimum queue length and the longest wait; requests already ``waiting`` count
        from now if they were not counted yet. Returns whether either value changed."""
        check_gate(length, max_wait_s)
        now = self._events.now_s
        self._since = {s.request_id: self._since.get(s.request_id, now) for s in waiting} if length > 1 else {}
        changed = (length, float(max_wait_s)) != (self.min_length, self.max_wait_s)
        self.min_length = length
        self.max_wait_s = float(max_wait_s)
        return changed

    def enter(self, seq: Sequence, now: float) -> None:
        """``seq`` joined the waiting queue at ``now``."""
        if self.min_length > 1:
            self._since[seq.request_id] = now

    def leave(self, seq: Sequence) -> None:
        """``seq`` left the waiting queue (admitted, or taken away)."""
        self._since.pop(seq.request_id, None)

    def holds(self, waiting: list[Sequence], now: float) -> bool:
        """Whether the gate holds the non-empty ``waiting`` queue back now; if so, it wakes the
        instance at its deadline."""
        if self.min_length == 1 or len(waiting) >= self.min_length:
            return False
        since = self._since
        deadline = min(since.get(s.request_id, now) for s in waiting) + self.max_wait_s
        if now >= deadline:
            return False
        if deadline != self._wake_s:
            self._wake_s = deadline
            self._events.schedule(deadline, self._on_deadline, deadline)
        return True

    def _on_deadline(self, deadline: float) -> None:
        if deadline == self._wake_s:
            self._wake_s = float("inf")
            self._on_open()
