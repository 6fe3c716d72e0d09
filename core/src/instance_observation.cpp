#include "instance_observation.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <utility>

namespace servegym_core {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::int64_t kStarting = 0, kServing = 1, kDraining = 2, kStopped = 3;  // LIFECYCLE_CODES

// envs.observation.INSTANCE_FIELDS, in order; the per-tier counts, the shares and the cache columns follow.
const char* const kBaseColumns[] = {
    "present", "starting", "serving", "draining", "role_aggregated", "role_prefill", "role_decode",
    "gpu_tflops", "gpu_bandwidth", "cost_rate", "waiting", "running", "swapped", "kv_used_fraction",
    "kv_capacity", "freeness", "reasoning", "answering", "fresh_answering", "pacer_behind",
    "pending_prefill_tokens", "kv_footprint", "demoted", "service_time_ewma", "answers_overdue",
    "freeness_full", "freeness_normal", "kv_blocks_per_request"};
enum Column : std::size_t {
  kPresent = 0, kStartingFlag, kServingFlag, kDrainingFlag, kRoleAggregated, kRolePrefillFlag, kRoleDecodeFlag,
  kGpuTflops, kGpuBandwidth, kCostRate, kWaitingCol, kRunningCol, kSwappedCol, kKvUsedFraction, kKvCapacity,
  kFreeness, kReasoningCol, kAnsweringCol, kFreshAnsweringCol, kPacerBehind, kPendingPrefill, kKvFootprint,
  kDemotedCol, kServiceTimeEwma, kAnswersOverdueCol, kFreenessFull, kFreenessNormal, kKvBlocksPerRequest,
  kBaseCount
};
// envs.observation.REQUEST_COUNT_FIELDS: Instance.request_counts' order.
constexpr std::size_t kRequestCountColumns[5] = {kReasoningCol, kAnsweringCol, kFreshAnsweringCol, kDemotedCol,
                                                 kAnswersOverdueCol};

}  // namespace

InstanceObservation::InstanceObservation(ObservationSpec spec) : spec_(std::move(spec)) {
  if (spec_.num_tiers < 1 || spec_.max_instances < 1) throw std::invalid_argument("num_tiers and max_instances must be >= 1");
  columns_ = columns(spec_.num_tiers, spec_.prefix_caching, spec_.prefix_match).size();
  if (spec_.instance_k.size() != columns_ || spec_.instance_c.size() != columns_) {
    throw std::invalid_argument("instance encodings: " + std::to_string(spec_.instance_k.size()) + " for " +
                                std::to_string(columns_) + " columns");
  }
  if (spec_.headroom_fractions.size() != static_cast<std::size_t>(spec_.num_tiers)) {
    throw std::invalid_argument("headroom_fractions needs num_tiers entries");
  }
  for (const double h : spec_.headroom_fractions) any_headroom_ = any_headroom_ || h != 0.0;
}

std::vector<std::string> InstanceObservation::columns(std::int32_t num_tiers, bool prefix_caching, bool prefix_match) {
  std::vector<std::string> names(std::begin(kBaseColumns), std::end(kBaseColumns));
  for (std::int32_t t = 0; t < num_tiers; ++t) names.push_back("tier_" + std::to_string(t));
  names.push_back("request_share");
  for (std::int32_t t = 0; t < num_tiers; ++t) names.push_back("tier_" + std::to_string(t) + "_share");
  if (prefix_caching) {
    names.push_back("cache_occupancy");
    names.push_back("prefix_hit_rate");
    if (prefix_match) names.push_back("prefix_match_tokens");
  }
  return names;
}

void InstanceObservation::reset() {
  static_.clear();
  service_seen_ = 0;
  service_ewma_s_.clear();
  service_measured_.clear();
  rows_.clear();
  ids_.clear();
  snapshot_.clear();
  used_.clear();
  hol_.clear();
  tiers_.clear();
  beyond_tiers_ = false;
}

void InstanceObservation::set_static(const std::vector<double>& per_instance) {
  if (per_instance.size() % kStaticFeatures != 0) throw std::invalid_argument("static features: 6 values per instance");
  if (per_instance.size() < static_.size()) {
    throw std::invalid_argument("static features for " + std::to_string(per_instance.size() / kStaticFeatures) +
                                " instances, fewer than the " + std::to_string(static_.size() / kStaticFeatures) +
                                " known");
  }
  static_ = per_instance;
}

