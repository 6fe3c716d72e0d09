"""Paged KV-cache accounting (vLLM's block manager, by counts)."""

from __future__ import annotations

from simulator.instance_arrays import KV_USED_BLOCKS, WIDTH, InstanceArrays


def blocks_for_tokens(tokens: int, block_size: int) -> int:
    """Blocks needed to hold ``tokens`` KV entries: ceil(tokens / block_size)."""
    return -(-tokens // block_size)


class KVBlockManager:
    """Counts GPU KV blocks of one instance.

    ``watermark_blocks`` (vLLM: 1% of the blocks) must stay free after admitting a new
    request, so running requests can still grow; growth itself may use them.
    """

    __slots__ = ("total_blocks", "block_size", "watermark_blocks", "used_blocks", "_arrays", "_index")

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
        if blocks > self.free_blocks:
            raise RuntimeError(f"KV over-allocation: {blocks} blocks asked, {self.free_blocks} free")
        self.used_blocks += blocks
        if self._arrays is not None:
            self._arrays.values[self._index] = self.used_blocks

    def release(self, blocks: int) -> None:
        if blocks > self.used_blocks:
            raise RuntimeError(f"KV over-release: {blocks} blocks released, {self.used_blocks} in use")
        self.used_blocks -= blocks
        if self._arrays is not None:
            self._arrays.values[self._index] = self.used_blocks
