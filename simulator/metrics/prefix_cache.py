"""Prefix-cache metrics of a run, per instance and over the cluster, from the instances' counters
(``simulator.prefix_cache.PrefixCache``; vLLM reports the same as ``prefix_cache_queries`` and
``prefix_cache_hits``, in tokens).

- ``query_tokens``: prefill targets of every admission from a queue; ``hit_tokens``: those found
  cached on the GPU; ``host_hit_tokens``: those loaded from the host tier; ``miss_tokens`` the
  rest, computed;
- ``hit_rate`` = (hit + host hit) / query, NaN without a query; ``gpu_hit_rate`` = hit / query;
- ``cached_blocks``: GPU blocks holding cached prefixes at the end (held by requests or not);
  ``evicted_blocks``: blocks evicted from the GPU over the run.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from simulator.metrics.stats import ratio

PREFIX = "prefix_cache_"
INSTANCE_PREFIX = "prefix_"
COUNTERS = ("query_tokens", "hit_tokens", "host_hit_tokens", "miss_tokens", "cached_blocks", "evicted_blocks")
PREFIX_CACHE_METRICS = tuple(PREFIX + name for name in ("hit_rate", "gpu_hit_rate", *COUNTERS))
INSTANCE_SUFFIX = "_i"
"""Per-instance names are ``prefix_<metric>_i<id>``: short enough for SB3's text log (36 characters
with ``serving/``), which cuts longer keys and would merge the instances'."""


def instance_cache_counts(cache: Any) -> dict[str, float]:
    """The counters and rates of one ``PrefixCache``."""
    query, hit, host = cache.query_tokens, cache.hit_tokens, cache.host_hit_tokens
    return {
        "hit_rate": ratio(hit + host, query),
        "gpu_hit_rate": ratio(hit, query),
        "query_tokens": float(query),
        "hit_tokens": float(hit),
        "host_hit_tokens": float(host),
        "miss_tokens": float(query - hit - host),
        "cached_blocks": float(cache.entry_blocks),
        "evicted_blocks": float(cache.evicted_blocks),
    }


def prefix_cache_metrics(instances: Iterable[Any]) -> dict[str, float]:
    """``prefix_cache_<metric>`` over every instance with a prefix cache, and
    ``prefix_<metric>_i<id>`` for each of them; empty when none has one."""
    totals = dict.fromkeys(COUNTERS, 0.0)
    per_instance: dict[str, float] = {}
    found = False
    for instance in instances:
        cache = instance.prefix_cache
        if cache is None:
            continue
        found = True
        counts = instance_cache_counts(cache)
        for name in COUNTERS:
            totals[name] += counts[name]
        for name, value in counts.items():
            per_instance[f"{INSTANCE_PREFIX}{name}{INSTANCE_SUFFIX}{instance.instance_id}"] = value
    if not found:
        return {}
    hits = totals["hit_tokens"] + totals["host_hit_tokens"]
    metrics = {PREFIX + "hit_rate": ratio(hits, totals["query_tokens"]),
               PREFIX + "gpu_hit_rate": ratio(totals["hit_tokens"], totals["query_tokens"])}
    metrics |= {PREFIX + name: value for name, value in totals.items()}
    return metrics | per_instance
