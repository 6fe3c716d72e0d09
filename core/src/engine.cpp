#include "engine.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

#include "pipeline.hpp"

namespace servegym_core {

Engine::Engine(RouterSpec router, bool record_token_curves, std::vector<std::string> model_names, bool track_arrays,
               bool external_phase_decisions)
    : router_spec_(std::move(router)),
      model_names_(std::move(model_names)),
      requests_(record_token_curves),
      external_router_(router_spec_.name == "external"),
      cascade_router_(router_spec_.name == "cascade"),
      units_router_(router_spec_.name == "units"),
      external_phase_decisions_(external_phase_decisions),
      arrays_(track_arrays ? std::make_unique<InstanceArrays>() : nullptr) {
  if (!external_router_ && !cascade_router_) make_router(router_spec_);  // an unknown name fails here
}

void Engine::set_cascade(std::vector<std::int32_t> stage_models, double judge_latency_s) {
  if (!cascade_router_ || cascade_ || submitted_) {
    throw std::logic_error("Engine.set_cascade: once, before submit, with the router 'cascade'");
  }
  cascade_ = std::make_unique<Cascade>(std::move(stage_models), judge_latency_s, model_names_);
}

Cascade& Engine::cascade() {
  if (!cascade_) throw std::logic_error("this engine has no cascade (router 'cascade' and set_cascade)");
  return *cascade_;
}

std::int32_t Engine::add_instance(const InstanceSettings& settings, const LatencyEvaluator& latency) {
  if (settings.model_index < 0 || static_cast<std::size_t>(settings.model_index) >= model_names_.size()) {
    throw std::invalid_argument("model_index " + std::to_string(settings.model_index) + " names no model");
  }
  const auto instance_id = static_cast<std::int32_t>(instances_.size());
  if (settings.pipeline_depth > 1) {
    instances_.push_back(
        std::make_unique<PipelinedInstance>(instance_id, settings, latency, events_, requests_, *this));
  } else {
    instances_.push_back(std::make_unique<Instance>(instance_id, settings, latency, events_, requests_, *this));
  }
  if (arrays_) instances_.back()->track(*arrays_);
  return instance_id;
}

void Engine::start_at(std::int32_t instance_id, double time_s) {
  instance_at(instance_id).set_lifecycle(Lifecycle::Starting);
  events_.schedule(time_s, EventKind::Started, instance_id, 0);
}

void Engine::set_lifecycle(std::int32_t instance_id, Lifecycle lifecycle) {
  instance_at(instance_id).set_lifecycle(lifecycle);
}

std::vector<std::pair<std::int32_t, double>> Engine::take_stops() {
  std::vector<std::pair<std::int32_t, double>> stops;
  stops.swap(stops_);
  return stops;
}

void Engine::on_idle(std::int32_t instance_id) {
  Instance& instance = instance_at(instance_id);
  if (instance.lifecycle() == Lifecycle::Draining && instance.num_requests() == 0) {
    instance.set_lifecycle(Lifecycle::Stopped);
    stops_.emplace_back(instance_id, events_.now_s);
  }
}

const Instance& Engine::instance(std::int32_t instance_id) const {
  if (instance_id < 0 || static_cast<std::size_t>(instance_id) >= instances_.size()) {
    throw std::out_of_range("unknown instance " + std::to_string(instance_id));
  }
  return *instances_[static_cast<std::size_t>(instance_id)];
}

void Engine::submit(const std::vector<std::int64_t>& request_id, const std::vector<double>& arrival_s,
                    const std::vector<std::int64_t>& prompt_tokens, const std::vector<std::int64_t>& output_tokens,
                    const std::vector<std::int64_t>& reasoning_tokens, const std::vector<std::int64_t>& tier,
                    const std::vector<std::int32_t>& model_index, std::vector<std::int32_t> session_targets) {
  if (submitted_) throw std::logic_error("Engine.submit: this engine already has its requests");
  const std::size_t n = request_id.size();
  for (const std::size_t size : {arrival_s.size(), prompt_tokens.size(), output_tokens.size(),
                                 reasoning_tokens.size(), tier.size(), model_index.size()}) {
    if (size != n) throw std::invalid_argument("Engine.submit: the request columns differ in length");
  }
  requests_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (model_index[i] >= static_cast<std::int32_t>(model_names_.size())) {
      throw std::invalid_argument("request " + std::to_string(request_id[i]) + ": model_index " +
                                  std::to_string(model_index[i]) + " names no model");
    }
    requests_.add(RequestRow{request_id[i], arrival_s[i], prompt_tokens[i], output_tokens[i], reasoning_tokens[i],
                             tier[i], model_index[i]});
  }
  submitted_rows_ = n;
  router_spec_.session_targets = std::move(session_targets);
  if (cascade_router_ && !cascade_) throw std::logic_error("Engine.submit: the router 'cascade' needs set_cascade first");
  if (!external_router_ && !cascade_router_) router_ = make_router(router_spec_);
  submitted_ = true;
  schedule_next_arrival();
}

