// Paged KV-cache accounting of one instance, by counts (simulator/kv_blocks.py without a prefix
// cache): watermark_blocks must stay free after admitting a new request; growth may use them.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace servegym_core {

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

  void allocate(std::int64_t blocks) {
    const std::int64_t used = used_blocks + blocks;
    if (used > total_blocks) {
      throw std::runtime_error("KV over-allocation: " + std::to_string(blocks) + " blocks asked, " +
                               std::to_string(free_blocks()) + " free");
    }
    used_blocks = used;
  }

  void release(std::int64_t blocks) {
    if (blocks > used_blocks) {
      throw std::runtime_error("KV over-release: " + std::to_string(blocks) + " blocks released, " +
                               std::to_string(used_blocks) + " in use");
    }
    used_blocks -= blocks;
  }

  const std::int64_t total_blocks;
  const std::int64_t block_size;
  const std::int64_t watermark_blocks;
  std::int64_t used_blocks = 0;
};

}  // namespace servegym_core
