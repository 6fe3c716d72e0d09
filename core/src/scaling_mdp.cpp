#include "scaling_mdp.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace servegym_core {

namespace {

enum Choice : std::int64_t { kRemove = 0, kHold = 1, kAdd = 2 };  // envs.scaling: REMOVE, HOLD, ADD

// The KIND_FEATURES column (serving, starting, draining) counting a unit in `lifecycle`; −1: not counted.
int kind_column(Lifecycle lifecycle) {
  switch (lifecycle) {
    case Lifecycle::Serving: return 0;
    case Lifecycle::Starting: return 1;
    case Lifecycle::Draining: return 2;
    default: return -1;
  }
}

}  // namespace

ScalingConfig::ScalingConfig(InstanceSettings settings, LatencyEvaluator latency, std::int32_t gpu_type,
                             std::int64_t num_gpus, double usd_per_gpu_s, double load_s,
                             std::vector<double> static_features)
    : settings(std::move(settings)), latency(std::move(latency)), gpu_type(gpu_type), num_gpus(num_gpus),
      usd_per_gpu_s(usd_per_gpu_s), load_s(load_s), static_features(std::move(static_features)) {
  if (gpu_type < 0) throw std::invalid_argument("gpu_type must be >= 0");
  if (num_gpus < 1) throw std::invalid_argument("num_gpus must be >= 1");
  if (this->static_features.size() != InstanceObservation::kStaticFeatures) {
    throw std::invalid_argument("static_features needs 6 values");
  }
}

ScalingMDP::ScalingMDP(ScalingSpec spec) : spec_(std::move(spec)), observation_(spec_) {
  const std::size_t kinds = spec_.kinds();
  if (kinds == 0) throw std::invalid_argument("no unit kind");
  if (spec_.context_k.size() != spec_.context_c.size()) throw std::invalid_argument("context encodings differ in size");
  for (const std::vector<std::int32_t>* positions :
       {&spec_.ctx_serving_units, &spec_.ctx_starting_units, &spec_.ctx_draining_units}) {
    if (positions->size() != kinds) throw std::invalid_argument("scaling_context's per-kind fields need kinds positions");
  }
  if (spec_.kind_offsets.size() != kinds + 1 || spec_.kind_offsets.front() != 0 ||
      static_cast<std::size_t>(spec_.kind_offsets.back()) != spec_.kind_configs.size()) {
    throw std::invalid_argument("kind_offsets must run from 0 to len(kind_configs), one more than the kinds");
  }
  for (std::size_t k = 0; k < kinds; ++k) {
    if (spec_.kind_offsets[k] >= spec_.kind_offsets[k + 1]) throw std::invalid_argument("a unit kind has no config");
  }
  for (const std::int32_t c : spec_.kind_configs) {
    if (c < 0 || static_cast<std::size_t>(c) >= spec_.configs.size()) throw std::invalid_argument("kind_configs names no config");
  }
  for (const ScalingConfig& config : spec_.configs) {
    if (static_cast<std::size_t>(config.gpu_type) >= spec_.gpu_inventory.size()) {
      throw std::invalid_argument("a config's gpu_type is not in gpu_inventory");
    }
  }
  if (spec_.reward < 0 || spec_.reward > static_cast<std::int32_t>(ScalingReward::Cost)) {
    throw std::invalid_argument("reward code " + std::to_string(spec_.reward) + " is not one the kernel computes");
  }
  if (!(spec_.window_s > 0.0)) throw std::invalid_argument("window_s must be > 0");
}

