"""``KVBlockManager``'s arguments: refused outside their bounds with the whole message naming the
value, taken at the bounds (one block of one token; no watermark or one just under the pool)."""

from __future__ import annotations

import pytest

from simulator.kv_blocks import KVBlockManager


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"block_size": 0}, "^block_size must be positive, got 0$"),
    ({"block_size": -16}, "^block_size must be positive, got -16$"),
    ({"total_blocks": 0}, "^the KV cache must hold at least one block, got 0 blocks$"),
    ({"watermark_fraction": 1.0}, r"^watermark_fraction must be in \[0, 1\), got 1.0$"),
    ({"watermark_fraction": -0.01}, r"^watermark_fraction must be in \[0, 1\), got -0.01$"),
])
def test_bad_arguments_are_refused_naming_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        KVBlockManager(**{"total_blocks": 10, "block_size": 16, **kwargs})


def test_the_bounds_themselves_are_taken():
    smallest = KVBlockManager(total_blocks=1, block_size=1, watermark_fraction=0.0)
    assert (smallest.total_blocks, smallest.block_size, smallest.watermark_blocks) == (1, 1, 0)
    assert smallest.can_admit(1)
    nearly_all = KVBlockManager(total_blocks=100, block_size=16, watermark_fraction=0.99)
    assert nearly_all.watermark_blocks == 99 and nearly_all.can_admit(1) and not nearly_all.can_admit(2)