void InstanceObservation::update_service_time(const Engine& engine) {
  // InstanceFeatures._update_service_time: ewma = w · newest + (1 − w) · ewma, the first taken as is.
  const OutcomeLog& log = engine.outcome_log();
  const RequestTable& t = engine.requests();
  const double weight = spec_.service_time_ewma_weight;
  for (std::size_t o = service_seen_; o < log.size(); ++o) {
    if (log.reasons[o] != static_cast<std::uint8_t>(RejectReason::None)) continue;
    const Req r = log.rows[o];
    const double service_s = log.finish_s[o] - t.first_scheduled_s[r];
    const std::size_t id = static_cast<std::size_t>(t.instance_id[r]);
    if (!service_measured_[id]) {
      service_ewma_s_[id] = service_s;
      service_measured_[id] = 1;
    } else {
      service_ewma_s_[id] = weight * service_s + (1.0 - weight) * service_ewma_s_[id];
    }
  }
  service_seen_ = log.size();
}

void InstanceObservation::fill(Engine& engine, const std::int32_t* slots, std::size_t count, Req request, float* out) {
  const InstanceArrays* arrays_ptr = engine.arrays();
  if (arrays_ptr == nullptr) throw std::invalid_argument("the engine keeps no instance arrays");
  const InstanceArrays& arrays = *arrays_ptr;
  const std::size_t n = engine.num_instances();
  const std::size_t k = static_cast<std::size_t>(spec_.num_tiers);
  const std::size_t width = columns_;
  if (count > static_cast<std::size_t>(spec_.max_instances)) {
    throw std::invalid_argument(std::to_string(count) + " instance slots asked, more than the " +
                                std::to_string(spec_.max_instances) + " available");
  }
  if (static_.size() < kStaticFeatures * n) {
    throw std::invalid_argument("static features for " + std::to_string(static_.size() / kStaticFeatures) +
                                " instances, the engine has " + std::to_string(n));
  }
  if (service_ewma_s_.size() < n) {
    service_ewma_s_.resize(n, 0.0);
    service_measured_.resize(n, 0);
  }
  update_service_time(engine);
  // The slots holding a live instance (InstanceFeatures._slot_layout).
  rows_.clear();
  ids_.clear();
  for (std::size_t slot = 0; slot < count; ++slot) {
    const std::int32_t id = slots[slot];
    if (id < 0) continue;
    if (static_cast<std::size_t>(id) >= n) {
      throw std::invalid_argument("slot " + std::to_string(slot) + ": instance " + std::to_string(id) +
                                  " does not exist (" + std::to_string(n) + " instances)");
    }
    if (arrays.get(id, kLifecycle) == kStopped) continue;
    rows_.push_back(static_cast<std::int64_t>(slot));
    ids_.push_back(id);
  }
  const std::size_t live = ids_.size();
  // InstanceLoad: the table's rows as they are now, before any instance syncs below.
  snapshot_.resize(live * kArrayWidth);
  for (std::size_t j = 0; j < live; ++j) {
    const std::int32_t id = static_cast<std::int32_t>(ids_[j]);
    for (std::int32_t c = 0; c < kArrayWidth; ++c) snapshot_[j * kArrayWidth + c] = arrays.get(id, c);
  }
  raw_.assign(live * width, 0.0);
  const std::size_t table_tiers = static_cast<std::size_t>(arrays.tiers);
  used_.assign(live, 0);
  hol_.assign(live, 0);
  requests_.assign(live, 0);
  batch_.assign(live, 0);
  tiers_.assign(live * k, 0);
  beyond_tiers_ = false;
  for (std::size_t j = 0; j < live; ++j) {
    const std::int32_t id = static_cast<std::int32_t>(ids_[j]);
    const std::int64_t* row = &snapshot_[j * kArrayWidth];
    const std::int64_t queued = row[kWaiting] + row[kSwapped];
    requests_[j] = queued + row[kRunning];
    batch_[j] = row[kRunning] + (queued > 0 ? 1 : 0);
    used_[j] = row[kKvUsedBlocks] + engine.instance(id).unsynced_kv_blocks();
    if (queued > 0) hol_[j] = engine.instance(id).head_of_line_demand_blocks();
    const std::int64_t* tier_row = &arrays.tier_table[static_cast<std::size_t>(id) * table_tiers];
    for (std::size_t t = 0; t < table_tiers; ++t) {
      tiers_[j * k + std::min(t, k - 1)] += tier_row[t];
      beyond_tiers_ = beyond_tiers_ || (t >= k && tier_row[t] != 0);
    }
  }
  for (std::size_t j = 0; j < live; ++j) {
    const std::int64_t* row = &snapshot_[j * kArrayWidth];
    double* raw = &raw_[j * width];
    const std::int64_t total = row[kKvTotalBlocks];
    const std::int64_t lifecycle = row[kLifecycle];
    const bool occupied = batch_[j] > 0;
    raw[kPresent] = 1.0;
    raw[kStartingFlag] = lifecycle == kStarting ? 1.0 : 0.0;
    raw[kServingFlag] = lifecycle == kServing ? 1.0 : 0.0;
    raw[kDrainingFlag] = lifecycle == kDraining ? 1.0 : 0.0;
    for (std::size_t s = 0; s < kStaticFeatures; ++s) {
      raw[kRoleAggregated + s] = static_[kStaticFeatures * static_cast<std::size_t>(ids_[j]) + s];
    }
    raw[kKvCapacity] = static_cast<double>(total * row[kBlockSize]);
    raw[kWaitingCol] = static_cast<double>(row[kWaiting]);
    raw[kRunningCol] = static_cast<double>(row[kRunning]);
    raw[kSwappedCol] = static_cast<double>(row[kSwapped]);
    raw[kKvUsedFraction] = static_cast<double>(used_[j]) / static_cast<double>(total);
    const std::int64_t spare = (total - used_[j]) - row[kWatermarkBlocks] - row[kWaitingPrefillBlocks];
    raw[kFreeness] = occupied ? static_cast<double>(spare) / static_cast<double>(requests_[j]) : kInf;
  }
  // InstanceFeatures._per_request: every instance's counts, then every instance's pacer flag.
  if (!spec_.per_request_detail) {
    for (std::size_t j = 0; j < live; ++j) {
      const std::int64_t* row = &snapshot_[j * kArrayWidth];
      raw_[j * width + kAnsweringCol] = static_cast<double>(row[kRunning] + row[kSwapped]);
    }
  } else {
    const double now_s = engine.now_s();
    const double overdue_before_s = std::isnan(spec_.tpot_target_s) ? -kInf : now_s - spec_.tpot_target_s;
    for (std::size_t j = 0; j < live; ++j) {
      const std::array<std::int64_t, 5> counts = engine.instance(static_cast<std::int32_t>(ids_[j]))
                                                     .request_counts(overdue_before_s, spec_.fresh_quantum_tokens);
      for (std::size_t c = 0; c < 5; ++c) raw_[j * width + kRequestCountColumns[c]] = static_cast<double>(counts[c]);
    }
  }
  if (!std::isnan(spec_.tpot_target_s)) {
    for (std::size_t j = 0; j < live; ++j) {
      const bool behind = engine.instance_mut(static_cast<std::int32_t>(ids_[j])).answering_behind_pace(spec_.tpot_target_s);
      raw_[j * width + kPacerBehind] = behind ? 1.0 : 0.0;
    }
  }
  const std::size_t tier0 = kBaseCount, share0 = kBaseCount + k;
  totals_.assign(1 + k, 0.0);
  for (std::size_t j = 0; j < live; ++j) {
    const std::int64_t* row = &snapshot_[j * kArrayWidth];
    double* raw = &raw_[j * width];
    const std::int64_t total = row[kKvTotalBlocks];
    const bool occupied = batch_[j] > 0;
    const double total_d = static_cast<double>(total);
    const double batch_d = static_cast<double>(batch_[j]);
    raw[kPendingPrefill] = static_cast<double>(row[kPendingPrefillTokens]);
    raw[kKvFootprint] = static_cast<double>(row[kBlockSize] * (used_[j] + row[kSwappedKvBlocks]));
    raw[kServiceTimeEwma] = service_ewma_s_[static_cast<std::size_t>(ids_[j])];
    // InstanceLoad._freeness of F_normal's usage, then headroom_charge.
    const double usage = static_cast<double>(used_[j] + hol_[j]);
    double f_normal = occupied ? (total_d - usage) / batch_d : kInf;
    if (row[kLifecycle] == kDraining) f_normal = -kInf;
    double f_full = f_normal;
    if (any_headroom_ && std::isfinite(f_normal) && occupied) {
      double present = 0.0;
      for (std::size_t t = 0; t < k; ++t) present = present + (tiers_[j * k + t] > 0 ? spec_.headroom_fractions[t] : 0.0);
      f_full = f_normal - (total_d * present) / batch_d;
    }
    raw[kFreenessFull] = f_full;
    raw[kFreenessNormal] = f_normal;
    raw[kKvBlocksPerRequest] = occupied ? total_d / batch_d : kInf;
    raw[share0] = static_cast<double>(requests_[j]);
    for (std::size_t t = 0; t < k; ++t) {
      raw[tier0 + t] = static_cast<double>(tiers_[j * k + t]);
      raw[share0 + 1 + t] = static_cast<double>(tiers_[j * k + t]);
    }
    // Integer-valued sums: exact in any order (np.add.reduce's pairwise one included).
    for (std::size_t s = 0; s <= k; ++s) totals_[s] += raw[share0 + s];
  }
  for (std::size_t j = 0; j < live; ++j) {
    for (std::size_t s = 0; s <= k; ++s) {
      if (totals_[s] > 0) raw_[j * width + share0 + s] /= totals_[s];
    }
  }
  if (spec_.prefix_caching) {
    // InstanceFeatures._prefix_cache.
    const std::size_t occupancy = share0 + 1 + k, hit_rate = occupancy + 1, match = occupancy + 2;
    const RequestTable& t = engine.requests();
    if (request >= 0 && static_cast<std::size_t>(request) >= t.size()) {
      throw std::invalid_argument("request row " + std::to_string(request) + " is outside the request table");
    }
    const bool matching = spec_.prefix_match && request >= 0 && t.block_tokens[request] > 0 && t.kv_tokens[request] == 0;
    for (std::size_t j = 0; j < live; ++j) {
      const PrefixCache* cache = engine.instance(static_cast<std::int32_t>(ids_[j])).cache.get();
      if (cache == nullptr) continue;
      double* raw = &raw_[j * width];
      const std::int64_t total = snapshot_[j * kArrayWidth + kKvTotalBlocks];
      raw[occupancy] = static_cast<double>(cache->entry_blocks) / static_cast<double>(total);
      if (cache->query_tokens > 0) {
        raw[hit_rate] = static_cast<double>(cache->hit_tokens + cache->host_hit_tokens) /
                        static_cast<double>(cache->query_tokens);
      }
      if (matching) {
        const PrefixMatch found = cache->match(t, request);
        raw[match] = static_cast<double>((found.gpu + found.host) * t.block_tokens[request]);
      }
    }
  }
  std::fill(out, out + static_cast<std::size_t>(spec_.max_instances) * width, 0.0f);
  for (std::size_t j = 0; j < live; ++j) {
    float* dst = out + static_cast<std::size_t>(rows_[j]) * width;
    const double* raw = &raw_[j * width];
    for (std::size_t c = 0; c < width; ++c) dst[c] = encode_column(raw[c], spec_.instance_k[c], spec_.instance_c[c]);
  }
}