void ScalingMDP::attach(Engine* engine, ScalingEpisode episode, const ScalingRow& row) {
  episode.check(engine, spec_.max_instances);
  const std::size_t n = engine->num_instances();
  const std::size_t units = episode.unit_kinds.size();
  if (episode.config_models.size() != spec_.configs.size() || episode.config_gpus.size() != spec_.configs.size()) {
    throw std::invalid_argument("config_models and config_gpus need one value per config");
  }
  if (episode.gpus_in_use.size() != spec_.gpu_inventory.size()) throw std::invalid_argument("gpus_in_use needs one value per GPU type");
  if (episode.held_ids.size() != episode.held_since_s.size() || episode.held_gpu_types.size() != episode.held_ids.size()) {
    throw std::invalid_argument("held_ids and held_gpu_types need one value per held instance");
  }
  if (episode.slots.size() != static_cast<std::size_t>(spec_.max_instances)) throw std::invalid_argument("slots needs max_instances values");
  if (episode.unit_offsets.size() != units + 1 || episode.unit_offsets.front() != 0 ||
      static_cast<std::size_t>(episode.unit_offsets.back()) != episode.unit_members.size()) {
    throw std::invalid_argument("unit_offsets must run from 0 to len(unit_members), one more than the units");
  }
  const std::size_t outcomes = engine->outcome_log().size();
  if (episode.seen < 0 || static_cast<std::size_t>(episode.seen) > outcomes || episode.window_first_outcome < 0 ||
      static_cast<std::size_t>(episode.window_first_outcome) > outcomes ||
      episode.submitted < static_cast<std::int64_t>(outcomes)) {
    throw std::invalid_argument("the episode's counters do not fit the engine's outcomes");
  }
  held_.assign(n, Held{false, 0.0, 0, 0.0, 0});
  std::int64_t last = -1;
  for (std::size_t i = 0; i < episode.held_ids.size(); ++i) {
    const std::int32_t id = episode.held_ids[i];
    if (id <= last || static_cast<std::size_t>(id) >= n) throw std::invalid_argument("held_ids must be instance ids, increasing");
    if (episode.held_gpu_types[i] < 0 || static_cast<std::size_t>(episode.held_gpu_types[i]) >= spec_.gpu_inventory.size()) {
      throw std::invalid_argument("held_gpu_types names no GPU type");
    }
    held_[static_cast<std::size_t>(id)] = Held{true, episode.held_since_s[i], episode.held_gpus[i],
                                               episode.held_usd_per_gpu_s[i], episode.held_gpu_types[i]};
    last = id;
  }
  unit_kinds_ = episode.unit_kinds;
  unit_members_.assign(units, {});
  for (std::size_t u = 0; u < units; ++u) {
    if (unit_kinds_[u] < 0 || static_cast<std::size_t>(unit_kinds_[u]) >= spec_.kinds()) throw std::invalid_argument("unit_kinds names no kind");
    for (std::int32_t m = episode.unit_offsets[u]; m < episode.unit_offsets[u + 1]; ++m) {
      const std::int32_t id = episode.unit_members[static_cast<std::size_t>(m)];
      if (id < 0 || static_cast<std::size_t>(id) >= n) throw std::invalid_argument("unit_members names no instance");
      unit_members_[u].push_back(id);
    }
    if (unit_members_[u].empty()) throw std::invalid_argument("a deployed unit has no instance");
  }
  for (const std::int32_t id : episode.slots) {
    if (id < -1 || id >= static_cast<std::int32_t>(n)) throw std::invalid_argument("slots names no instance");
  }
  engine_ = engine;
  config_models_ = episode.config_models;
  config_gpus_ = episode.config_gpus;
  gpus_in_use_ = episode.gpus_in_use;
  slots_ = episode.slots;
  static_ = episode.static_features;
  until_s_ = episode.until_s;
  window_first_outcome_ = static_cast<std::size_t>(episode.window_first_outcome);
  seen_ = static_cast<std::size_t>(episode.seen);
  last_cost_usd_ = episode.last_cost_usd;
  potential_ = episode.potential;
  events_.clear();
  numbers_ = std::move(static_cast<EpisodeNumbers&>(episode));
  over_ = static_cast<std::int64_t>(outcomes) == numbers_.submitted;
  observation_.reset();
  observation_.set_static(static_);
  fill(row);
}

std::vector<std::int32_t> ScalingMDP::unit_offsets() const {
  std::vector<std::int32_t> offsets{0};
  for (const std::vector<std::int32_t>& members : unit_members_) {
    offsets.push_back(offsets.back() + static_cast<std::int32_t>(members.size()));
  }
  return offsets;
}

