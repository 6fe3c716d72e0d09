// Automatic prefix caching on one instance's KV pool, with an optional host-memory tier
// (simulator/prefix_cache.py, ported line by line; its docstring has the rules and their
// sources: vLLM's automatic prefix caching, SGLang HiCache's and LMCache's host tier).
// A request's chained block keys (simulator.prefix_keys, interned in Python before the run)
// live in the RequestTable; the keys it references are always its first cached_count ones.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "kv_blocks.hpp"
#include "ordered_keys.hpp"
#include "request_table.hpp"
#include "sim_types.hpp"

namespace servegym_core {

// For a queued request: leading blocks cached on the GPU, blocks after them in the host tier,
// and GPU blocks among the first that no request holds now (PrefixCache.match).
struct PrefixMatch {
  std::int64_t gpu = 0;
  std::int64_t host = 0;
  std::int64_t unreferenced = 0;
};

class PrefixCache {
 public:
  // Registers itself as `kv`'s cache (allocations evict through it).
  PrefixCache(KVBlocks& kv, std::int64_t host_capacity_blocks);
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // r's hash blocks must be whole KV blocks here (throws std::invalid_argument naming both sizes).
  void check_block_tokens(const RequestTable& t, Req r) const;
  PrefixMatch match(const RequestTable& t, Req r) const;
  // Blocks admitting the queued r takes from the free pool (its full_blocks less the GPU hit,
  // plus the hit blocks no request holds now); `found` becomes its match.
  std::int64_t admission_need(const RequestTable& t, Req r, std::int64_t full_blocks, PrefixMatch& found) const;
  // Admit the queued r with its match: reference the GPU hit, take the rest of its full_blocks
  // from the pool, load the host hit into it; its kv_tokens become the tokens found. Returns the
  // tokens loaded from the host tier.
  std::int64_t acquire(RequestTable& t, Req r, std::int64_t full_blocks, const PrefixMatch& found);
  // Make r's full computed blocks with keys entries it references (a key cached meanwhile by
  // another request: share that entry, give up this copy).
  void register_computed(RequestTable& t, Req r);
  // r gives up its GPU blocks: its full blocks with keys stay cached (its last first in
  // eviction order), the others are released.
  void free(RequestTable& t, Req r);
  // Drop unreferenced entries, first in eviction order, until `blocks` blocks are free of cache
  // (into the host tier when there is one).
  void evict(std::int64_t blocks);

  const std::int64_t host_capacity_blocks;
  std::int64_t host_blocks = 0;
  std::int64_t entry_blocks = 0;  // GPU blocks holding cached prefixes now, referenced or not
  std::int64_t query_tokens = 0;
  std::int64_t hit_tokens = 0;
  std::int64_t host_hit_tokens = 0;
  std::int64_t evicted_blocks = 0;
  std::int64_t host_dropped_blocks = 0;

 private:
  struct Entry {
    std::int64_t references;
    std::int64_t blocks;
  };
  void store_on_host(std::int64_t key, std::int64_t blocks);

  KVBlocks& kv_;
  std::unordered_map<std::int64_t, Entry> entries_;
  OrderedKeys evictable_;  // the unreferenced entries, first out first (values unused)
  OrderedKeys host_;       // the host tier: key -> blocks, first out first
};

}  // namespace servegym_core
