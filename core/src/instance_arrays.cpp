#include "instance_arrays.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace servegym_core {

void InstanceArrays::add_row(std::int32_t instance_id, std::int64_t kv_total_blocks, std::int64_t watermark_blocks,
                             std::int64_t block_size, std::int64_t role_code) {
  if (instance_id != rows) {
    throw std::invalid_argument("instance ids must be added in order: expected " + std::to_string(rows) + ", got " +
                                std::to_string(instance_id));
  }
  table.resize(table.size() + kArrayWidth, 0);
  tier_table.resize(tier_table.size() + static_cast<std::size_t>(tiers), 0);
  ++rows;
  set(instance_id, kKvTotalBlocks, kv_total_blocks);
  set(instance_id, kWatermarkBlocks, watermark_blocks);
  set(instance_id, kBlockSize, block_size);
  set(instance_id, kLifecycle, kLifecycleServing);
  set(instance_id, kRole, role_code);
  ++layout_version;  // the row (Python's add_row) and its lifecycle (Instance.track sets it again)
  ++layout_version;
}

void InstanceArrays::update(std::int32_t row, const RequestTable& t, Req r, std::int32_t queue, std::int64_t sign) {
  table[index(row, queue)] += sign;
  if (queue == kWaiting) {
    const std::int64_t target = t.prefill_target_tokens(r);
    table[index(row, kPendingPrefillTokens)] += sign * (target - t.kv_tokens[r]);
    table[index(row, kWaitingPrefillBlocks)] += sign * ceil_div(target, get(row, kBlockSize));
  } else if (queue == kSwapped) {
    table[index(row, kSwappedKvBlocks)] += sign * ceil_div(t.kv_tokens[r], get(row, kBlockSize));
  }
}

void InstanceArrays::join(std::int32_t row, const RequestTable& t, Req r, std::int32_t queue) {
  if (t.tier[r] >= tiers) grow_tiers(t.tier[r] + 1);
  ++tier_table[static_cast<std::size_t>(row * tiers + t.tier[r])];
  update(row, t, r, queue, 1);
}

void InstanceArrays::leave(std::int32_t row, const RequestTable& t, Req r, std::int32_t queue) {
  --tier_table[static_cast<std::size_t>(row * tiers + t.tier[r])];
  update(row, t, r, queue, -1);
}

void InstanceArrays::grow_tiers(std::int64_t wider) {
  std::vector<std::int64_t> grown(static_cast<std::size_t>(rows * wider), 0);
  for (std::int64_t row = 0; row < rows; ++row) {
    for (std::int64_t k = 0; k < tiers; ++k) {
      grown[static_cast<std::size_t>(row * wider + k)] = tier_table[static_cast<std::size_t>(row * tiers + k)];
    }
  }
  tier_table = std::move(grown);
  tiers = wider;
}

}  // namespace servegym_core
