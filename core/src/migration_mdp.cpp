#include "migration_mdp.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace servegym_core {

namespace {

constexpr std::int32_t kPrefillRole = 1, kDecodeRole = 2;  // ROLE_CODES

}  // namespace

MigrationMDP::MigrationMDP(MigrationSpec spec) : spec_(std::move(spec)), observation_(spec_) {
  const std::size_t n = static_cast<std::size_t>(spec_.max_instances);
  if (spec_.context_k.size() != spec_.context_c.size()) throw std::invalid_argument("context encodings differ in size");
  for (const std::vector<std::int32_t>* positions :
       {&spec_.ctx_has_queued_candidate, &spec_.ctx_has_running_candidate, &spec_.ctx_candidate_kv_tokens,
        &spec_.ctx_candidate_tier, &spec_.ctx_freeness_full}) {
    if (positions->size() != n) throw std::invalid_argument("migration_context's per-slot fields need max_instances positions");
  }
  if (spec_.reward < 0 || spec_.reward > static_cast<std::int32_t>(IntervalReward::Latency)) {
    throw std::invalid_argument("reward code " + std::to_string(spec_.reward) + " is not one the kernel computes");
  }
  if (!(spec_.migration_interval_s > 0.0)) throw std::invalid_argument("migration_interval_s must be > 0");
}

void MigrationMDP::attach(Engine* engine, MigrationEpisode episode, const MigrationRow& row) {
  episode.check(engine, spec_.max_instances);
  if (episode.model_codes.size() != engine->num_instances()) {
    throw std::invalid_argument("model_codes needs one code per instance");
  }
  const std::size_t outcomes = engine->outcome_log().size();
  if (episode.seen < 0 || static_cast<std::size_t>(episode.seen) > outcomes ||
      episode.submitted < static_cast<std::int64_t>(outcomes)) {
    throw std::invalid_argument("the episode's counters do not fit the engine's outcomes");
  }
  engine_ = engine;
  episode_ = std::move(episode);
  next_tick_s_ = episode_.next_tick_s;
  seen_ = static_cast<std::size_t>(episode_.seen);
  in_flight_.clear();
  over_ = static_cast<std::int64_t>(outcomes) == episode_.submitted;
  observation_.reset();
  observation_.set_static(episode_.static_features);
  fill(row);
}

const std::vector<std::int64_t>& MigrationMDP::in_flight_ids() {
  const RequestTable& t = engine_->requests();
  in_flight_.erase(std::remove_if(in_flight_.begin(), in_flight_.end(),
                                  [&](const std::pair<Req, std::int32_t>& m) {
                                    return t.instance_id[m.first] != m.second || t.phase[m.first] == Phase::Done ||
                                           t.phase[m.first] == Phase::Rejected;
                                  }),
                   in_flight_.end());
  in_flight_ids_.clear();
  for (const auto& m : in_flight_) in_flight_ids_.push_back(t.request_id[m.first]);
  return in_flight_ids_;
}

bool MigrationMDP::refused(Req r, std::int32_t source, std::int32_t target) const {
  if (target == source) return true;
  const Instance& to = engine_->instance(target);
  if (to.lifecycle() != Lifecycle::Serving) return true;
  if (episode_.model_codes[static_cast<std::size_t>(target)] != episode_.model_codes[static_cast<std::size_t>(source)]) {
    return true;
  }
  const RequestTable& t = engine_->requests();
  if (t.prompt_tokens[r] + t.output_tokens[r] > to.max_request_tokens()) return true;
  const bool queued = t.residency[r] == Residency::Queued;
  if (queued && to.settings.role == kDecodeRole) return true;
  if (!queued && to.settings.role == kPrefillRole) return true;
  if (!queued) return !to.kv.can_admit(ceil_div(t.kv_tokens[r] + 1, to.kv.block_size));
  return false;
}

MigrationStepResult MigrationMDP::step(std::int64_t source, std::int64_t destination, const MigrationRow& row) {
  if (engine_ == nullptr) throw std::logic_error("step() before the env was reset");
  if (over_) throw std::logic_error("the episode has ended; reset it before step()");
  const std::int64_t noop = spec_.max_instances;
  if (source < 0 || source > noop || destination < 0 || destination > noop) {
    throw std::invalid_argument("action (" + std::to_string(source) + ", " + std::to_string(destination) +
                                ") is outside MultiDiscrete([" + std::to_string(noop + 1) + ", " +
                                std::to_string(noop + 1) + "])");
  }
  // MigrationEnv.is_valid: the mask, then (not a no-op) the source's candidate after its sync and the refusals.
  bool valid = mask_[static_cast<std::size_t>(source)] != 0 &&
               mask_[static_cast<std::size_t>(noop + 1 + destination)] != 0;
  Req r = -1;
  const bool noop_action = source == noop || destination == noop;
  if (valid && !noop_action) {
    const std::int32_t from = static_cast<std::int32_t>(source), to = static_cast<std::int32_t>(destination);
    engine_->instance_mut(from).sync();
    r = engine_->instance(from).migration_candidate(in_flight_ids());
    if (r < 0) throw std::logic_error("slot " + std::to_string(from) + " has no candidate after its mask said it had");
    valid = !refused(r, from, to);
  }
  // MigrationEnv.apply (a refused action falls back to the no-op): Cluster.migrate, the live ones tracked.
  if (valid && !noop_action) {
    const std::int32_t from = static_cast<std::int32_t>(source), to = static_cast<std::int32_t>(destination);
    const bool running = engine_->requests().residency[r] == Residency::Running;
    if (!engine_->migrate(r, to)) {
      throw std::logic_error("instance " + std::to_string(to) + " refused request " +
                             std::to_string(engine_->requests().request_id[r]) + " after validation");
    }
    if (running) in_flight_.emplace_back(r, from);
  }
  // MigrationEnv.advance: the next tick is an interval later; run to it.
  next_tick_s_ += spec_.migration_interval_s;
  const Decision decision = engine_->advance(next_tick_s_);
  if (decision.kind != DecisionKind::None) {
    throw std::logic_error("the engine stopped for a decision or a Python callback: not a Migration-v0 interval");
  }
  // The requests finished during the step: the reward and ServingEnv.step_info.
  MigrationStepResult result{episode_.close_interval(*engine_, seen_, static_cast<IntervalReward>(spec_.reward),
                                                     spec_.tier_weights, spec_.e2e_scale_s)};
  if (!valid) result.reward -= spec_.invalid_action_penalty;
  result.invalid_action = !valid;
  over_ = result.done;
  fill(row);
  return result;
}

