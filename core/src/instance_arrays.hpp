// Per-instance quantities the environments observe, one int64 table with a row per instance id
// (simulator/instance_arrays.py, same columns and the same incremental updates): the instances
// update an entry where the quantity changes, and Python reads the tables as numpy views.
#pragma once

#include <cstdint>
#include <vector>

#include "request_table.hpp"
#include "sim_types.hpp"

namespace servegym_core {

// Columns of the table (simulator.instance_arrays: WAITING ... ROLE).
enum ArrayColumn : std::int32_t {
  kWaiting = 0,
  kRunning = 1,
  kSwapped = 2,
  kKvUsedBlocks = 3,
  kPendingPrefillTokens = 4,  // Σ over waiting requests of the tokens still to prefill
  kWaitingPrefillBlocks = 5,  // Σ over waiting requests of the blocks their prefill will allocate
  kSwappedKvBlocks = 6,       // Σ over swapped requests of the blocks their KV fills in host memory
  kKvTotalBlocks = 7,
  kWatermarkBlocks = 8,
  kBlockSize = 9,
  kLifecycle = 10,
  kRole = 11,
};
constexpr std::int32_t kArrayWidth = 12;
constexpr std::int64_t kLifecycleServing = 1;  // LIFECYCLE_CODES["serving"]

class InstanceArrays {
 public:
  // Start tracking a new instance, serving (ids are dense: each new id is the next row).
  void add_row(std::int32_t instance_id, std::int64_t kv_total_blocks, std::int64_t watermark_blocks,
               std::int64_t block_size, std::int64_t role_code);
  void set(std::int32_t row, std::int32_t column, std::int64_t value) { table[index(row, column)] = value; }
  // Instance `row` is now in lifecycle `code` (LIFECYCLE_CODES).
  void set_lifecycle(std::int32_t row, std::int64_t code) {
    set(row, kLifecycle, code);
    ++layout_version;
  }
  std::int64_t get(std::int32_t row, std::int32_t column) const { return table[index(row, column)]; }
  // r entered queue `queue` (kWaiting, kRunning or kSwapped) on instance `row` from another queue there.
  void add(std::int32_t row, const RequestTable& t, Req r, std::int32_t queue) { update(row, t, r, queue, 1); }
  // r left `queue` on instance `row`; its tokens are what they were when it entered.
  void remove(std::int32_t row, const RequestTable& t, Req r, std::int32_t queue) { update(row, t, r, queue, -1); }
  // r came to instance `row` from outside, into `queue` (its tier counted).
  void join(std::int32_t row, const RequestTable& t, Req r, std::int32_t queue);
  // r left instance `row` from `queue` (completed, rejected or moved away).
  void leave(std::int32_t row, const RequestTable& t, Req r, std::int32_t queue);

  std::int32_t rows = 0;
  std::int64_t tiers = 1;
  // Increases whenever a row is added or a lifecycle changes (InstanceArrays.layout_version).
  std::int64_t layout_version = 0;
  std::vector<std::int64_t> table;       // rows x kArrayWidth, row-major
  std::vector<std::int64_t> tier_table;  // rows x tiers: requests of each tier on each instance

 private:
  static std::size_t index(std::int32_t row, std::int32_t column) {
    return static_cast<std::size_t>(row) * kArrayWidth + static_cast<std::size_t>(column);
  }
  void update(std::int32_t row, const RequestTable& t, Req r, std::int32_t queue, std::int64_t sign);
  void grow_tiers(std::int64_t tiers);
};

}  // namespace servegym_core
