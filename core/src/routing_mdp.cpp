#include "routing_mdp.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

namespace servegym_core {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::int32_t kRolePrefill = 1, kRoleDecode = 2;  // ROLE_CODES

}  // namespace

RoutingMDP::RoutingMDP(RoutingSpec spec) : spec_(std::move(spec)), observation_(spec_) {
  const std::size_t k = static_cast<std::size_t>(spec_.num_tiers);
  columns_ = observation_.features();
  if (spec_.context_k.size() != spec_.context_c.size()) throw std::invalid_argument("context encodings differ in size");
  if (spec_.ctx_tier.size() != k || spec_.ctx_source_slot.size() != static_cast<std::size_t>(spec_.max_instances)) {
    throw std::invalid_argument("context one-hot groups: tier needs num_tiers positions, source_slot max_instances");
  }
  if (spec_.reward < 0 || spec_.reward > static_cast<std::int32_t>(RoutingReward::LatencyBalance)) {
    throw std::invalid_argument("reward code " + std::to_string(spec_.reward) + " is not one the kernel computes");
  }
}

void RoutingMDP::attach(Engine* engine, RoutingEpisode episode, const RoutingRow& row) {
  episode.check(engine, spec_.max_instances);
  const std::size_t rows = engine->requests().size();
  if (episode.decision_kind < 0 || episode.decision_kind > 2) {
    throw std::invalid_argument("decision kind " + std::to_string(episode.decision_kind) + ": not none, route or phase");
  }
  engine_ = engine;
  episode_ = std::move(episode);
  decision_ = Decision{static_cast<DecisionKind>(episode_.decision_kind), episode_.decision_row,
                       episode_.decision_instance};
  over_ = decision_.kind == DecisionKind::None;
  seen_ = 0;
  observation_.reset();
  observation_.set_static(episode_.static_features);
  dense_seen_ = 0;
  ended_.assign(rows, 0);
  charged_.assign(rows, 0);
  ttft_due_.clear();
  tpot_due_.clear();
  potential_ = episode_.potential;
  if (episode_.latency_arrived < 0 || episode_.latency_ended < 0) throw std::invalid_argument("negative latency counts");
  latency_last_s_ = episode_.latency_last_s;
  latency_arrived_ = static_cast<std::size_t>(episode_.latency_arrived);
  latency_ended_ = static_cast<std::size_t>(episode_.latency_ended);
  fill(row);
}

RoutingStepResult RoutingMDP::step(std::int64_t action, const RoutingRow& row) {
  if (engine_ == nullptr) throw std::logic_error("step() before the env was reset");
  if (over_) throw std::logic_error("the episode has ended; reset it before step()");
  RoutingStepResult result;
  const std::size_t slots = static_cast<std::size_t>(spec_.max_instances);
  if (action < 0 || static_cast<std::size_t>(action) >= slots) {
    throw std::invalid_argument("action " + std::to_string(action) + " is outside Discrete(" + std::to_string(slots) + ")");
  }
  // ServingEnv.step: a masked-out action falls back to the first valid slot and costs the penalty.
  const bool valid = row.valid[action] != 0;
  if (!valid) {
    std::size_t slot = 0;
    while (slot < slots && row.valid[slot] == 0) ++slot;
    if (slot == slots) throw std::runtime_error("no instance can take the request: every instance is masked out");
    action = static_cast<std::int64_t>(slot);
  }
  const std::int32_t instance_id = static_cast<std::int32_t>(action);  // slot k holds instance k (deployment order)
  if (decision_.kind == DecisionKind::Route) {
    engine_->dispatch_decision(decision_.row, instance_id);
  } else {
    engine_->place_answering(decision_.row, instance_id);
  }
  decision_ = engine_->advance(kInf);
  if (decision_.kind == DecisionKind::Callback || decision_.kind == DecisionKind::Completion) {
    throw std::logic_error("a Python callback or completion hook stopped the engine: not a Routing-v0 decision");
  }
  const bool done = decision_.kind == DecisionKind::None;
  // The requests finished during the step: envs.rewards.SLOReward and ServingEnv.step_info.
  const OutcomeLog& log = engine_->outcome_log();
  const RoutingReward kind = static_cast<RoutingReward>(spec_.reward);
  double reward = 0.0;
  if (kind == RoutingReward::Slo) {
    const RequestTable& t = engine_->requests();
    for (std::size_t o = seen_; o < log.size(); ++o) {
      const bool met = episode_.meets_slo(*engine_, o);
      reward += tier_weight(spec_.tier_weights, t.tier[log.rows[o]]) * (met ? 1.0 : -1.0);
    }
  } else if (kind == RoutingReward::SloDense) {
    reward = slo_misses();
  } else if (kind == RoutingReward::LatencyDense) {
    reward = dense_latency();
  } else {  // LoadBalanceShaping: the potential first, then the dense reward plus the shaping
    const double potential = load_potential();
    const double shaping = potential - potential_;
    potential_ = potential;
    reward = (kind == RoutingReward::SloBalance ? slo_misses() : dense_latency()) + shaping;
  }
  for (std::size_t o = seen_; o < log.size(); ++o) result.slo_met += episode_.meets_slo(*engine_, o) ? 1 : 0;
  result.finished = static_cast<std::int64_t>(log.size() - seen_);
  seen_ = log.size();
  if (!valid) reward -= spec_.invalid_action_penalty;
  result.reward = reward;
  result.invalid_action = !valid;
  result.time_s = engine_->now_s();
  result.cost_usd = episode_.cost_usd(engine_->now_s());
  result.done = done;
  over_ = done;
  fill(row);
  return result;
}