void MigrationMDP::fill(const MigrationRow& row) {
  // InstanceFeatures.fill for slots 0 .. n − 1 holding instances 0 .. n − 1 (no routed request).
  const std::size_t n = engine_->num_instances();
  const std::size_t slots = static_cast<std::size_t>(spec_.max_instances);
  while (slots_.size() < n) slots_.push_back(static_cast<std::int32_t>(slots_.size()));
  observation_.fill(*engine_, slots_.data(), n, -1, row.instances);
  // MigrationEnv.observed_candidates: serving or draining slots' candidates (Cluster.migration_candidates).
  const std::vector<std::int64_t>& excluded = in_flight_ids();
  std::vector<std::int32_t> ids;
  for (std::size_t s = 0; s < n; ++s) {
    const Lifecycle lifecycle = engine_->instance(static_cast<std::int32_t>(s)).lifecycle();
    if (lifecycle == Lifecycle::Serving || lifecycle == Lifecycle::Draining) ids.push_back(static_cast<std::int32_t>(s));
  }
  candidates_.assign(4 * slots, -1);
  if (!ids.empty()) {
    const std::vector<std::int64_t> table = engine_->migration_candidates(ids, excluded);
    for (std::size_t j = 0; j < ids.size(); ++j) {
      std::copy_n(&table[4 * j], 4, &candidates_[4 * static_cast<std::size_t>(ids[j])]);
    }
  }
  // MigrationEnv.compute_action_mask: sources with a candidate; serving destinations of a source's model.
  mask_.assign(2 * (slots + 1), 0);
  mask_[slots] = mask_[2 * slots + 1] = 1;
  std::vector<std::uint8_t> source_models(n, 0);  // by model code (codes are below n)
  for (std::size_t s = 0; s < slots; ++s) {
    mask_[s] = candidates_[4 * s] >= 0 ? 1 : 0;
    if (mask_[s] && s < n) source_models[static_cast<std::size_t>(episode_.model_codes[s])] = 1;
  }
  for (std::size_t s = 0; s < n; ++s) {
    const bool serving = engine_->instance(static_cast<std::int32_t>(s)).lifecycle() == Lifecycle::Serving;
    mask_[slots + 1 + s] = serving && source_models[static_cast<std::size_t>(episode_.model_codes[s])] ? 1 : 0;
  }
  for (std::size_t p = 0; p < mask_.size(); ++p) row.mask[p] = static_cast<float>(mask_[p]);
  // MigrationEnv.context through ObservationSchema.encode_context.
  std::vector<double> values(spec_.context_k.size(), 0.0);
  const std::size_t arrived = engine_->arrived();
  values[spec_.ctx_phase_mode] = 0.0;
  values[spec_.ctx_recent_qps] =
      static_cast<double>(episode_.recent_arrivals(arrived, engine_->now_s(), spec_.recent_window_s)) /
      spec_.recent_window_s;
  values[spec_.ctx_arrived] = static_cast<double>(arrived);
  values[spec_.ctx_live_migrations] = static_cast<double>(in_flight_.size());
  values[spec_.ctx_prompt_tokens] = 0.0;
  values[spec_.ctx_generated_tokens] = 0.0;
  const std::int64_t last_tier = std::max<std::int64_t>(spec_.num_tiers - 1, 1);
  const std::vector<double> freeness = observation_.freeness_full(spec_.freeness_headroom);
  const std::vector<std::int64_t>& live = observation_.rows();
  std::vector<double> freeness_by_slot(slots, 0.0);
  for (std::size_t j = 0; j < live.size(); ++j) freeness_by_slot[static_cast<std::size_t>(live[j])] = freeness[j];
  for (std::size_t s = 0; s < slots; ++s) {
    const std::int64_t* c = &candidates_[4 * s];
    const bool present = c[0] >= 0, queued = c[0] == 1;
    values[spec_.ctx_has_queued_candidate[s]] = queued ? 1.0 : 0.0;
    values[spec_.ctx_has_running_candidate[s]] = present && !queued ? 1.0 : 0.0;
    values[spec_.ctx_candidate_kv_tokens[s]] = static_cast<double>(queued ? c[1] : (present ? c[2] : 0));
    values[spec_.ctx_candidate_tier[s]] = static_cast<double>(present ? std::min(c[3], last_tier) : 0);
    values[spec_.ctx_freeness_full[s]] = freeness_by_slot[s];
  }
  for (std::size_t p = 0; p < values.size(); ++p) row.context[p] = encode_column(values[p], spec_.context_k[p], spec_.context_c[p]);
}

}  // namespace servegym_core