void Engine::set_block_keys(const std::vector<std::int64_t>& block_tokens, const std::vector<std::int64_t>& offsets,
                            const std::vector<std::int64_t>& keys) {
  const std::size_t n = requests_.size();
  if (!submitted_ || next_arrival_ > 1 || !requests_.block_keys.empty()) {
    throw std::logic_error("Engine.set_block_keys: once, after submit and before run");
  }
  if (block_tokens.size() != n || offsets.size() != n + 1 || offsets.front() != 0 ||
      offsets.back() != static_cast<std::int64_t>(keys.size())) {
    throw std::invalid_argument("Engine.set_block_keys: " + std::to_string(block_tokens.size()) + " block sizes and " +
                                std::to_string(offsets.size()) + " offsets for " + std::to_string(n) +
                                " requests and " + std::to_string(keys.size()) + " keys");
  }
  requests_.block_keys.reserve(keys.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (offsets[i + 1] < offsets[i]) throw std::invalid_argument("Engine.set_block_keys: offsets decrease");
    if (block_tokens[i] == 0) continue;
    requests_.set_block_keys(static_cast<Req>(i), keys.data() + offsets[i],
                             static_cast<std::int32_t>(offsets[i + 1] - offsets[i]), block_tokens[i]);
  }
}

void Engine::run() {
  if (external_router_) throw std::logic_error("Engine.run needs an internal router; use advance with an external one");
  advance(std::numeric_limits<double>::infinity());
  const std::size_t pending = requests_.size() - redispatched_rows_ - outcomes_.size();
  if (pending != 0) throw std::runtime_error(std::to_string(pending) + " requests neither completed nor rejected");
}

Decision Engine::next_decision() {
  const Decision decision = decisions_.front();
  if (decision.kind == DecisionKind::Completion) decisions_.pop_front();  // handled in Python at once
  return decision;
}

Decision Engine::advance(double until_s) {
  if (!decisions_.empty()) return next_decision();
  while (!events_.empty() && events_.peek_time_s() <= until_s) {
    const Event event = events_.pop();
    if (event.kind == EventKind::PythonCallback) return Decision{DecisionKind::Callback, static_cast<Req>(event.b), -1};
    step(event);
    if (!decisions_.empty()) return next_decision();
  }
  if (until_s != std::numeric_limits<double>::infinity() && until_s > events_.now_s) events_.now_s = until_s;
  return Decision{};
}

