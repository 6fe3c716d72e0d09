#include "episode_numbers.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace servegym_core {

double tier_weight(const std::vector<double>& tier_weights, std::int64_t tier) {
  if (tier < 0 || static_cast<std::size_t>(tier) >= tier_weights.size()) {
    throw std::out_of_range("tier " + std::to_string(tier) + " has no tier weight");
  }
  return tier_weights[static_cast<std::size_t>(tier)];
}

void EpisodeNumbers::check(const Engine* engine, std::int32_t max_instances) const {
  if (engine == nullptr || engine->arrays() == nullptr) throw std::invalid_argument("the engine keeps no instance arrays");
  const std::size_t n = engine->num_instances();
  if (n > static_cast<std::size_t>(max_instances)) {
    throw std::invalid_argument(std::to_string(n) + " instance slots asked, more than the " +
                                std::to_string(max_instances) + " available");
  }
  if (static_features.size() != 6 * n) {
    throw std::invalid_argument("static_features needs 6 values per instance");
  }
  const std::size_t rows = engine->requests().size();
  for (const std::vector<double>* slo : {&slo_ttft_s, &slo_ttfat_s, &slo_e2e_s, &slo_tbt_s}) {
    if (slo->size() != rows) throw std::invalid_argument("SLO columns need one value per request row");
  }
  if (held_gpus.size() != held_since_s.size() || held_usd_per_gpu_s.size() != held_since_s.size()) {
    throw std::invalid_argument("the held GPUs' columns differ in length");
  }
}

bool EpisodeNumbers::meets_slo(const Engine& engine, std::size_t o) const {
  const OutcomeLog& log = engine.outcome_log();
  if (log.reasons[o] != static_cast<std::uint8_t>(RejectReason::None)) return false;
  const Req r = log.rows[o];
  const RequestTable& t = engine.requests();
  const double arrival_s = t.arrival_s[r];
  const double finish_s = log.finish_s[o];
  const double ttft = slo_ttft_s[r], ttfat = slo_ttfat_s[r], e2e = slo_e2e_s[r], tbt = slo_tbt_s[r];
  if (!std::isnan(ttft) && !(t.first_token_s[r] - arrival_s <= ttft)) return false;
  if (!std::isnan(ttfat) && !(t.first_answer_token_s[r] - arrival_s <= ttfat)) return false;
  if (!std::isnan(e2e) && !(finish_s - arrival_s <= e2e)) return false;
  const std::int64_t output_tokens = t.output_tokens[r];
  if (!std::isnan(tbt) && output_tokens > 1) {
    const double tpot_s = (finish_s - t.first_token_s[r]) / static_cast<double>(output_tokens - 1);
    if (!(tpot_s <= tbt)) return false;
  }
  return true;
}

IntervalStepResult EpisodeNumbers::close_interval(const Engine& engine, std::size_t& seen, IntervalReward reward,
                                                  const std::vector<double>& tier_weights, double e2e_scale_s) const {
  const OutcomeLog& log = engine.outcome_log();
  const RequestTable& t = engine.requests();
  IntervalStepResult result;
  double sum = 0.0;
  for (std::size_t o = seen; o < log.size(); ++o) {
    const bool completed = log.reasons[o] == static_cast<std::uint8_t>(RejectReason::None);
    const bool met = meets_slo(engine, o);
    const Req r = log.rows[o];
    if (reward == IntervalReward::Slo) {  // SLOReward: Σ w_tier · ±1
      sum += tier_weight(tier_weights, t.tier[r]) * (met ? 1.0 : -1.0);
    } else {  // LatencyReward: −Σ (E2E / scale if completed else 1)
      sum += completed ? (log.finish_s[o] - t.arrival_s[r]) / e2e_scale_s : 1.0;
    }
    result.slo_met += completed && met ? 1 : 0;
  }
  result.reward = reward == IntervalReward::Slo ? sum : 0.0 - sum;  // −Σ, +0 when empty
  result.finished = static_cast<std::int64_t>(log.size() - seen);
  seen = log.size();
  result.time_s = engine.now_s();
  result.cost_usd = cost_usd(engine.now_s());
  result.done = static_cast<std::int64_t>(log.size()) == submitted;
  return result;
}

double EpisodeNumbers::cost_usd(double now_s) const {
  double open_usd = 0.0;
  for (std::size_t i = 0; i < held_since_s.size(); ++i) {
    open_usd += (now_s - held_since_s[i]) * static_cast<double>(held_gpus[i]) * held_usd_per_gpu_s[i];
  }
  return cost_closed_usd + open_usd;
}

std::size_t EpisodeNumbers::recent_arrivals(std::size_t arrived, double now_s, double window_s) const {
  const auto begin = arrival_s.begin();
  const std::size_t before = static_cast<std::size_t>(
      std::upper_bound(begin, begin + static_cast<std::ptrdiff_t>(arrived), now_s - window_s) - begin);
  return arrived - before;
}

}  // namespace servegym_core
