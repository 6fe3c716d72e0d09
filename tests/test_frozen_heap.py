"""``agents.frozen_heap``: the objects alive before the block are out of the collector's reach
while it runs and back in reach after it (a process that trains again can free them)."""

from __future__ import annotations

import gc
import weakref

from agents.frozen_heap import frozen_heap


class Node:
    """A reference cycle: only the garbage collector can free it."""

    def __init__(self) -> None:
        self.me = self


def test_frozen_heap_spares_older_cycles_during_the_block_and_frees_them_after():
    older = Node()
    older_ref = weakref.ref(older)
    with frozen_heap():
        assert gc.get_freeze_count() > 0
        del older
        gc.collect()
        assert older_ref() is not None  # frozen: collections skip it
        newer_ref = weakref.ref(Node())
        gc.collect()
        assert newer_ref() is None  # created inside the block: collected as usual
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert older_ref() is None


def test_frozen_heap_unfreezes_when_the_block_raises():
    try:
        with frozen_heap():
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert gc.get_freeze_count() == 0