void Engine::step(const Event& event) {
  switch (event.kind) {
    case EventKind::Arrival:
      schedule_next_arrival();
      admit(static_cast<Req>(event.b));
      break;
    case EventKind::Boundary:
      instances_[static_cast<std::size_t>(event.a)]->on_boundary(event.b);
      break;
    case EventKind::FrontendEnqueue:
      instances_[static_cast<std::size_t>(event.a)]->enqueue(static_cast<Req>(event.b));
      break;
    case EventKind::Wake:
      instances_[static_cast<std::size_t>(event.a)]->on_wake(event.b);
      break;
    case EventKind::MicrobatchEnd:
      instances_[static_cast<std::size_t>(event.a)]->on_microbatch_end(event.b);
      break;
    case EventKind::TransferDone:
      instances_[static_cast<std::size_t>(event.a)]->accept_transferred(static_cast<Req>(event.b));
      break;
    case EventKind::AddedArrival:
      admit(static_cast<Req>(event.b));
      break;
    case EventKind::Judge:
      on_judged(event.b);
      break;
    case EventKind::MigrationStage:
      on_migration_stage(event.b);
      break;
    case EventKind::MigrationHandOff: {
      const Migration& migration = migrations_[static_cast<std::size_t>(event.b)];
      ++migrations_done;
      instance_at(migration.target).accept_transferred(migration.r);
      break;
    }
    case EventKind::GateDeadline: {
      double deadline = 0.0;
      std::memcpy(&deadline, &event.b, sizeof deadline);
      instances_[static_cast<std::size_t>(event.a)]->on_gate_deadline(deadline);
      break;
    }
    case EventKind::PythonCallback:
      throw std::logic_error("a Python callback reached the engine's loop");
    case EventKind::Started: {
      Instance& started = *instances_[static_cast<std::size_t>(event.a)];
      if (started.lifecycle() == Lifecycle::Starting) started.set_lifecycle(Lifecycle::Serving);
      break;
    }
  }
}

void Engine::set_headroom_fractions(std::vector<double> fractions) {
  if (!router_) throw std::logic_error("Engine.set_headroom_fractions: no router yet (call submit first)");
  router_->set_headroom_fractions(std::move(fractions));
}

void Engine::set_units(std::vector<std::int32_t> offsets, std::vector<std::int32_t> members,
                       std::vector<double> weights) {
  if (!router_) throw std::logic_error("Engine.set_units: no router yet (call submit first)");
  if (offsets.size() != weights.size() + 1 || offsets.front() != 0 ||
      offsets.back() != static_cast<std::int32_t>(members.size())) {
    throw std::invalid_argument("units: " + std::to_string(offsets.size()) + " offsets for " +
                                std::to_string(weights.size()) + " units of " + std::to_string(members.size()) +
                                " instances");
  }
  for (std::size_t u = 0; u < weights.size(); ++u) {
    if (offsets[u + 1] <= offsets[u]) throw std::invalid_argument("unit " + std::to_string(u) + " has no instance");
    if (!(weights[u] > 0.0 && weights[u] < std::numeric_limits<double>::infinity())) {
      throw std::invalid_argument("unit " + std::to_string(u) + ": routing weight " + std::to_string(weights[u]) +
                                  " is not positive and finite");
    }
  }
  for (const std::int32_t id : members) instance_at(id);
  router_->set_units(std::move(offsets), std::move(members), std::move(weights));
}

std::vector<std::int64_t> Engine::migration_candidates(const std::vector<std::int32_t>& ids,
                                                       const std::vector<std::int64_t>& excluded) const {
  std::vector<std::int64_t> table;
  table.reserve(4 * ids.size());
  const RequestTable& t = requests_;
  for (const std::int32_t id : ids) {
    const Req r = instance(id).migration_candidate(excluded);
    if (r < 0) {
      table.insert(table.end(), {-1, -1, -1, -1});
    } else {
      table.insert(table.end(), {t.residency[r] == Residency::Queued ? 1 : 0, t.prefill_target_tokens(r),
                                 t.kv_tokens[r], t.tier[r]});
    }
  }
  return table;
}

Decision Engine::take_decision(DecisionKind kind, Req r) {
  if (decisions_.empty() || decisions_.front().kind != kind || decisions_.front().row != r || r < 0) {
    const std::string id = r >= 0 && static_cast<std::size_t>(r) < requests_.size()
                               ? std::to_string(requests_.request_id[r]) : "row " + std::to_string(r);
    throw std::invalid_argument("request " + id + " is not waiting for a " +
                                (kind == DecisionKind::Route ? "route" : "phase") + " decision");
  }
  const Decision decision = decisions_.front();
  decisions_.pop_front();
  return decision;
}

Instance& Engine::instance_at(std::int32_t instance_id) {
  if (instance_id < 0 || static_cast<std::size_t>(instance_id) >= instances_.size()) {
    throw std::invalid_argument("unknown instance " + std::to_string(instance_id));
  }
  return *instances_[static_cast<std::size_t>(instance_id)];
}

