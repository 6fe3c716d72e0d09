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

from simulator.request import BlockHashes, Request


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

    def of_request(self, request: Request) -> tuple[int, ...] | None:
        """The chained keys of ``request``'s full hash blocks (``None`` without block hashes): the
        hashes describe the prompt (then its last block may be partial and is left out) or, when
        there are more than the prompt's, the prompt and output together."""
        blocks = request.block_hashes
        if blocks is None:
            return None
        size = blocks.block_tokens
        prompt_blocks = -(-request.prompt_tokens // size)
        described = request.prompt_tokens if len(blocks.hashes) <= prompt_blocks else (
            request.prompt_tokens + request.output_tokens)
        return self.chain(blocks)[:described // size]
