"""Automatic prefix caching on one instance's KV pool, with an optional host-memory tier.

As vLLM's automatic prefix caching (``vllm/v1/core/kv_cache_manager.py``, ``block_pool.py``):

- a full block of a request's prompt (or of its output, when its ``block_hashes`` go on over
  the output) is an *entry* named by its chained key (``simulator.prefix_keys``); requests
  share an entry by reference count;
- a request admitted from the queue takes the longest run of its leading keys that are cached,
  at most ``prefill target - 1`` tokens (vLLM always computes the last token for its logits),
  so its prefill computes only the rest. Its ``kv_tokens`` start at the hit, which the
  latency model reads as the context before the first chunk: attention still covers the whole
  context (``SegmentPlanner.mixed_iteration_s``);
- a request's blocks become entries when an iteration has computed them (vLLM V1 names them
  when it schedules them; here at the end of the iteration that fills them), and the blocks of
  its output at the end, when it frees them. A block computed while the same key is cached
  (two requests prefilled the same prefix at once) is given up for the cached one;
- blocks freed by a request (completed, preempted by recompute or swap, or moved away) stay
  cached with no reference; they count as free KV memory, and an allocation that needs them
  evicts whole entries, least recently freed first, a request's last block before its first
  (vLLM V1 appends a freed request's blocks to its free queue in reverse order). Blocks never
  cached are used before cached ones are evicted (vLLM V0's evictor; V1 takes the free queue's
  head, cached or not);
- a second tier (``host_capacity_blocks`` > 0) keeps evicted entries in host memory, least
  recently evicted dropped first (SGLang HiCache's write-back policy, LMCache's CPU offload):
  a request whose GPU match ends where the host tier continues it loads those blocks over the
  host link (the instance charges the transfer to its next iteration, as a swap-in) instead of
  recomputing them. Writing an evicted block to host memory is asynchronous and not charged.

Counters (vLLM's ``PrefixCacheStats``): ``query_tokens`` are the prefill targets of every
admission from the queue (a request re-admitted after recompute counts again), ``hit_tokens``
those found on the GPU and ``host_hit_tokens`` those loaded from the host tier.

Hits are at the granularity of the request's hash blocks (512 tokens for Mooncake's traces), a
whole number of the instance's KV blocks; a request whose hash blocks are not is refused by the
instance (``check_block_tokens``).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulator.kv_blocks import KVBlockManager
    from simulator.sequence import Sequence


class PrefixCache:
    """The cached prefixes of one instance: ``entries[key] = [references, blocks]``;
    ``evictable`` holds the unreferenced ones in eviction order (first out first); ``host`` the
    host tier's entries (key -> blocks, first out first)."""

    __slots__ = ("kv", "entries", "evictable", "host", "host_capacity_blocks", "host_blocks", "entry_blocks",
                 "query_tokens", "hit_tokens", "host_hit_tokens", "evicted_blocks", "host_dropped_blocks")

    def __init__(self, kv: KVBlockManager, host_capacity_blocks: int = 0) -> None:
        if isinstance(host_capacity_blocks, bool) or not isinstance(host_capacity_blocks, int) or host_capacity_blocks < 0:
            raise ValueError(f"host_capacity_blocks must be an integer >= 0, got {host_capacity_blocks!r}")
        self.kv = kv
        self.entries: dict[int, list[int]] = {}
        self.evictable: OrderedDict[int, None] = OrderedDict()
        self.host: OrderedDict[int, int] = OrderedDict()
        self.host_capacity_blocks = host_capacity_blocks
        self.host_blocks = 0
        self.entry_blocks = 0
        """GPU blocks holding cached prefixes now, referenced or not."""
        self.query_tokens = 0
        self.hit_tokens = 0
        self.host_hit_tokens = 0
        self.evicted_blocks = 0
        self.host_dropped_blocks = 0
        kv.cache = self

    # ----------------------------------------------------------------- queries
    def check_block_tokens(self, seq: Sequence) -> None:
        """``seq``'s hash blocks must be whole KV blocks here (raises naming both sizes)."""
        if seq.block_tokens % self.kv.block_size:
            raise ValueError(f"request {seq.request_id} has {seq.block_tokens}-token hash blocks, not a multiple of "
                             f"the instance's {self.kv.block_size}-token KV blocks")

    def match(self, seq: Sequence) -> tuple[int, int, int]:
        """For a queued ``seq`` (no KV yet): (leading blocks cached on the GPU, blocks after them
        in the host tier, GPU blocks among the first that no request holds now). Changes nothing."""
        keys = seq.block_keys
        if keys is None:
            return 0, 0, 0
        limit = (seq.prefill_target_tokens - 1) // seq.block_tokens
        if limit > len(keys):
            limit = len(keys)
        entries = self.entries
        gpu = unreferenced = 0
        while gpu < limit:
            entry = entries.get(keys[gpu])
            if entry is None:
                break
            if not entry[0]:
                unreferenced += entry[1]
            gpu += 1
        host = 0
        if self.host:
            stored = self.host
            while gpu + host < limit and keys[gpu + host] in stored:
                host += 1
        return gpu, host, unreferenced

    def admission_need(self, seq: Sequence, full_blocks: int) -> tuple[int, tuple[int, int, int]]:
        """Blocks that admitting the queued ``seq`` takes from the free pool (its
        ``full_blocks`` less the GPU hit, plus the hit blocks no request holds now), and its
        ``match``."""
        found = self.match(seq)
        gpu, _, unreferenced = found
        if not gpu:
            return full_blocks, found
        return full_blocks - gpu * (seq.block_tokens // self.kv.block_size) + unreferenced, found

    # ----------------------------------------------------------------- admission
    def acquire(self, seq: Sequence, full_blocks: int, found: tuple[int, int, int]) -> int:
        """Admit the queued ``seq`` with its ``match`` (``found``): reference the GPU hit, take the
        rest of its ``full_blocks`` from the pool, load the host hit into it; its ``kv_tokens``
        become the tokens found. Returns the tokens loaded from the host tier."""
        kv, entries, evictable = self.kv, self.entries, self.evictable
        gpu, host, _ = found
        self.query_tokens += seq.prefill_target_tokens
        if not gpu and not host:
            kv.allocate(full_blocks)
            seq.blocks = full_blocks
            return 0
        keys = seq.block_keys
        assert keys is not None
        unit = seq.block_tokens // kv.block_size
        held: list[int] = []
        for key in keys[:gpu]:
            entry = entries[key]
            if not entry[0]:
                del evictable[key]
                kv.pin(entry[1])
            entry[0] += 1
            held.append(key)
        for key in keys[gpu:gpu + host]:  # claimed before the allocation below may evict into the host tier
            self.host_blocks -= self.host.pop(key)
        kv.allocate(full_blocks - gpu * unit)
        for key in keys[gpu:gpu + host]:
            entries[key] = [1, unit]
            held.append(key)
        self.entry_blocks += host * unit
        seq.cached_keys = held
        seq.blocks = full_blocks
        seq.kv_tokens = (gpu + host) * seq.block_tokens
        self.hit_tokens += gpu * seq.block_tokens
        loaded = host * seq.block_tokens
        self.host_hit_tokens += loaded
        return loaded

    # ----------------------------------------------------------------- computed blocks
    def register(self, seq: Sequence) -> None:
        """Make ``seq``'s full computed blocks with keys entries it references (a key cached
        meanwhile by another request: share that entry, give up this copy)."""
        keys = seq.block_keys
        if keys is None:
            return
        done = seq.kv_tokens // seq.block_tokens
        if done > len(keys):
            done = len(keys)
        held = seq.cached_keys
        if len(held) >= done:
            return
        if not held:
            held = seq.cached_keys = []
        kv, entries, evictable = self.kv, self.entries, self.evictable
        unit = seq.block_tokens // kv.block_size
        for key in keys[len(held):done]:
            entry = entries.get(key)
            if entry is None:
                if key in self.host:
                    self.host_blocks -= self.host.pop(key)
                entries[key] = [1, unit]
                self.entry_blocks += unit
            else:
                if not entry[0]:
                    del evictable[key]
                    kv.pin(entry[1])
                entry[0] += 1
                kv.release(unit)
            held.append(key)

    def free(self, seq: Sequence) -> None:
        """``seq`` gives up its GPU blocks: its full blocks with keys stay cached (its last first
        in eviction order), the others are released."""
        if seq.block_keys is not None and seq.blocks:
            self.register(seq)
        held = seq.cached_keys
        kv = self.kv
        if not held:
            kv.release(seq.blocks)
            seq.blocks = 0
            return
        entries, evictable = self.entries, self.evictable
        kv.release(seq.blocks - len(held) * (seq.block_tokens // kv.block_size))
        for key in reversed(held):
            entry = entries[key]
            entry[0] -= 1
            if not entry[0]:
                evictable[key] = None
                kv.unpin(entry[1])
        seq.cached_keys = ()
        seq.blocks = 0

    # ----------------------------------------------------------------- eviction
    def evict(self, blocks: int) -> None:
        """Drop unreferenced entries, first in eviction order, until ``blocks`` blocks are free
        of cache (into the host tier when there is one)."""
        entries, evictable = self.entries, self.evictable
        freed = 0
        while freed < blocks:
            key, _ = evictable.popitem(last=False)
            size = entries.pop(key)[1]
            freed += size
            if self.host_capacity_blocks >= size:
                self._store_on_host(key, size)
        self.kv.cached_blocks -= freed
        self.entry_blocks -= freed
        self.evicted_blocks += freed

    def _store_on_host(self, key: int, blocks: int) -> None:
        host = self.host
        host[key] = blocks
        self.host_blocks += blocks
        while self.host_blocks > self.host_capacity_blocks:
            _, dropped = host.popitem(last=False)
            self.host_blocks -= dropped
            self.host_dropped_blocks += dropped
