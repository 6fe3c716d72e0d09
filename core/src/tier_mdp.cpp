#include "tier_mdp.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace servegym_core {

namespace {

constexpr std::size_t kStats = 5;  // per tier: arrivals, finished, SLO met, completed, Σ TTFT
enum Stat : std::size_t { kArrivals = 0, kFinished = 1, kMet = 2, kCompleted = 3, kTtftSum = 4 };

}  // namespace

TierMDP::TierMDP(TierSpec spec) : spec_(std::move(spec)), observation_(spec_) {
  const std::size_t k = static_cast<std::size_t>(spec_.num_tiers);
  if (spec_.context_k.size() != spec_.context_c.size()) throw std::invalid_argument("context encodings differ in size");
  for (const std::vector<std::int32_t>* positions : {&spec_.ctx_headroom_fraction, &spec_.ctx_arrivals_per_s,
                                                      &spec_.ctx_finished, &spec_.ctx_slo_attainment,
                                                      &spec_.ctx_mean_ttft_s}) {
    if (positions->size() != k) throw std::invalid_argument("tier_context's per-tier fields need num_tiers positions");
  }
  if (spec_.reward < 0 || spec_.reward > static_cast<std::int32_t>(IntervalReward::Latency)) {
    throw std::invalid_argument("reward code " + std::to_string(spec_.reward) + " is not one the kernel computes");
  }
  if (spec_.headroom_levels < 2) throw std::invalid_argument("headroom_levels must be >= 2");
  if (!(spec_.control_interval_s > 0.0)) throw std::invalid_argument("control_interval_s must be > 0");
}

void TierMDP::attach(Engine* engine, TierEpisode episode, const TierRow& row) {
  episode.check(engine, spec_.max_instances);
  const std::size_t k = static_cast<std::size_t>(spec_.num_tiers);
  if (episode.headroom_fractions.size() != k || episode.interval_stats.size() != k * kStats) {
    throw std::invalid_argument("headroom_fractions needs num_tiers values, interval_stats 5 per tier");
  }
  const std::size_t outcomes = engine->outcome_log().size();
  if (episode.arrived_before < 0 || static_cast<std::size_t>(episode.arrived_before) > engine->arrived() ||
      episode.outcomes_before < 0 || static_cast<std::size_t>(episode.outcomes_before) > outcomes ||
      episode.seen < 0 || static_cast<std::size_t>(episode.seen) > outcomes ||
      episode.submitted < static_cast<std::int64_t>(outcomes)) {
    throw std::invalid_argument("the episode's counters do not fit the engine's arrivals and outcomes");
  }
  engine_ = engine;
  episode_ = std::move(episode);
  next_control_s_ = episode_.next_control_s;
  arrived_before_ = static_cast<std::size_t>(episode_.arrived_before);
  outcomes_before_ = static_cast<std::size_t>(episode_.outcomes_before);
  seen_ = static_cast<std::size_t>(episode_.seen);
  fractions_ = episode_.headroom_fractions;
  stats_ = episode_.interval_stats;
  over_ = static_cast<std::int64_t>(outcomes) == episode_.submitted;
  observation_.reset();
  observation_.set_static(episode_.static_features);
  fill(row);
}