double RoutingMDP::load_potential() const {
  // −Σ over instances of (requests / COUNT_SCALE)², the sum from 0 in instance order.
  double sum = 0.0;
  for (std::size_t i = 0; i < engine_->num_instances(); ++i) {
    const double share = static_cast<double>(engine_->instance(static_cast<std::int32_t>(i)).num_requests()) /
                         spec_.load_count_scale;
    sum += std::pow(share, 2.0);
  }
  return -sum;
}

double RoutingMDP::slo_misses() {
  // SLOMissReward.__call__: misses of the requests that ended, then the TTFT deadlines passed
  // (<= now), then the TPOT deadlines passed (< now); each request charged once.
  const auto later = [](const Due& a, const Due& b) {
    return a.deadline_s > b.deadline_s || (a.deadline_s == b.deadline_s && a.order > b.order);
  };
  const RequestTable& t = engine_->requests();
  const OutcomeLog& log = engine_->outcome_log();
  const double now_s = engine_->now_s();
  for (std::size_t order = dense_seen_; order < engine_->arrived(); ++order) {  // _admit: rows are arrivals
    const Req r = static_cast<Req>(order);
    const double target_s = episode_.slo_ttft_s[r];
    ttft_due_.push_back(Due{t.arrival_s[r] + (std::isnan(target_s) ? kInf : target_s), static_cast<std::int64_t>(order), r});
    std::push_heap(ttft_due_.begin(), ttft_due_.end(), later);
  }
  dense_seen_ = engine_->arrived();
  double missed = 0.0;
  for (std::size_t o = seen_; o < log.size(); ++o) {
    const Req r = log.rows[o];
    ended_[r] = 1;
    if (!charged_[r] && !episode_.meets_slo(*engine_, o)) {
      charged_[r] = 1;
      missed += tier_weight(spec_.tier_weights, t.tier[r]);
    }
  }
  while (!ttft_due_.empty() && ttft_due_.front().deadline_s <= now_s) {
    std::pop_heap(ttft_due_.begin(), ttft_due_.end(), later);
    const Due due = ttft_due_.back();
    ttft_due_.pop_back();
    const Req r = due.row;
    if (charged_[r]) continue;
    if (!(t.first_token_s[r] <= due.deadline_s)) {
      charged_[r] = 1;
      missed += tier_weight(spec_.tier_weights, t.tier[r]);
      continue;
    }
    const double tbt_s = episode_.slo_tbt_s[r];
    const std::int64_t output_tokens = t.output_tokens[r];
    if (!std::isnan(tbt_s) && output_tokens > 1 && !ended_[r]) {
      tpot_due_.push_back(Due{t.first_token_s[r] + tbt_s * static_cast<double>(output_tokens - 1), due.order, r});
      std::push_heap(tpot_due_.begin(), tpot_due_.end(), later);
    }
  }
  while (!tpot_due_.empty() && tpot_due_.front().deadline_s < now_s) {
    std::pop_heap(tpot_due_.begin(), tpot_due_.end(), later);
    const Req r = tpot_due_.back().row;
    tpot_due_.pop_back();
    if (!ended_[r] && !charged_[r]) {
      charged_[r] = 1;
      missed += tier_weight(spec_.tier_weights, t.tier[r]);
    }
  }
  return -missed;
}

