"""Per-instance quantities the environments observe, kept in one numpy table (a row per instance
id) that the instances update incrementally where the quantities change: a request joining or
leaving a queue, KV blocks allocated or released, a lifecycle change. An observation then reads
them with one gather and a few vector operations instead of walking every instance's requests.

A cluster keeps them when built with ``track_arrays=True`` (the environments do); without them
the simulator does no extra work.
"""

from __future__ import annotations

from array import array

import numpy as np

from simulator.sequence import Sequence

# Columns of ``InstanceArrays.table`` (int64).
WAITING, RUNNING, SWAPPED = 0, 1, 2  # queue lengths
KV_USED_BLOCKS = 3  # KV blocks allocated now (``KVBlockManager.used_blocks``)
PENDING_PREFILL_TOKENS = 4  # Σ over waiting requests of the prompt (+ generated) tokens still to prefill
WAITING_PREFILL_BLOCKS = 5  # Σ over waiting requests of the blocks their prefill will allocate
SWAPPED_KV_BLOCKS = 6  # Σ over swapped requests of the blocks their KV fills in host memory
KV_TOTAL_BLOCKS, WATERMARK_BLOCKS, BLOCK_SIZE = 7, 8, 9  # fixed for an instance's life
LIFECYCLE, ROLE = 10, 11  # codes ``LIFECYCLE_CODES`` / ``ROLE_CODES``
WIDTH = 12  # columns of ``InstanceArrays.table``
LIFECYCLE_CODES = {"starting": 0, "serving": 1, "draining": 2, "stopped": 3}
ROLE_CODES = {"aggregated": 0, "prefill": 1, "decode": 2}


class InstanceArrays:
    """``table[i, column]`` for instance id i (the columns above) and ``tier_table[i, k]``, the
    instance's requests of tier k (waiting, running or swapped; ``tiers`` columns, grown when a
    request of a new tier arrives).

    Each table is a numpy view of a flat ``array.array`` buffer (``values`` / ``tier_values``,
    row-major): the simulator updates an entry through the buffer (``values[i * WIDTH +
    column]``) at the cost of a Python integer operation, and readers see it in the view."""

    def __init__(self, capacity: int = 16) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a positive integer, got {capacity!r}")
        self.rows = 0
        self.values, self.table = _buffer(capacity, WIDTH)
        self.tiers = 1
        self.tier_values, self.tier_table = _buffer(capacity, self.tiers)
        self.layout_version = 0
        """Increases whenever a row is added or a lifecycle changes: what is derived from the
        lifecycle and role columns alone (which instances take requests) stays valid until then."""

    def _grow(self, capacity: int, tiers: int) -> None:
        old_table, old_tiers = self.table, self.tier_table
        self.values, self.table = _buffer(capacity, WIDTH)
        self.table[: len(old_table)] = old_table
        self.tier_values, self.tier_table = _buffer(capacity, tiers)
        self.tier_table[: len(old_tiers), : self.tiers] = old_tiers
        self.tiers = tiers

    def add_row(self, instance_id: int, kv_total_blocks: int, watermark_blocks: int, block_size: int, role: str) -> None:
        """Start tracking a new instance (ids are dense: each new id is the next row)."""
        if instance_id != self.rows:
            raise ValueError(f"instance ids must be added in order: expected {self.rows}, got {instance_id}")
        if instance_id >= len(self.table):
            self._grow(2 * len(self.table), self.tiers)
        start = instance_id * WIDTH
        values = self.values
        values[start + KV_TOTAL_BLOCKS], values[start + WATERMARK_BLOCKS] = kv_total_blocks, watermark_blocks
        values[start + BLOCK_SIZE] = block_size
        values[start + LIFECYCLE], values[start + ROLE] = LIFECYCLE_CODES["serving"], ROLE_CODES[role]
        self.rows += 1
        self.layout_version += 1

    def set_lifecycle(self, row: int, state: str) -> None:
        """Instance ``row`` is now in lifecycle ``state`` (a key of ``LIFECYCLE_CODES``)."""
        self.values[row * WIDTH + LIFECYCLE] = LIFECYCLE_CODES[state]
        self.layout_version += 1

    def _queue(self, row: int, seq: Sequence, queue: int, sign: int) -> None:
        values, start = self.values, row * WIDTH
        values[start + queue] += sign
        if queue == WAITING:
            target = seq.prompt_tokens + seq.generated_tokens
            values[start + PENDING_PREFILL_TOKENS] += sign * (target - seq.kv_tokens)
            values[start + WAITING_PREFILL_BLOCKS] += sign * -(-target // values[start + BLOCK_SIZE])
        elif queue == SWAPPED:
            values[start + SWAPPED_KV_BLOCKS] += sign * -(-seq.kv_tokens // values[start + BLOCK_SIZE])

    def add(self, row: int, seq: Sequence, queue: int) -> None:
        """``seq`` entered ``queue`` on instance ``row`` (from another queue there, or with ``join``)."""
        self._queue(row, seq, queue, 1)

    def remove(self, row: int, seq: Sequence, queue: int) -> None:
        """``seq`` left ``queue`` on instance ``row``; its tokens are what they were when it entered."""
        self._queue(row, seq, queue, -1)

    def join(self, row: int, seq: Sequence, queue: int) -> None:
        """``seq`` came to instance ``row`` from outside, into ``queue``."""
        if seq.tier >= self.tiers:
            self._grow(len(self.table), seq.tier + 1)
        self.tier_values[row * self.tiers + seq.tier] += 1
        self._queue(row, seq, queue, 1)

    def leave(self, row: int, seq: Sequence, queue: int) -> None:
        """``seq`` left instance ``row`` from ``queue`` (completed, rejected or moved away)."""
        self.tier_values[row * self.tiers + seq.tier] -= 1
        self._queue(row, seq, queue, -1)


def _buffer(rows: int, width: int) -> tuple[array, np.ndarray]:
    """A zeroed int64 ``array.array`` of ``rows`` x ``width`` and its numpy view."""
    values = array("q", bytes(8 * rows * width))
    return values, np.frombuffer(values, dtype=np.int64).reshape(rows, width)