TierStepResult TierMDP::step(const std::int64_t* levels, const TierRow& row) {
  if (engine_ == nullptr) throw std::logic_error("step() before the env was reset");
  if (over_) throw std::logic_error("the episode has ended; reset it before step()");
  // TierEnv.apply: h_p = l / (L − 1) · cap, in force from now (Llumnix-K eq. 3-4's budgets).
  const double last_level = static_cast<double>(spec_.headroom_levels - 1);
  for (std::size_t p = 0; p < fractions_.size(); ++p) {
    if (levels[p] < 0 || levels[p] >= spec_.headroom_levels) {
      throw std::invalid_argument("level " + std::to_string(levels[p]) + " of tier " + std::to_string(p) +
                                  " is outside [0, " + std::to_string(spec_.headroom_levels) + ")");
    }
    fractions_[p] = static_cast<double>(levels[p]) / last_level * spec_.headroom_cap_fraction;
  }
  engine_->set_headroom_fractions(fractions_);
  // TierEnv.advance: run to the control instant, then the next one is an interval later.
  const Decision decision = engine_->advance(next_control_s_);
  if (decision.kind != DecisionKind::None) {
    throw std::logic_error("the engine stopped for a decision or a Python callback: not a Tier-v0 interval");
  }
  next_control_s_ += spec_.control_interval_s;
  record_interval();
  // The requests finished during the step: the reward and ServingEnv.step_info.
  const TierStepResult result = episode_.close_interval(*engine_, seen_, static_cast<IntervalReward>(spec_.reward),
                                                       spec_.tier_weights, spec_.e2e_scale_s);
  over_ = result.done;
  fill(row);
  return result;
}

void TierMDP::record_interval() {
  std::fill(stats_.begin(), stats_.end(), 0.0);
  const std::int64_t last_tier = spec_.num_tiers - 1;
  const RequestTable& t = engine_->requests();
  const std::size_t arrived = engine_->arrived();
  for (std::size_t r = arrived_before_; r < arrived; ++r) {  // rows are arrivals, in order
    stats_[static_cast<std::size_t>(std::min(t.tier[r], last_tier)) * kStats + kArrivals] += 1.0;
  }
  arrived_before_ = arrived;
  const OutcomeLog& log = engine_->outcome_log();
  for (std::size_t o = outcomes_before_; o < log.size(); ++o) {
    const Req r = log.rows[o];
    double* tier = &stats_[static_cast<std::size_t>(std::min(t.tier[r], last_tier)) * kStats];
    tier[kFinished] += 1.0;
    if (log.reasons[o] == static_cast<std::uint8_t>(RejectReason::None)) {
      tier[kMet] += episode_.meets_slo(*engine_, o) ? 1.0 : 0.0;
      tier[kCompleted] += 1.0;
      tier[kTtftSum] += t.first_token_s[r] - t.arrival_s[r];
    }
  }
  outcomes_before_ = log.size();
}

void TierMDP::fill(const TierRow& row) {
  // InstanceFeatures.fill for slots 0 .. n − 1 holding instances 0 .. n − 1 (no routed request).
  const std::size_t n = engine_->num_instances();
  while (slots_.size() < n) slots_.push_back(static_cast<std::int32_t>(slots_.size()));
  observation_.fill(*engine_, slots_.data(), n, -1, row.instances);
  // TierEnv.context through ObservationSchema.encode_context.
  const std::size_t size = spec_.context_k.size();
  std::vector<double> values(size, 0.0);
  for (std::size_t p = 0; p < fractions_.size(); ++p) {
    const double* tier = &stats_[p * kStats];
    values[spec_.ctx_headroom_fraction[p]] = fractions_[p];
    values[spec_.ctx_arrivals_per_s[p]] = tier[kArrivals] / spec_.control_interval_s;
    values[spec_.ctx_finished[p]] = tier[kFinished];
    values[spec_.ctx_slo_attainment[p]] = tier[kFinished] > 0.0 ? tier[kMet] / tier[kFinished] : 0.0;
    values[spec_.ctx_mean_ttft_s[p]] = tier[kCompleted] > 0.0 ? tier[kTtftSum] / tier[kCompleted] : 0.0;
    row.headroom_fractions[p] = fractions_[p];
  }
  const std::size_t arrived = engine_->arrived();
  values[spec_.ctx_recent_qps] =
      static_cast<double>(episode_.recent_arrivals(arrived, engine_->now_s(), spec_.recent_window_s)) /
      spec_.recent_window_s;
  values[spec_.ctx_arrived] = static_cast<double>(arrived);
  for (std::size_t p = 0; p < size; ++p) row.context[p] = encode_column(values[p], spec_.context_k[p], spec_.context_c[p]);
}

}  // namespace servegym_core
