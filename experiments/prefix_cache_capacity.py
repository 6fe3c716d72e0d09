"""Prefix-cache hit rate against cache capacity on Mooncake's traces, beside the Mooncake FAST'25
paper's Fig. 9.

The paper (§5.3.1) replays each trace's request sequence through one LRU cache of a given
capacity ("we consider only the sequence of requests and do not account for factors such as
prefill computation time or the replication of hotspots"). Here the same replay runs through the
simulator's own prefix cache (``simulator.prefix_cache``: chained block keys, LRU eviction of
unreferenced blocks, a request's last block evicted first): each request in arrival order takes
its cached prefix (full 512-token blocks, at most prompt − 1 tokens), computes the rest, is
freed, and the cache is cut back to ``capacity`` tokens. Hit rate = cached prompt tokens / all
prompt tokens.

``PAPER_FIG9`` holds the paper's curves, read from the vector paths of Fig. 9 in the paper's PDF
(``FAST25-release/Mooncake-FAST25.pdf`` in kvcache-ai/Mooncake): points at the polylines'
vertices, axes calibrated on the tick labels (hit rate to about ±0.005).

    python -m experiments.prefix_cache_capacity [--out docs/figures/prefix_cache_capacity]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from matplotlib.figure import Figure

from simulator.kv_blocks import KVBlockManager, blocks_for_tokens
from simulator.prefix_cache import PrefixCache
from simulator.prefix_keys import PrefixKeys
from simulator.sequence import Sequence
from simulator.workloads.hash_traces import MOONCAKE_BLOCK_TOKENS, load_hash_trace

CAPACITIES_TOKENS = (1e4, 1e5, 1e6, 2e6, 3e6, 4e6, 5e6, 8e6, 1e7, 5e7, 1e8, 1e9)
LOCAL_CACHE_TOKENS = 3e6  # the paper's dashed line: one node's DRAM (~1 TB) for LLaMA3-70B at 320 KB/token
PAPER_FIG9 = {  # capacity (tokens) -> hit rate, Mooncake FAST'25 Fig. 9
    "capacities": [1e4, 1e5, 1e6, 2e6, 4e6, 5e6, 8e6, 1e7, 5e7, 1e8, 5e8, 1e9],
    "conversation": [0.047, 0.075, 0.089, 0.122, 0.217, 0.249, 0.302, 0.328, 0.400, 0.403, 0.403, 0.403],
    "toolagent": [0.175, 0.365, 0.388, 0.415, 0.486, 0.507, 0.546, 0.563, 0.597, 0.597, 0.597, 0.597],
    "synthetic": [0.002, 0.014, 0.148, 0.236, 0.382, 0.437, 0.547, 0.591, 0.660, 0.660, 0.660, 0.660],
    "all": [0.097, 0.188, 0.229, 0.244, 0.276, 0.298, 0.354, 0.383, 0.532, 0.537, 0.538, 0.538],
}
PAPER_AT_LOCAL = {"conversation": 0.41, "toolagent": 0.75, "synthetic": 0.46, "all": 0.48}  # Fig. 9's labels: share of max at 3 M
TRACES = {"conversation": "mooncake_conversation", "synthetic": "mooncake_synthetic"}


def hit_rate(trace: str, capacity_tokens: float) -> float:
    """Cached prompt tokens / prompt tokens when ``trace``'s requests pass, one after another,
    through one prefix cache of ``capacity_tokens`` (whole 512-token blocks)."""
    requests = load_hash_trace(trace)
    capacity_blocks = int(capacity_tokens // MOONCAKE_BLOCK_TOKENS)
    largest = max(blocks_for_tokens(r.prompt_tokens, MOONCAKE_BLOCK_TOKENS) for r in requests)
    kv = KVBlockManager(capacity_blocks + largest, MOONCAKE_BLOCK_TOKENS, watermark_fraction=0.0)
    cache = PrefixCache(kv)
    keys = PrefixKeys()
    for request in requests:
        seq = Sequence(request, record_token_curve=False)
        blocks = request.block_hashes
        seq.block_keys = keys.chain(blocks)[:request.prompt_tokens // blocks.block_tokens]
        seq.block_tokens = blocks.block_tokens
        full = blocks_for_tokens(request.prompt_tokens, MOONCAKE_BLOCK_TOKENS)
        cache.acquire(seq, full, cache.match(seq))
        seq.kv_tokens = request.prompt_tokens
        cache.free(seq)
        if kv.cached_blocks > capacity_blocks:
            cache.evict(kv.cached_blocks - capacity_blocks)
    return cache.hit_tokens / cache.query_tokens


def measure() -> dict[str, list[float]]:
    return {name: [hit_rate(trace, capacity) for capacity in CAPACITIES_TOKENS] for name, trace in TRACES.items()}


def plot(ours: dict[str, list[float]], path: Path) -> None:
    figure = Figure(figsize=(6.4, 4.4), layout="constrained")
    axes = figure.add_subplot()
    for index, name in enumerate(("conversation", "toolagent", "synthetic")):
        color = f"C{index}"
        axes.plot(PAPER_FIG9["capacities"], PAPER_FIG9[name], "--", color=color, alpha=0.6,
                  label=f"{name}, Mooncake FAST'25 Fig. 9")
        if name in ours:
            axes.plot(CAPACITIES_TOKENS, ours[name], "o-", color=color, label=f"{name}, servegym")
    axes.axvline(LOCAL_CACHE_TOKENS, color="grey", linestyle=":", linewidth=1)
    axes.set_xscale("log")
    axes.set_xlabel("cache capacity (tokens)")
    axes.set_ylabel("prefix-cache hit rate (tokens)")
    axes.set_ylim(0, 0.7)
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    figure.savefig(path, dpi=130)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.prefix_cache_capacity", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/figures/prefix_cache_capacity", help="path without suffix (.png, .json)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ours = measure()
    plot(ours, out.with_suffix(".png"))
    out.with_suffix(".json").write_text(json.dumps({"capacities_tokens": CAPACITIES_TOKENS, "servegym": ours,
                                                    "paper_fig9": PAPER_FIG9}, indent=1) + "\n")
    print(f"{'capacity':>10} " + " ".join(f"{name:>14} {'paper':>6}" for name in TRACES))
    for position, capacity in enumerate(CAPACITIES_TOKENS):
        cells = []
        for name in TRACES:
            paper = dict(zip(PAPER_FIG9["capacities"], PAPER_FIG9[name])).get(capacity)
            cells.append(f"{ours[name][position]:>14.3f} {'' if paper is None else f'{paper:.3f}':>6}")
        print(f"{capacity:>10.0e} " + " ".join(cells))
    for name in TRACES:
        at_local = ours[name][CAPACITIES_TOKENS.index(LOCAL_CACHE_TOKENS)]
        print(f"{name}: at 3 M tokens {at_local:.3f} = {at_local / ours[name][-1]:.0%} of the maximum "
              f"{ours[name][-1]:.3f} (paper: {PAPER_AT_LOCAL[name]:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