double RoutingMDP::dense_latency() {
  // ∫ requests in the system dt over the step: in_system · Δt + Σ (now − arrival) over the step's
  // arrivals − Σ (now − end) over its ends, each sum from 0 in order; −that / E2E_SCALE_S.
  const double now_s = engine_->now_s();
  const std::int64_t in_system =
      static_cast<std::int64_t>(latency_arrived_) - static_cast<std::int64_t>(latency_ended_);
  double request_s = static_cast<double>(in_system) * (now_s - latency_last_s_);
  const RequestTable& t = engine_->requests();
  const std::size_t arrived = engine_->arrived();
  double arrivals_s = 0.0;
  for (std::size_t r = latency_arrived_; r < arrived; ++r) arrivals_s += now_s - t.arrival_s[r];
  request_s += arrivals_s;
  const OutcomeLog& log = engine_->outcome_log();
  double ends_s = 0.0;
  for (std::size_t o = latency_ended_; o < log.size(); ++o) ends_s += now_s - log.finish_s[o];
  request_s -= ends_s;
  latency_last_s_ = now_s;
  latency_arrived_ = arrived;
  latency_ended_ = log.size();
  return -request_s / spec_.e2e_scale_s;
}

void RoutingMDP::fill(const RoutingRow& row) {
  fill_instances(row.instances);
  fill_context(row.context);
  fill_mask(row);
}

void RoutingMDP::fill_instances(float* out) {
  // InstanceFeatures.fill for slots 0 .. n − 1 holding instances 0 .. n − 1.
  const std::size_t n = engine_->num_instances();
  while (slots_.size() < n) slots_.push_back(static_cast<std::int32_t>(slots_.size()));
  const Req request = decision_.kind == DecisionKind::Route ? decision_.row : -1;
  observation_.fill(*engine_, slots_.data(), n, request, out);
}

void RoutingMDP::fill_context(float* out) const {
  // RoutingEnv.context through ObservationSchema.encode_context.
  const std::size_t size = spec_.context_k.size();
  std::vector<double> values(size, 0.0);
  const bool route = decision_.kind == DecisionKind::Route;
  const bool phase = decision_.kind == DecisionKind::Phase;
  const RequestTable& t = engine_->requests();
  values[spec_.ctx_is_arrival] = route ? 1.0 : 0.0;
  values[spec_.ctx_is_phase_change] = phase ? 1.0 : 0.0;
  if (route || phase) {
    const Req r = decision_.row;
    values[spec_.ctx_prompt_tokens] = static_cast<double>(t.prompt_tokens[r]);
    values[spec_.ctx_generated_tokens] = static_cast<double>(t.generated_tokens[r]);
    const std::int64_t tier = std::min<std::int64_t>(t.tier[r], spec_.num_tiers - 1);
    if (tier < 0) throw std::invalid_argument("context: tier index " + std::to_string(tier) + " outside [-1, num_tiers)");
    values[spec_.ctx_tier[static_cast<std::size_t>(tier)]] = 1.0;
  }
  // ServingEnv.recent_arrivals over the sorted arrival times, window 10 s.
  const std::size_t arrived = engine_->arrived();
  values[spec_.ctx_recent_qps] =
      static_cast<double>(episode_.recent_arrivals(arrived, engine_->now_s(), spec_.recent_window_s)) / spec_.recent_window_s;
  values[spec_.ctx_cost_rate] = episode_.cost_rate_usd_per_s * 3600.0;
  values[spec_.ctx_arrived] = static_cast<double>(arrived);
  if (phase) values[spec_.ctx_source_slot[static_cast<std::size_t>(decision_.instance_id)]] = 1.0;
  for (std::size_t p = 0; p < size; ++p) out[p] = encode_column(values[p], spec_.context_k[p], spec_.context_c[p]);
}

void RoutingMDP::fill_mask(const RoutingRow& row) {
  // RoutingEnv.compute_action_mask: Cluster.accepting(seq, new_request=route).
  const std::size_t slots = static_cast<std::size_t>(spec_.max_instances);
  std::fill(row.valid, row.valid + slots, std::uint8_t{0});
  if (decision_.kind == DecisionKind::Route || decision_.kind == DecisionKind::Phase) {
    const InstanceArrays& arrays = *engine_->arrays();
    const std::int32_t excluded = decision_.kind == DecisionKind::Route ? kRoleDecode : kRolePrefill;
    const std::int32_t model = engine_->requests().model_index[decision_.row];
    const std::size_t n = engine_->num_instances();
    for (std::size_t i = 0; i < n; ++i) {
      const std::int32_t id = static_cast<std::int32_t>(i);
      row.valid[i] = arrays.get(id, kLifecycle) == kLifecycleServing && arrays.get(id, kRole) != excluded &&
                     (model < 0 || engine_->instance(id).settings.model_index == model);
    }
  }
  for (std::size_t i = 0; i < slots; ++i) row.mask[i] = row.valid[i] ? 1.0f : 0.0f;
}

}  // namespace servegym_core
