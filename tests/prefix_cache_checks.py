"""Accounting invariants of an instance's prefix cache (``simulator.prefix_cache``) and a
trace's reusable share by brute force, for tests."""

from __future__ import annotations

from collections import Counter

from simulator.instance import Instance
from simulator.sequence import Residency
from simulator.workloads.hash_traces import read_hash_trace


def accounting_errors(instance: Instance) -> list[str]:
    """What breaks the cache's accounting on ``instance`` now (empty: nothing):

    - only running sequences hold GPU blocks or cache references;
    - each entry's reference count is the number of running sequences that list its key;
    - used blocks = Σ own blocks of running sequences + blocks of referenced entries;
    - cached (free) blocks = blocks of unreferenced entries, exactly the evictable ones;
    - used + cached <= total; the host tier holds its stated blocks within capacity and no key
      that is also on the GPU.
    """
    kv, cache = instance.kv, instance.prefix_cache
    errors: list[str] = []
    if cache is None:
        return errors
    references: Counter[int] = Counter()
    own = 0
    for seq in instance.sequences():
        if seq.residency != Residency.RUNNING:
            if seq.blocks or seq.cached_keys:
                errors.append(f"request {seq.request_id} ({seq.residency.name}) holds {seq.blocks} blocks, "
                              f"{len(seq.cached_keys)} references")
            continue
        held = list(seq.cached_keys)
        if held and (seq.block_keys is None or list(seq.block_keys[:len(held)]) != held):
            errors.append(f"request {seq.request_id} references {held}, not a prefix of its keys")
        unit = seq.block_tokens // kv.block_size if seq.block_tokens else 0
        own += seq.blocks - len(held) * unit
        references.update(held)
    referenced_blocks = unreferenced_blocks = 0
    for key, (count, blocks) in cache.entries.items():
        if count != references[key]:
            errors.append(f"entry {key}: reference count {count}, referenced by {references[key]}")
        if count:
            referenced_blocks += blocks
            if key in cache.evictable:
                errors.append(f"entry {key} is referenced but evictable")
        else:
            unreferenced_blocks += blocks
            if key not in cache.evictable:
                errors.append(f"entry {key} is unreferenced but not evictable")
    if cache.entry_blocks != referenced_blocks + unreferenced_blocks:
        errors.append(f"entry_blocks {cache.entry_blocks} != {referenced_blocks + unreferenced_blocks} in the entries")
    if set(cache.evictable) - set(cache.entries):
        errors.append(f"evictable keys without an entry: {sorted(set(cache.evictable) - set(cache.entries))}")
    missing = set(references) - set(cache.entries)
    if missing:
        errors.append(f"references to keys not cached: {sorted(missing)}")
    if kv.used_blocks != own + referenced_blocks:
        errors.append(f"used {kv.used_blocks} blocks != own {own} + referenced {referenced_blocks}")
    if kv.cached_blocks != unreferenced_blocks:
        errors.append(f"cached {kv.cached_blocks} blocks != unreferenced entries' {unreferenced_blocks}")
    if kv.used_blocks + kv.cached_blocks > kv.total_blocks:
        errors.append(f"used {kv.used_blocks} + cached {kv.cached_blocks} > total {kv.total_blocks}")
    if cache.host_blocks != sum(cache.host.values()) or cache.host_blocks > cache.host_capacity_blocks:
        errors.append(f"host tier {cache.host_blocks} blocks, entries {sum(cache.host.values())}, "
                      f"capacity {cache.host_capacity_blocks}")
    both = set(cache.host) & set(cache.entries)
    if both:
        errors.append(f"keys on the GPU and the host at once: {sorted(both)}")
    return errors


def reusable_share_tokens(path, context_tokens: int) -> tuple[int, int]:
    """(prompt tokens that an unlimited cache finds, prompt tokens queried) over a Mooncake trace
    in arrival order, by brute force on the raw ids: a request's leading full blocks whose
    prefixes an earlier (admitted) request computed, at most prompt - 1 tokens."""
    trace = read_hash_trace(path)
    seen: set[tuple[int, ...]] = set()
    hits = queried = 0
    for prompt, ids in zip(trace.prompt_tokens.tolist(), trace.hashes):
        if prompt > context_tokens:
            continue
        full = prompt // 512
        prefixes = [tuple(ids[:i + 1]) for i in range(full)]
        found = 0
        while found < min(full, (prompt - 1) // 512) and prefixes[found] in seen:
            found += 1
        hits += found * 512
        queried += prompt
        seen.update(prefixes)
    return hits, queried
