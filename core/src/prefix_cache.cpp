#include "prefix_cache.hpp"

#include <stdexcept>
#include <string>

namespace servegym_core {

PrefixCache::PrefixCache(KVBlocks& kv, std::int64_t host_capacity_blocks_)
    : host_capacity_blocks(host_capacity_blocks_), kv_(kv) {
  if (host_capacity_blocks < 0) {
    throw std::invalid_argument("host_capacity_blocks must be an integer >= 0, got " +
                                std::to_string(host_capacity_blocks));
  }
  kv.cache = this;
}

void PrefixCache::check_block_tokens(const RequestTable& t, Req r) const {
  if (t.block_tokens[r] % kv_.block_size) {
    throw std::invalid_argument("request " + std::to_string(t.request_id[r]) + " has " +
                                std::to_string(t.block_tokens[r]) +
                                "-token hash blocks, not a multiple of the instance's " +
                                std::to_string(kv_.block_size) + "-token KV blocks");
  }
}

PrefixMatch PrefixCache::match(const RequestTable& t, Req r) const {
  PrefixMatch found;
  if (!t.has_block_keys(r)) return found;
  const std::int64_t* keys = t.keys_of(r);
  std::int64_t limit = (t.prefill_target_tokens(r) - 1) / t.block_tokens[r];
  if (limit > t.key_count[r]) limit = t.key_count[r];
  while (found.gpu < limit) {
    const auto it = entries_.find(keys[found.gpu]);
    if (it == entries_.end()) break;
    if (!it->second.references) found.unreferenced += it->second.blocks;
    ++found.gpu;
  }
  if (!host_.empty()) {
    while (found.gpu + found.host < limit && host_.find(keys[found.gpu + found.host]) != nullptr) ++found.host;
  }
  return found;
}

std::int64_t PrefixCache::admission_need(const RequestTable& t, Req r, std::int64_t full_blocks,
                                         PrefixMatch& found) const {
  found = match(t, r);
  if (!found.gpu) return full_blocks;
  return full_blocks - found.gpu * (t.block_tokens[r] / kv_.block_size) + found.unreferenced;
}

std::int64_t PrefixCache::acquire(RequestTable& t, Req r, std::int64_t full_blocks, const PrefixMatch& found) {
  query_tokens += t.prefill_target_tokens(r);
  if (!found.gpu && !found.host) {
    kv_.allocate(full_blocks);
    t.blocks[r] = full_blocks;
    return 0;
  }
  const std::int64_t* keys = t.keys_of(r);
  const std::int64_t unit = t.block_tokens[r] / kv_.block_size;
  for (std::int64_t i = 0; i < found.gpu; ++i) {
    Entry& entry = entries_.at(keys[i]);
    if (!entry.references) {
      evictable_.erase(keys[i]);
      kv_.pin(entry.blocks);
    }
    ++entry.references;
  }
  // Claimed before the allocation below may evict into the host tier.
  for (std::int64_t i = found.gpu; i < found.gpu + found.host; ++i) host_blocks -= host_.erase(keys[i]);
  kv_.allocate(full_blocks - found.gpu * unit);
  for (std::int64_t i = found.gpu; i < found.gpu + found.host; ++i) entries_.emplace(keys[i], Entry{1, unit});
  entry_blocks += found.host * unit;
  t.cached_count[r] = static_cast<std::int32_t>(found.gpu + found.host);
  t.blocks[r] = full_blocks;
  t.kv_tokens[r] = (found.gpu + found.host) * t.block_tokens[r];
  hit_tokens += found.gpu * t.block_tokens[r];
  const std::int64_t loaded = found.host * t.block_tokens[r];
  host_hit_tokens += loaded;
  return loaded;
}

void PrefixCache::register_computed(RequestTable& t, Req r) {
  if (!t.has_block_keys(r)) return;
  std::int64_t done = t.kv_tokens[r] / t.block_tokens[r];
  if (done > t.key_count[r]) done = t.key_count[r];
  std::int64_t held = t.cached_count[r];
  if (held >= done) return;
  const std::int64_t* keys = t.keys_of(r);
  const std::int64_t unit = t.block_tokens[r] / kv_.block_size;
  for (; held < done; ++held) {
    const std::int64_t key = keys[held];
    const auto it = entries_.find(key);
    if (it == entries_.end()) {
      if (const std::int64_t* stored = host_.find(key)) {
        host_blocks -= *stored;
        host_.erase(key);
      }
      entries_.emplace(key, Entry{1, unit});
      entry_blocks += unit;
    } else {
      Entry& entry = it->second;
      if (!entry.references) {
        evictable_.erase(key);
        kv_.pin(entry.blocks);
      }
      ++entry.references;
      kv_.release(unit);
    }
  }
  t.cached_count[r] = static_cast<std::int32_t>(held);
}

void PrefixCache::free(RequestTable& t, Req r) {
  if (t.has_block_keys(r) && t.blocks[r]) register_computed(t, r);
  const std::int64_t held = t.cached_count[r];
  if (!held) {
    kv_.release(t.blocks[r]);
    t.blocks[r] = 0;
    return;
  }
  kv_.release(t.blocks[r] - held * (t.block_tokens[r] / kv_.block_size));
  const std::int64_t* keys = t.keys_of(r);
  for (std::int64_t i = held - 1; i >= 0; --i) {
    Entry& entry = entries_.at(keys[i]);
    if (!--entry.references) {
      evictable_.push_back(keys[i], 0);
      kv_.unpin(entry.blocks);
    }
  }
  t.cached_count[r] = 0;
  t.blocks[r] = 0;
}

void PrefixCache::evict(std::int64_t blocks) {
  std::int64_t freed = 0;
  while (freed < blocks) {
    const std::int64_t key = evictable_.pop_front().first;
    const auto it = entries_.find(key);
    const std::int64_t size = it->second.blocks;
    entries_.erase(it);
    freed += size;
    if (host_capacity_blocks >= size) store_on_host(key, size);
  }
  kv_.cached_blocks -= freed;
  entry_blocks -= freed;
  evicted_blocks += freed;
}

void PrefixCache::store_on_host(std::int64_t key, std::int64_t blocks) {
  host_.push_back(key, blocks);
  host_blocks += blocks;
  while (host_blocks > host_capacity_blocks) {
    const std::int64_t dropped = host_.pop_front().second;
    host_blocks -= dropped;
    host_dropped_blocks += dropped;
  }
}

}  // namespace servegym_core