std::vector<std::int32_t> ScalingMDP::unit_members() const {
  std::vector<std::int32_t> flat;
  for (const std::vector<std::int32_t>& members : unit_members_) flat.insert(flat.end(), members.begin(), members.end());
  return flat;
}

void ScalingMDP::unit_states() {
  // ScalingEnv.unit_lifecycle: the entry's state; once the entry stopped, draining until every instance stopped.
  unit_codes_.assign(unit_kinds_.size(), 0);
  counts_.assign(3 * spec_.kinds(), 0);
  for (std::size_t u = 0; u < unit_kinds_.size(); ++u) {
    Lifecycle code = engine_->instance(unit_members_[u].front()).lifecycle();
    if (code == Lifecycle::Stopped) {
      for (const std::int32_t id : unit_members_[u]) {
        if (engine_->instance(id).lifecycle() != Lifecycle::Stopped) code = Lifecycle::Draining;
      }
    }
    unit_codes_[u] = static_cast<std::uint8_t>(code);
    const int column = kind_column(code);
    if (column >= 0) ++counts_[3 * static_cast<std::size_t>(unit_kinds_[u]) + static_cast<std::size_t>(column)];
  }
}

std::size_t ScalingMDP::free_slots() const {
  std::size_t free = 0;
  for (const std::int32_t id : slots_) free += id < 0 || engine_->instance(id).lifecycle() == Lifecycle::Stopped;
  return free;
}

bool ScalingMDP::fits(const std::vector<std::uint8_t>& adds, std::size_t free) const {
  std::size_t instances = 0;
  std::vector<std::int64_t> wanted(spec_.gpu_inventory.size(), 0);
  for (std::size_t k = 0; k < adds.size(); ++k) {
    if (!adds[k]) continue;
    for (std::int32_t c = spec_.kind_offsets[k]; c < spec_.kind_offsets[k + 1]; ++c) {
      const ScalingConfig& config = spec_.configs[static_cast<std::size_t>(spec_.kind_configs[static_cast<std::size_t>(c)])];
      wanted[static_cast<std::size_t>(config.gpu_type)] += config.num_gpus;
      ++instances;
    }
  }
  if (instances > free) return false;
  for (std::size_t g = 0; g < wanted.size(); ++g) {
    if (wanted[g] > spec_.gpu_inventory[g] - gpus_in_use_[g]) return false;
  }
  return true;
}

void ScalingMDP::choices(const std::int64_t* action) {
  const std::size_t kinds = spec_.kinds();
  if (!spec_.one_unit) {
    choices_.assign(action, action + kinds);
    return;
  }
  choices_.assign(kinds, kHold);
  const std::int64_t index = action[0];
  if (index >= 1 && index <= static_cast<std::int64_t>(kinds)) {
    choices_[static_cast<std::size_t>(index - 1)] = kAdd;
  } else if (index > static_cast<std::int64_t>(kinds)) {
    choices_[static_cast<std::size_t>(index - 1) - kinds] = kRemove;
  }
}

bool ScalingMDP::is_valid(const std::int64_t* action) {
  // ScalingEnv.is_valid: one_unit's mask is exact; per_kind's also needs the joint limits.
  if (spec_.one_unit) return mask_[static_cast<std::size_t>(action[0])] != 0;
  const std::size_t kinds = spec_.kinds();
  std::int64_t serving = 0, removes = 0;
  std::vector<std::uint8_t> adds(kinds, 0);
  for (std::size_t k = 0; k < kinds; ++k) {
    if (!mask_[3 * k + static_cast<std::size_t>(action[k])]) return false;
    serving += counts_[3 * k];
    removes += action[k] == kRemove;
    adds[k] = action[k] == kAdd;
  }
  if (serving - removes < 1) return false;
  return fits(adds, free_slots());
}