void Engine::dispatch_decision(Req r, std::int32_t instance_id) {
  instance_at(instance_id);
  take_decision(DecisionKind::Route, r);
  dispatch(r, instance_id);
}

void Engine::place_answering(Req r, std::int32_t instance_id) {
  Instance& target = instance_at(instance_id);
  const Decision decision = take_decision(DecisionKind::Phase, r);
  if (instance_id == decision.instance_id) {
    if (!target.accept_running(r)) target.accept_transferred(r);
    return;
  }
  transfer(r, instance_at(decision.instance_id), instance_id);
}

void Engine::transfer(Req r, const Instance& source, std::int32_t target_id) {
  const Instance& target = instance_at(target_id);
  requests_.residency[r] = Residency::Moving;
  ++requests_.num_migrations[r];
  const double delay_s = transfer_s(source, target, std::max<std::int64_t>(requests_.kv_tokens[r], 1));
  events_.schedule(events_.now_s + delay_s, EventKind::TransferDone, target_id, r);
}

double Engine::transfer_s(const Instance& source, const Instance& target, std::int64_t tokens) const {
  const InstanceSettings& a = source.settings;
  const InstanceSettings& b = target.settings;
  const double link_gbps = a.gpu_index == b.gpu_index ? std::min(a.intra_node_link_gbps, b.intra_node_link_gbps)
                                                      : std::min(a.host_link_gbps, b.host_link_gbps);
  // hardware.latency.kv_transfer_time_s with no fixed latency: 0.0 + tokens x bytes / (GB/s x 1e9).
  return 0.0 + static_cast<double>(tokens) * a.kv_bytes_per_token / (link_gbps * 1e9);
}

bool Engine::migrate(Req r, std::int32_t target_id) {
  RequestTable& t = requests_;
  Instance& target = instance_at(target_id);
  Instance& source = instance_at(t.instance_id[r]);
  if (t.residency[r] == Residency::Queued &&
      std::find(source.waiting.begin(), source.waiting.end(), r) != source.waiting.end()) {
    source.remove(r);
    ++t.num_migrations[r];
    ++migrations_started;
    ++migrations_done;
    target.enqueue(r);
    return true;
  }
  if (t.residency[r] != Residency::Running || !t.decodes_here(r)) {
    static const char* const names[] = {"QUEUED", "RUNNING", "SWAPPED", "MOVING"};
    throw std::invalid_argument("request " + std::to_string(t.request_id[r]) +
                                " is not a running decode request (it is " +
                                names[static_cast<int>(t.residency[r])] + ")");
  }
  source.sync();
  const std::int64_t need = ceil_div(t.kv_tokens[r] + 1, target.kv.block_size);
  if (!target.kv.can_admit(need)) return false;
  ++migrations_started;
  migrations_.push_back(Migration{r, source.instance_id, target_id, 0, 0, 1});
  migration_stage(static_cast<std::int64_t>(migrations_.size()) - 1);
  return true;
}

void Engine::migration_stage(std::int64_t m) {
  Migration& migration = migrations_[static_cast<std::size_t>(m)];
  migration.to_copy_tokens = requests_.kv_tokens[migration.r] - migration.copied_tokens;
  const double delay_s = transfer_s(instance_at(migration.source), instance_at(migration.target),
                                    std::max<std::int64_t>(migration.to_copy_tokens, 1));
  events_.schedule(events_.now_s + delay_s, EventKind::MigrationStage, -1, m);
}

void Engine::on_migration_stage(std::int64_t m) {
  Migration& migration = migrations_[static_cast<std::size_t>(m)];
  const Req r = migration.r;
  if (requests_.instance_id[r] != migration.source || requests_.residency[r] != Residency::Running) {
    ++migrations_aborted;
    return;
  }
  Instance& source = instance_at(migration.source);
  source.sync();
  const std::int64_t copied = migration.copied_tokens + migration.to_copy_tokens;
  const std::int64_t left_blocks = ceil_div(requests_.kv_tokens[r] - copied, instance_at(migration.target).kv.block_size);
  migration.copied_tokens = copied;
  if (left_blocks <= migration_.last_stage_max_blocks || migration.stage >= migration_.max_stages) {
    source.detach_at_boundary(r, m);
  } else {
    ++migration.stage;
    migration_stage(m);
  }
}

