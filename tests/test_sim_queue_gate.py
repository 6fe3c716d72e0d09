"""CascadeServe's minimum queue length (``simulator.queue_gate``) on its own: when it holds a
queue back, when it wakes the instance, and which waits it counts."""

from __future__ import annotations

import pytest

from simulator.events import EventQueue
from simulator.queue_gate import QueueGate
from simulator.request import Request
from simulator.sequence import Sequence


def waiting(*ids: int) -> list[Sequence]:
    return [Sequence(Request(i, 0.0, 10, 1), record_token_curve=False) for i in ids]


def test_gate_holds_a_short_queue_until_the_oldest_has_waited_then_wakes_once():
    events = EventQueue()
    woke: list[float] = []
    gate = QueueGate(events, lambda: woke.append(events.now_s))
    queue = waiting(0, 1)
    assert not gate.holds(queue, 0.0)  # off by default
    assert gate.set(3, 0.5, queue)  # both count from now, 0 s
    assert gate.holds(queue, 0.1) and gate.holds(queue, 0.2) and len(events) == 1  # one wake-up at 0.5 s
    assert not gate.holds(queue + waiting(2), 0.2)  # three wait
    events.pop_and_run()
    assert woke == [0.5] and not gate.holds(queue, 0.5)
    assert not gate.set(3, 0.5, queue) and gate.set(1, 0.5, queue) and not gate.holds(queue, 0.0)


def test_waits_count_from_entering_the_queue():
    events = EventQueue()
    gate = QueueGate(events, lambda: None)
    first, second = waiting(0, 1)
    gate.set(4, 1.0, [first])  # first counts from 0 s
    gate.enter(second, 0.5)
    gate.leave(first)
    assert gate.holds([second], 1.4) and not gate.holds([second], 1.5)
    assert events.peek_time_s() == 1.5


@pytest.mark.parametrize("length, max_wait_s", [(0, 1.0), (True, 1.0), (2.0, 1.0), (2, -0.1), (2, float("inf"))])
def test_bad_settings_are_refused(length, max_wait_s):
    with pytest.raises(ValueError):
        QueueGate(EventQueue(), lambda: None).set(length, max_wait_s, [])
