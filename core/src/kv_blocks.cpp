#include "kv_blocks.hpp"

#include "prefix_cache.hpp"

namespace servegym_core {

void KVBlocks::allocate(std::int64_t blocks) {
  const std::int64_t used = used_blocks + blocks;
  if (used > total_blocks) {
    throw std::runtime_error("KV over-allocation: " + std::to_string(blocks) + " blocks asked, " +
                             std::to_string(free_blocks()) + " free");
  }
  used_blocks = used;
  if (used + cached_blocks > total_blocks) {
    if (cache == nullptr) throw std::logic_error("KV: cached blocks without a prefix cache");
    cache->evict(used + cached_blocks - total_blocks);
  }
  publish();
}

}  // namespace servegym_core