std::vector<double> InstanceObservation::freeness_full(const std::vector<double>& headroom_fractions) const {
  const std::size_t k = static_cast<std::size_t>(spec_.num_tiers);
  if (headroom_fractions.size() > k) {
    throw std::invalid_argument(std::to_string(headroom_fractions.size()) + " headroom fractions for " +
                                std::to_string(k) + " tiers");
  }
  if (beyond_tiers_) {
    throw std::invalid_argument("requests of a tier beyond the " + std::to_string(headroom_fractions.size()) +
                                " headroom fractions");
  }
  bool any_headroom = false;
  for (const double h : headroom_fractions) any_headroom = any_headroom || h != 0.0;
  const std::size_t live = ids_.size();
  std::vector<double> value(live);
  for (std::size_t j = 0; j < live; ++j) {
    const std::int64_t* row = &snapshot_[j * kArrayWidth];
    const double total_d = static_cast<double>(row[kKvTotalBlocks]);
    double usage = static_cast<double>(used_[j] + hol_[j]);
    if (any_headroom) {  // usage + M · Σ h_p over the tiers present, added in tier order
      double present = 0.0;
      for (std::size_t t = 0; t < headroom_fractions.size(); ++t) {
        present = present + (tiers_[j * k + t] > 0 ? headroom_fractions[t] : 0.0);
      }
      usage = usage + total_d * present;
    }
    value[j] = batch_[j] > 0 ? (total_d - usage) / static_cast<double>(batch_[j]) : kInf;
    if (row[kLifecycle] == kDraining) value[j] = -kInf;
  }
  return value;
}

}  // namespace servegym_core