void Engine::on_detached(std::int64_t m, Req r) {
  const Migration& migration = migrations_[static_cast<std::size_t>(m)];
  ++requests_.num_migrations[r];
  const double delay_s = transfer_s(instance_at(migration.source), instance_at(migration.target),
                                    std::max<std::int64_t>(requests_.kv_tokens[r] - migration.copied_tokens, 1));
  events_.schedule(events_.now_s + delay_s, EventKind::MigrationHandOff, -1, m);
}

void Engine::on_detach_gone(std::int64_t) { ++migrations_aborted; }

std::pair<std::int64_t, std::int64_t> Engine::request_tokens(Req r) const {
  if (r < 0 || static_cast<std::size_t>(r) >= requests_.size()) {
    throw std::invalid_argument("request row " + std::to_string(r) + " is not in the engine");
  }
  return {requests_.generated_tokens[r], requests_.kv_tokens[r]};
}

void Engine::schedule_next_arrival() {
  if (next_arrival_ >= submitted_rows_) return;  // rows added later (redispatch) do not arrive
  const auto r = static_cast<Req>(next_arrival_++);
  const double arrival = requests_.arrival_s[r];
  const double now = events_.now_s;
  events_.schedule(now > arrival ? now : arrival, EventKind::Arrival, -1, r);  // Python's max(arrival, now)
}

void Engine::admit(Req r) {
  ++arrived_;
  if (external_router_) {
    decisions_.push_back(Decision{DecisionKind::Route, r, -1});
    return;
  }
  if (cascade_) {  // CascadeRouter.route
    dispatch(r, cascade_->instance_for(instances_, cascade_->entry_stage()));
    return;
  }
  const std::int32_t target = router_->route(instances_, requests_, r);
  const std::int32_t model = requests_.model_index[r];
  const Instance& chosen = *instances_[static_cast<std::size_t>(target)];
  if (units_router_) {  // the entry a unit router picks serves; Cluster.dispatch refuses a role or model it cannot take
    if (chosen.settings.role == 2) {
      throw std::invalid_argument("instance " + std::to_string(target) + " is decode-only and cannot take new requests");
    }
    if (model >= 0 && chosen.settings.model_index != model) {
      throw std::invalid_argument("instance " + std::to_string(target) + " serves " +
                                  model_names_[static_cast<std::size_t>(chosen.settings.model_index)] +
                                  ", request needs " + model_names_[static_cast<std::size_t>(model)]);
    }
    if (place_in_combo(r, target)) return;
  }
  dispatch(r, target);
}

bool Engine::place_in_combo(Req r, std::int32_t entry_id) {
  // ComboCluster.dispatch with the opportunistic instance scheduler (Cauchy §3.4.2): a new request
  // sent to a PD combo's entry runs wholly in place on the first idle serving member, its decode
  // instances first, then the entry (Cluster.dispatch_in_place: no frontend time, no hand-off).
  const std::int32_t index = static_cast<std::size_t>(entry_id) < combo_of_.size() ? combo_of_[entry_id] : -1;
  if (index < 0) return false;
  const Combo& combo = combos_[static_cast<std::size_t>(index)];
  if (combo.basic_rr || combo.entry != entry_id || combo.decode_ids.empty()) return false;  // empty: an aggregated combo
  const std::size_t members = combo.decode_ids.size() + 1;  // the decode instances, then the entry
  for (std::size_t m = 0; m < members; ++m) {
    Instance& member = instance_at(m + 1 < members ? combo.decode_ids[m] : entry_id);
    if (member.lifecycle() == Lifecycle::Serving && member.num_requests() == 0 && !member.busy) {
      ++in_place_dispatches;
      requests_.pd_handoff[r] = 0;
      member.enqueue(r);
      return true;
    }
  }
  return false;
}

