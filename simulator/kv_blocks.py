"""Paged KV-cache accounting (vLLM's block manager, by counts)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulator.instance_arrays import KV_USED_BLOCKS, WIDTH, InstanceArrays

if TYPE_CHECKING:
    from simulator.prefix_cache import PrefixCache
    from simulator.sequence import Sequence


def blocks_for_tokens(tokens: int, block_size: int) -> int:
    """Blocks needed to hold ``tokens`` KV entries: ceil(tokens / block_size)."""
    return -(-tokens // block_size)


class KVBlockManager:
    """Counts GPU KV blocks of one instance.

    ``watermark_blocks`` (vLLM: 1% of the blocks) must stay free after admitting a new
    request, so running requests can still grow; growth itself may use them.

    ``used_blocks`` are the blocks requests hold (a block shared through the prefix cache
    counts once). With a prefix cache (``cache``, ``simulator.prefix_cache``), ``cached_blocks``
    more hold the KV of finished prefixes that no request holds: they count as free, and an
    allocation that needs them evicts the least recently used (vLLM: cached blocks sit in the
    free pool until reused). Without one, ``cached_blocks`` stays 0.
    """

    __slots__ = ("total_blocks", "block_size", "watermark_blocks", "used_blocks", "cached_blocks", "cache",
                 "_arrays", "_index")

    def __init__(self, total_blocks: int, block_size: int, watermark_fraction: float = 0.01) -> None:
        if block_size <= 0:
            raise ValueError(f"block_size must be positive, got {block_size}")
        if total_blocks <= 0:
            raise ValueError(f"the KV cache must hold at least one block, got {total_blocks} blocks")
        if not 0.0 <= watermark_fraction < 1.0:
            raise ValueError(f"watermark_fraction must be in [0, 1), got {watermark_fraction}")
        self.total_blocks = total_blocks
        self.block_size = block_size
        self.watermark_blocks = int(watermark_fraction * total_blocks)
        self.used_blocks = 0
        self.cached_blocks = 0
        self.cache: PrefixCache | None = None
        self._arrays: InstanceArrays | None = None
        self._index = -1

    def track(self, arrays: InstanceArrays, row: int) -> None:
        """Keep ``arrays``' KV-used column of ``row`` equal to ``used_blocks`` from now on."""
        self._arrays, self._index = arrays, row * WIDTH + KV_USED_BLOCKS
        arrays.values[self._index] = self.used_blocks

    @property
    def free_blocks(self) -> int:
        return self.total_blocks - self.used_blocks

    @property
    def capacity_tokens(self) -> int:
        return self.total_blocks * self.block_size

    def can_admit(self, blocks: int) -> bool:
        return self.free_blocks - blocks >= self.watermark_blocks

    def allocate(self, blocks: int) -> None:
        """Take ``blocks`` free blocks, evicting cached prefixes (least recently used first) when
        the never-cached free blocks are too few."""
        used = self.used_blocks + blocks
        if used > self.total_blocks:
            raise RuntimeError(f"KV over-allocation: {blocks} blocks asked, {self.free_blocks} free")
        self.used_blocks = used
        if used + self.cached_blocks > self.total_blocks:
            assert self.cache is not None
            self.cache.evict(used + self.cached_blocks - self.total_blocks)
        if self._arrays is not None:
            self._arrays.values[self._index] = used

    def release(self, blocks: int) -> None:
        if blocks > self.used_blocks:
            raise RuntimeError(f"KV over-release: {blocks} blocks released, {self.used_blocks} in use")
        self.used_blocks -= blocks
        if self._arrays is not None:
            self._arrays.values[self._index] = self.used_blocks

    def free(self, seq: Sequence) -> None:
        """``seq`` gives up its GPU blocks (completed, preempted or moving away): with a prefix
        cache its full blocks stay cached (``PrefixCache.free``), else they are released."""
        if self.cache is None:
            self.release(seq.blocks)
            seq.blocks = 0
        else:
            self.cache.free(seq)

    def pin(self, blocks: int) -> None:
        """``blocks`` cached blocks that no request held are held again (a prefix-cache hit)."""
        self.cached_blocks -= blocks
        self.used_blocks += blocks
        if self._arrays is not None:
            self._arrays.values[self._index] = self.used_blocks

    def unpin(self, blocks: int) -> None:
        """``blocks`` held blocks stay cached but no request holds them any more."""
        self.used_blocks -= blocks
        self.cached_blocks += blocks
        if self._arrays is not None:
            self._arrays.values[self._index] = self.used_blocks