void ScalingMDP::release(std::int32_t instance_id, double stopped_s) {
  Held& held = held_[static_cast<std::size_t>(instance_id)];
  if (!held.open) throw std::logic_error("instance " + std::to_string(instance_id) + " stopped twice");
  gpus_in_use_[static_cast<std::size_t>(held.gpu_type)] -= held.gpus;
  numbers_.cost_closed_usd += (stopped_s - held.since_s) * static_cast<double>(held.gpus) * held.usd_per_gpu_s;
  held.open = false;
  events_.push_back(ScalingEvent{-1, instance_id, stopped_s});
}

void ScalingMDP::drain(std::int32_t instance_id) {
  Instance& instance = engine_->instance_mut(instance_id);
  if (instance.lifecycle() == Lifecycle::Starting) {
    engine_->set_lifecycle(instance_id, Lifecycle::Stopped);
    release(instance_id, engine_->now_s());
    return;
  }
  engine_->set_lifecycle(instance_id, Lifecycle::Draining);
  if (instance.num_requests() == 0 && !instance.busy) {
    engine_->set_lifecycle(instance_id, Lifecycle::Stopped);
    release(instance_id, engine_->now_s());
  }
}

void ScalingMDP::deploy_unit(std::size_t kind) {
  const double now_s = engine_->now_s();
  std::vector<std::int32_t> ids;
  for (std::int32_t c = spec_.kind_offsets[kind]; c < spec_.kind_offsets[kind + 1]; ++c) {
    const std::size_t index = static_cast<std::size_t>(spec_.kind_configs[static_cast<std::size_t>(c)]);
    const ScalingConfig& config = spec_.configs[index];
    InstanceSettings settings = config.settings;
    settings.model_index = config_models_[index];
    settings.gpu_index = config_gpus_[index];
    const std::int32_t id = engine_->add_instance(settings, config.latency);
    if (static_cast<std::size_t>(id) != held_.size()) throw std::logic_error("the engine numbered an instance out of order");
    gpus_in_use_[static_cast<std::size_t>(config.gpu_type)] += config.num_gpus;
    held_.push_back(Held{true, now_s, config.num_gpus, config.usd_per_gpu_s, config.gpu_type});
    events_.push_back(ScalingEvent{static_cast<std::int32_t>(index), id, now_s});
    static_.insert(static_.end(), config.static_features.begin(), config.static_features.end());
    engine_->start_at(id, now_s + config.load_s + spec_.provisioning_s);
    ids.push_back(id);
  }
  if (spec_.combos) engine_->add_combo(ids.front(), std::vector<std::int32_t>(ids.begin() + 1, ids.end()), spec_.combo_basic_rr);
  std::size_t next = 0;  // the unit's instances take the free slots in order
  for (std::size_t slot = 0; slot < slots_.size() && next < ids.size(); ++slot) {
    const std::int32_t id = slots_[slot];
    if (id < 0 || engine_->instance(id).lifecycle() == Lifecycle::Stopped) slots_[slot] = ids[next++];
  }
  unit_kinds_.push_back(static_cast<std::int32_t>(kind));
  unit_members_.push_back(std::move(ids));
}

void ScalingMDP::push_units() {
  std::vector<std::int32_t> offsets{0}, members;
  std::vector<double> weights;
  for (std::size_t u = 0; u < unit_kinds_.size(); ++u) {
    members.insert(members.end(), unit_members_[u].begin(), unit_members_[u].end());
    offsets.push_back(static_cast<std::int32_t>(members.size()));
    weights.push_back(spec_.kind_weights[static_cast<std::size_t>(unit_kinds_[u])]);
  }
  engine_->set_units(std::move(offsets), std::move(members), std::move(weights));
}