void Engine::add_combo(std::int32_t entry_id, std::vector<std::int32_t> decode_ids, bool basic_rr) {
  const auto index = static_cast<std::int32_t>(combos_.size());
  combo_of_.resize(instances_.size(), -1);
  for (const std::int32_t id : decode_ids) combo_of_.at(static_cast<std::size_t>(id)) = index;
  combo_of_.at(static_cast<std::size_t>(entry_id)) = index;
  combos_.push_back(Combo{entry_id, std::move(decode_ids), basic_rr});
}

void Engine::on_prefill_done(std::int32_t instance_id, Req r) {
  // ComboCluster._route_prefilled, then Cluster.on_prefill_done.
  Instance& prefill = instance_at(instance_id);
  const std::int32_t index = static_cast<std::size_t>(instance_id) < combo_of_.size() ? combo_of_[instance_id] : -1;
  if (index < 0) throw std::logic_error("a PD hand-off from instance " + std::to_string(instance_id) + ", in no combo");
  Combo& combo = combos_[static_cast<std::size_t>(index)];
  std::vector<std::int32_t> live;
  for (const std::int32_t id : combo.decode_ids) {
    const Lifecycle lifecycle = instance_at(id).lifecycle();
    if (lifecycle == Lifecycle::Serving || lifecycle == Lifecycle::Draining) live.push_back(id);
  }
  std::int32_t target = instance_id;
  if (!live.empty() && combo.basic_rr) {
    target = live[static_cast<std::size_t>(combo.turn % static_cast<std::int64_t>(live.size()))];
    ++combo.turn;
  } else if (!live.empty()) {
    target = live.front();
    for (const std::int32_t id : live) {
      const std::size_t load = instance_at(id).num_requests();
      const std::size_t best = instance_at(target).num_requests();
      if (load < best || (load == best && id < target)) target = id;
    }
  }
  prefill.remove(r);
  requests_.pd_handoff[r] = 0;
  transfer(r, prefill, target);
}

void Engine::dispatch_in_place(Req r, std::int32_t instance_id) {
  Instance& target = instance_at(instance_id);
  take_decision(DecisionKind::Route, r);
  requests_.pd_handoff[r] = 0;
  target.enqueue(r);
}

void Engine::dispatch(Req r, std::int32_t instance_id) {
  Instance& target = *instances_.at(static_cast<std::size_t>(instance_id));
  requests_.pd_handoff[r] = target.settings.role == 1 && !combos_.empty();  // a prefill instance of a combo
  const std::int32_t model = requests_.model_index[r];
  if (model >= 0 && model != target.settings.model_index) {
    throw std::invalid_argument("instance " + std::to_string(instance_id) + " serves " +
                                model_names_[static_cast<std::size_t>(target.settings.model_index)] +
                                ", request needs " + model_names_[static_cast<std::size_t>(model)]);
  }
  const double frontend_s = target.settings.frontend_s;
  if (frontend_s != 0.0) {
    events_.schedule(events_.now_s + frontend_s, EventKind::FrontendEnqueue, instance_id, r);
  } else {
    target.enqueue(r);
  }
}

OutcomeTable Engine::outcome_table(std::size_t first, std::size_t count) const {
  first = std::min(first, outcomes_.size());
  const auto from = static_cast<std::ptrdiff_t>(first);
  const auto to = static_cast<std::ptrdiff_t>(first + std::min(count, outcomes_.size() - first));
  std::vector<Req> rows(outcomes_.rows.begin() + from, outcomes_.rows.begin() + to);
  std::vector<double> finish_s(outcomes_.finish_s.begin() + from, outcomes_.finish_s.begin() + to);
  std::vector<std::uint8_t> reasons(outcomes_.reasons.begin() + from, outcomes_.reasons.begin() + to);
  RequestTable gathered = requests_.gather(rows);
  std::vector<double> quality(outcomes_.quality.begin() + from, outcomes_.quality.begin() + to);
  return OutcomeTable{std::move(rows), std::move(gathered), std::move(finish_s), std::move(reasons),
                      std::move(quality)};
}

