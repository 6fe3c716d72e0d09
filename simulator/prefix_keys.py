"""Chained block keys: what identifies a full KV block for prefix caching.

vLLM's automatic prefix caching names a full block by a hash of its parent block's hash and its
own tokens, so equal keys mean equal prefixes up to the end of the block. Here a request's blocks
are given by content hashes (``simulator.request.BlockHashes``); ``PrefixKeys`` chains them
exactly: the key of block i is a dense integer interned for (key of block i - 1, hash i), the
first block's parent being a root per block size. Interning instead of hashing makes equal keys
*mean* equal prefixes (no collision, however many blocks), and a cluster's table lives as long
as the cluster (one episode).
"""

from __future__ import annotations

from simulator.request import BlockHashes


class PrefixKeys:
    """Interned chained keys, shared by every instance of one cluster (a key means the same
    prefix everywhere, so a router can compare instances)."""

    __slots__ = ("_ids",)

    def __init__(self) -> None:
        self._ids: dict[tuple[int, int], int] = {}

    def __len__(self) -> int:
        """Distinct prefixes seen so far."""
        return len(self._ids)

    def chain(self, blocks: BlockHashes) -> tuple[int, ...]:
        """The chained key of every block of ``blocks``, in order (keys are >= 0; the root of
        ``block_tokens``-token blocks is ``-block_tokens``, so block sizes never share a key)."""
        ids = self._ids
        parent = -blocks.block_tokens
        keys = []
        for value in blocks.hashes:
            pair = (parent, value)
            key = ids.get(pair)
            if key is None:
                key = ids[pair] = len(ids)
            keys.append(key)
            parent = key
        return tuple(keys)