void ScalingMDP::apply() {
  // ScalingEnv.apply: kind by kind, drain the most recently added unit serving at the start, or deploy one.
  const std::vector<std::uint8_t> codes = unit_codes_;
  const std::size_t units_before = unit_kinds_.size();
  bool changed = false;
  for (std::size_t k = 0; k < choices_.size(); ++k) {
    if (choices_[k] == kRemove) {
      std::size_t u = units_before;
      while (u > 0 && !(unit_kinds_[u - 1] == static_cast<std::int32_t>(k) &&
                        codes[u - 1] == static_cast<std::uint8_t>(Lifecycle::Serving))) {
        --u;
      }
      if (u == 0) throw std::logic_error("no serving unit of kind " + std::to_string(k) + " to remove after validation");
      for (const std::int32_t id : unit_members_[u - 1]) {
        const Lifecycle lifecycle = engine_->instance(id).lifecycle();
        if (lifecycle == Lifecycle::Serving || lifecycle == Lifecycle::Starting) drain(id);
      }
    } else if (choices_[k] == kAdd) {
      deploy_unit(k);
      changed = true;
    }
  }
  observation_.set_static(static_);
  unit_states();
  std::size_t kept = 0;  // the units that stopped leave ScalingEnv._deployed
  for (std::size_t u = 0; u < unit_kinds_.size(); ++u) {
    if (unit_codes_[u] == static_cast<std::uint8_t>(Lifecycle::Stopped)) continue;
    if (kept != u) {
      unit_kinds_[kept] = unit_kinds_[u];
      unit_members_[kept] = std::move(unit_members_[u]);
    }
    ++kept;
  }
  changed = changed || kept != unit_kinds_.size();
  unit_kinds_.resize(kept);
  unit_members_.resize(kept);
  if (changed) push_units();  // CompiledCluster._push_units at the next advance
  until_s_ = engine_->now_s() + spec_.window_s;
}

double ScalingMDP::cost_usd() const {
  const double now_s = engine_->now_s();
  double open_usd = 0.0;
  for (const Held& held : held_) {
    if (held.open) open_usd += (now_s - held.since_s) * static_cast<double>(held.gpus) * held.usd_per_gpu_s;
  }
  return numbers_.cost_closed_usd + open_usd;
}

double ScalingMDP::cost_rate_usd_per_s() const {
  double rate = 0.0;
  for (const Held& held : held_) {
    if (held.open) rate += static_cast<double>(held.gpus) * held.usd_per_gpu_s;
  }
  return rate;
}

double ScalingMDP::potential() const {
  if (spec_.waiting_potential == 0.0) return 0.0;
  std::size_t waiting = 0;
  for (std::size_t id = 0; id < engine_->num_instances(); ++id) {
    waiting += engine_->instance(static_cast<std::int32_t>(id)).waiting.size();
  }
  return -spec_.waiting_potential * static_cast<double>(waiting);
}

ScalingStepResult ScalingMDP::step(const std::int64_t* action, const ScalingRow& row) {
  if (engine_ == nullptr) throw std::logic_error("step() before the env was reset");
  if (over_) throw std::logic_error("the episode has ended; reset it before step()");
  const bool valid = is_valid(action);
  if (valid) {
    choices(action);
  } else {  // ScalingEnv.fallback_action: hold every kind
    choices_.assign(spec_.kinds(), kHold);
  }
  apply();
  // ScalingEnv.advance: run to the window's end; the instances that stopped free their GPUs.
  window_first_outcome_ = engine_->outcome_log().size();
  const Decision decision = engine_->advance(until_s_);
  if (decision.kind != DecisionKind::None) {
    throw std::logic_error("the engine stopped for a decision or a Python callback: not a Scaling-v0 window");
  }
  for (const auto& [instance_id, stopped_s] : engine_->take_stops()) release(instance_id, stopped_s);
  // The requests finished during the step: the reward and ServingEnv.step_info.
  const std::size_t first = seen_;
  const bool cost = spec_.reward == static_cast<std::int32_t>(ScalingReward::Cost);
  ScalingStepResult result{numbers_.close_interval(
      *engine_, seen_, cost ? IntervalReward::Latency : static_cast<IntervalReward>(spec_.reward), spec_.tier_weights,
      spec_.e2e_scale_s)};
  result.cost_usd = cost_usd();
  if (cost) {  // CostReward: SLO-meeting output tokens / 1000 − usd_weight · dollars spent + the queue's shaping
    const OutcomeLog& log = engine_->outcome_log();
    std::int64_t good_tokens = 0;
    for (std::size_t o = first; o < log.size(); ++o) {
      if (numbers_.meets_slo(*engine_, o)) good_tokens += engine_->requests().output_tokens[log.rows[o]];
    }
    const double spent = result.cost_usd - last_cost_usd_;
    last_cost_usd_ = result.cost_usd;
    const double potential_now = potential();
    const double shaping = potential_now - potential_;
    potential_ = potential_now;
    result.reward = static_cast<double>(good_tokens) / 1000.0 - spec_.usd_weight * spent + shaping;
  }
  if (!valid) result.reward -= spec_.invalid_action_penalty;
  result.invalid_action = !valid;
  over_ = result.done;
  fill(row);
  return result;
}