void Engine::on_complete(std::int32_t instance_id, Req r) {
  if (completion_hook_) {
    decisions_.push_back(Decision{DecisionKind::Completion, r, instance_id});
    return;
  }
  if (cascade_) {
    cascade_complete(instance_id, r);
    return;
  }
  outcomes_.add(r, events_.now_s, RejectReason::None);
}

void Engine::cascade_complete(std::int32_t instance_id, Req r) {
  Cascade& cascade = *cascade_;
  const std::int32_t stage = cascade.stage_of(instance_at(instance_id));
  const double score = cascade.score(requests_, r, stage);
  if (stage == cascade.stages() - 1) {  // the last stage accepts without a judge
    outcomes_.add(r, events_.now_s, RejectReason::None, score);
    return;
  }
  const double signal = cascade.signal(requests_, r, stage);
  const std::int64_t j = cascade.add_judgement(Judgement{r, stage, score, signal});
  events_.schedule(events_.now_s + cascade.judge_latency_s(), EventKind::Judge, -1, j);
}

void Engine::on_judged(std::int64_t j) {
  const Judgement judged = cascade_->judgement(j);
  if (judged.signal >= cascade_->threshold(judged.stage)) {
    outcomes_.add(judged.r, events_.now_s, RejectReason::None, judged.score);
    return;
  }
  const RequestTable& t = requests_;
  const Req r = judged.r;
  redispatch(r, cascade_->instance_for(instances_, judged.stage + 1), t.first_scheduled_s[r], t.preempted_s[r],
             t.num_preemptions[r], t.num_migrations[r]);
}

Req Engine::redispatch(Req r, std::int32_t instance_id, double first_scheduled_s, double preempted_s,
                       std::int32_t num_preemptions, std::int32_t num_migrations) {
  RequestTable& t = requests_;
  if (r < 0 || static_cast<std::size_t>(r) >= t.size()) throw std::invalid_argument("unknown request row");
  if (t.has_block_keys(r)) throw std::invalid_argument("redispatching a request with block hashes is not ported");
  instance_at(instance_id);
  const Req row = t.add(RequestRow{t.request_id[r], t.arrival_s[r], t.prompt_tokens[r], t.output_tokens[r],
                                   t.reasoning_tokens[r], t.tier[r], t.model_index[r]});
  t.first_scheduled_s[row] = first_scheduled_s;
  t.preempted_s[row] = preempted_s;
  t.num_preemptions[row] = num_preemptions;
  t.num_migrations[row] = num_migrations;
  ++redispatched_rows_;
  if (cascade_) cascade_->forwarded(row, r);
  dispatch(row, instance_id);
  return row;
}

Req Engine::add_arrival(const RequestRow& row) {
  if (!submitted_) throw std::logic_error("Engine.add_arrival: submit the workload first");
  if (row.model_index >= static_cast<std::int32_t>(model_names_.size())) {
    throw std::invalid_argument("request " + std::to_string(row.request_id) + ": model_index names no model");
  }
  const Req r = requests_.add(row);
  const double now = events_.now_s;
  events_.schedule(now > row.arrival_s ? now : row.arrival_s, EventKind::AddedArrival, -1, r);  // max(arrival, now)
  return r;
}

OutcomeTable Engine::outcome_of(Req r, double finish_s) const {
  const std::vector<Req> rows{r};
  return OutcomeTable{rows, requests_.gather(rows), {finish_s}, {static_cast<std::uint8_t>(RejectReason::None)},
                      {std::numeric_limits<double>::quiet_NaN()}};
}

void Engine::on_phase_change(std::int32_t instance_id, Req r) {
  if (external_phase_decisions_) {
    instance_at(instance_id).remove(r);
    decisions_.push_back(Decision{DecisionKind::Phase, r, instance_id});
    return;
  }
  if (!phase_router_) return;  // it answers where it reasoned
  const std::int32_t target = phase_router_(r, instance_id);
  if (target < 0 || target == instance_id) return;
  instance_at(target);
  Instance& source = instance_at(instance_id);
  source.remove(r);
  transfer(r, source, target);
}

void Engine::on_reject(Req r, RejectReason reason) {
  requests_.phase[r] = Phase::Rejected;
  outcomes_.add(r, events_.now_s, reason);
}

}  // namespace servegym_core
