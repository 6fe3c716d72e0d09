// Paged KV-cache accounting of one instance, by counts (simulator/kv_blocks.py):
// watermark_blocks must stay free after admitting a new request; growth may use them. With a
// prefix cache, cached_blocks more hold finished prefixes no request holds: they count as free,
// and an allocation that needs them evicts the least recently freed (PrefixCache::evict).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "instance_arrays.hpp"

namespace servegym_core {

class PrefixCache;

class KVBlocks {
 public:
  KVBlocks(std::int64_t total_blocks, std::int64_t block_size, std::int64_t watermark_blocks)
      : total_blocks(total_blocks), block_size(block_size), watermark_blocks(watermark_blocks) {
    if (block_size <= 0) throw std::invalid_argument("block_size must be positive, got " + std::to_string(block_size));
    if (total_blocks <= 0) {
      throw std::invalid_argument("the KV cache must hold at least one block, got " + std::to_string(total_blocks) +
                                  " blocks");
    }
  }

  std::int64_t free_blocks() const { return total_blocks - used_blocks; }
  bool can_admit(std::int64_t blocks) const { return free_blocks() - blocks >= watermark_blocks; }

  // Take `blocks` free blocks, evicting cached prefixes (least recently freed first) when the
  // never-cached free blocks are too few.
  void allocate(std::int64_t blocks);

  void release(std::int64_t blocks) {
    if (blocks > used_blocks) {
      throw std::runtime_error("KV over-release: " + std::to_string(blocks) + " blocks released, " +
                               std::to_string(used_blocks) + " in use");
    }
    used_blocks -= blocks;
    publish();
  }
  // `blocks` cached blocks that no request held are held again (a prefix-cache hit).
  void pin(std::int64_t blocks) {
    cached_blocks -= blocks;
    used_blocks += blocks;
    publish();
  }
  // `blocks` held blocks stay cached but no request holds them any more.
  void unpin(std::int64_t blocks) {
    used_blocks -= blocks;
    cached_blocks += blocks;
    publish();
  }
  // Keep `arrays`' KV-used column of `row` equal to used_blocks from now on.
  void track(InstanceArrays& arrays, std::int32_t row) {
    arrays_ = &arrays;
    row_ = row;
    publish();
  }

  const std::int64_t total_blocks;
  const std::int64_t block_size;
  const std::int64_t watermark_blocks;
  std::int64_t used_blocks = 0;
  std::int64_t cached_blocks = 0;
  PrefixCache* cache = nullptr;  // set by the PrefixCache that owns these blocks' cached prefixes

 private:
  void publish() {
    if (arrays_ != nullptr) arrays_->set(row_, kKvUsedBlocks, used_blocks);
  }
  InstanceArrays* arrays_ = nullptr;
  std::int32_t row_ = -1;
};

}  // namespace servegym_core