void ScalingMDP::fill(const ScalingRow& row) {
  unit_states();
  // ScalingEnv.compute_action_mask.
  const std::size_t kinds = spec_.kinds();
  const std::size_t free = free_slots();
  std::int64_t serving = 0;
  for (std::size_t k = 0; k < kinds; ++k) serving += counts_[3 * k];
  mask_.assign(mask_size(), 0);
  std::vector<std::uint8_t> one(kinds, 0);
  for (std::size_t k = 0; k < kinds; ++k) {
    const bool remove = serving >= 2 && counts_[3 * k] > 0;
    one[k] = 1;
    const bool add = fits(one, free);
    one[k] = 0;
    if (spec_.one_unit) {
      mask_[1 + k] = add;
      mask_[1 + kinds + k] = remove;
    } else {
      mask_[3 * k + kRemove] = remove;
      mask_[3 * k + kHold] = 1;
      mask_[3 * k + kAdd] = add;
    }
  }
  if (spec_.one_unit) mask_[0] = 1;
  for (std::size_t p = 0; p < mask_.size(); ++p) row.mask[p] = static_cast<float>(mask_[p]);
  // InstanceFeatures.fill over the env's slots (no routed request).
  observation_.fill(*engine_, slots_.data(), slots_.size(), -1, row.instances);
  // ScalingEnv.context through ObservationSchema.encode_context.
  std::vector<double> values(spec_.context_k.size(), 0.0);
  const std::size_t arrived = engine_->arrived();
  values[spec_.ctx_arrivals_per_s] =
      static_cast<double>(numbers_.recent_arrivals(arrived, engine_->now_s(), spec_.window_s)) / spec_.window_s;
  const InstanceArrays& arrays = *engine_->arrays();
  std::int64_t queues[3] = {0, 0, 0};
  for (std::size_t id = 0; id < engine_->num_instances(); ++id) {
    for (std::int32_t q = 0; q < 3; ++q) queues[q] += arrays.get(static_cast<std::int32_t>(id), kWaiting + q);
  }
  values[spec_.ctx_waiting] = static_cast<double>(queues[0]);
  values[spec_.ctx_running] = static_cast<double>(queues[1]);
  values[spec_.ctx_swapped] = static_cast<double>(queues[2]);
  values[spec_.ctx_cost_rate] = cost_rate_usd_per_s() * 3600.0;
  const OutcomeLog& log = engine_->outcome_log();
  const std::size_t finished = log.size() - window_first_outcome_;
  std::size_t met = 0;
  for (std::size_t o = window_first_outcome_; o < log.size(); ++o) met += numbers_.meets_slo(*engine_, o);
  values[spec_.ctx_slo_attainment] = finished > 0 ? static_cast<double>(met) / static_cast<double>(finished) : 0.0;
  values[spec_.ctx_finished] = static_cast<double>(finished);
  values[spec_.ctx_arrived] = static_cast<double>(arrived);
  for (std::size_t k = 0; k < kinds; ++k) {
    values[spec_.ctx_serving_units[k]] = static_cast<double>(counts_[3 * k]);
    values[spec_.ctx_starting_units[k]] = static_cast<double>(counts_[3 * k + 1]);
    values[spec_.ctx_draining_units[k]] = static_cast<double>(counts_[3 * k + 2]);
  }
  for (std::size_t p = 0; p < values.size(); ++p) row.context[p] = encode_column(values[p], spec_.context_k[p], spec_.context_c[p]);
}

}  // namespace servegym_core
