#include "instance.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "queue_order.hpp"

namespace servegym_core {

Instance::Instance(std::int32_t instance_id_, const InstanceSettings& settings_, const LatencyEvaluator& latency_,
                   EventQueue& events_, RequestTable& requests_, InstanceHost& host)
    : instance_id(instance_id_),
      settings(settings_),
      events(events_),
      requests(requests_),
      kv(settings_.total_blocks, settings_.block_size, settings_.watermark_blocks),
      cache(settings_.prefix_caching ? std::make_unique<PrefixCache>(kv, settings_.host_capacity_blocks) : nullptr),
      latency(latency_),
      scheduler(make_scheduler(settings_.scheduler)),
      max_batch_size(settings_.max_batch_size / settings_.pipeline_depth),
      gate(events_, instance_id_),
      host_(host),
      planner_(latency, kv, requests_, *scheduler, settings_.max_segment_iterations) {}

void Instance::enqueue(Req r) {
  RequestTable& t = requests;
  // simulator.context.fit_to_context
  const std::int64_t context = settings.context_tokens;
  if (t.prompt_tokens[r] > context) {
    host_.on_reject(r, RejectReason::ExceedsContext);
    return;
  }
  const std::int64_t limit = std::max<std::int64_t>(context - t.prompt_tokens[r], 1);
  if (t.output_tokens[r] > limit) {
    t.output_tokens[r] = limit;
    t.reasoning_tokens[r] = std::min(t.reasoning_tokens[r], limit - 1);
    ++context_truncated;
  }
  if (t.prompt_tokens[r] + t.output_tokens[r] > max_request_tokens()) {
    host_.on_reject(r, RejectReason::ExceedsKvCapacity);
    return;
  }
  if (cache && t.has_block_keys(r)) cache->check_block_tokens(t, r);
  count_tier(r, 1);
  t.instance_id[r] = instance_id;
  t.residency[r] = Residency::Queued;
  if (t.generated_tokens[r] == 0) t.phase[r] = Phase::Waiting;
  scheduler->on_enqueue(t, r);
  waiting.push_back(r);
  if (arrays) arrays->join(instance_id, t, r, kWaiting);
  gate.enter(t, r, events.now_s);
  poke();
}

void Instance::set_min_queue_length(std::int64_t length, double max_wait_s) {
  if (length < 1) throw std::invalid_argument("min queue length must be a positive integer, got " + std::to_string(length));
  if (!(max_wait_s >= 0.0 && max_wait_s < std::numeric_limits<double>::infinity())) {
    throw std::invalid_argument("max_wait_s must be a finite number >= 0, got " + std::to_string(max_wait_s));
  }
  if (gate.set(requests, length, max_wait_s, waiting) && !waiting.empty()) poke();
}

void Instance::on_gate_deadline(double deadline) {
  if (gate.on_deadline(deadline)) poke();
}

bool Instance::accept_running(Req r) {
  RequestTable& t = requests;
  const std::int64_t need = ceil_div(t.kv_tokens[r] + 1, kv.block_size);
  // The decode iterations finished by now, and the one under way, grow into blocks not applied yet: count them.
  if (static_cast<std::int64_t>(running.size()) >= settings.max_batch_size || !kv.can_admit(need + committed_kv_blocks())) {
    return false;
  }
  sync();
  kv.allocate(need);
  t.blocks[r] = need;
  t.instance_id[r] = instance_id;
  t.residency[r] = Residency::Running;
  scheduler->on_enqueue(t, r);
  running.push_back(r);
  count_tier(r, 1);
  if (arrays) arrays->join(instance_id, t, r, kRunning);
  poke();
  return true;
}

void Instance::accept_transferred(Req r) {
  RequestTable& t = requests;
  if (t.prompt_tokens[r] + t.output_tokens[r] > max_request_tokens()) {
    host_.on_reject(r, RejectReason::ExceedsKvCapacity);
    return;
  }
  if (accept_running(r)) return;
  t.instance_id[r] = instance_id;
  t.residency[r] = Residency::Swapped;
  t.preempted_since_s[r] = events.now_s;
  scheduler->on_enqueue(t, r);
  swapped.push_back(r);
  count_tier(r, 1);
  if (arrays) arrays->join(instance_id, t, r, kSwapped);
  poke();
}

void Instance::remove(Req r) {
  RequestTable& t = requests;
  sync();
  truncate();
  if (std::find(seg_decode_.begin(), seg_decode_.end(), r) != seg_decode_.end() || t.in_flight[r]) {
    throw std::runtime_error("request " + std::to_string(t.request_id[r]) + " is inside the iteration in progress");
  }
  std::int32_t code = kRunning;
  if (std::find(running.begin(), running.end(), r) != running.end()) {
    remove_first(running, r);
  } else if (std::find(swapped.begin(), swapped.end(), r) != swapped.end()) {
    swapped_ordered = take_from_queue(swapped, r, swapped_ordered);
    code = kSwapped;
  } else if (std::find(waiting.begin(), waiting.end(), r) != waiting.end()) {
    waiting_ordered = take_from_queue(waiting, r, waiting_ordered);
    QueueGate::leave(t, r);
    code = kWaiting;
  } else {
    throw std::invalid_argument("request " + std::to_string(t.request_id[r]) + " is not on instance " +
                                std::to_string(instance_id));
  }
  count_tier(r, -1);
  if (arrays) arrays->leave(instance_id, t, r, code);
  if (t.residency[r] == Residency::Running) free_kv(r);
  t.blocks[r] = 0;
  t.residency[r] = Residency::Moving;
}

void Instance::detach_at_boundary(Req r, std::int64_t token) {
  const RequestTable& t = requests;
  if (t.instance_id[r] != instance_id || t.residency[r] != Residency::Running) {
    throw std::invalid_argument("request " + std::to_string(t.request_id[r]) + " is not running on instance " +
                                std::to_string(instance_id));
  }
  detach_.emplace_back(r, token);
  poke();
}

void Instance::run_detaches() {
  std::vector<std::pair<Req, std::int64_t>> detach;
  detach.swap(detach_);
  for (const auto& [r, token] : detach) {
    if (requests.in_flight[r]) {
      detach_.emplace_back(r, token);
    } else if (std::find(running.begin(), running.end(), r) != running.end()) {
      remove(r);
      host_.on_detached(token, r);
    } else {
      host_.on_detach_gone(token);
    }
  }
}

Req Instance::migration_candidate(const std::vector<std::int64_t>& excluded) const {
  const RequestTable& t = requests;
  if (!waiting.empty()) {
    Req best = waiting.front();
    Key best_key = scheduler->priority_key(t, best);
    for (const Req r : waiting) {
      const Key key = scheduler->priority_key(t, r);
      if (best_key < key) {
        best = r;
        best_key = key;
      }
    }
    return best;
  }
  Req best = -1;
  std::int64_t best_tier = 0;
  std::int64_t best_kv = 0;
  std::int64_t best_order = 0;
  for (const Req r : running) {
    if (!t.decodes_here(r) ||
        std::find(excluded.begin(), excluded.end(), t.request_id[r]) != excluded.end()) {
      continue;
    }
    // min over (-tier, kv_tokens, queue_order)
    const std::int64_t tier = -t.tier[r];
    const std::int64_t kv_tokens = t.kv_tokens[r];
    const std::int64_t order = t.queue_order[r];
    if (best < 0 || tier < best_tier || (tier == best_tier && (kv_tokens < best_kv ||
        (kv_tokens == best_kv && order < best_order)))) {
      best = r;
      best_tier = tier;
      best_kv = kv_tokens;
      best_order = order;
    }
  }
  return best;
}

void Instance::count_tier(Req r, std::int64_t sign) {
  const auto tier = static_cast<std::size_t>(requests.tier[r]);
  if (tier >= tier_counts_.size()) tier_counts_.resize(tier + 1, 0);
  tier_counts_[tier] += sign;
}

void Instance::set_lifecycle(Lifecycle lifecycle) {
  lifecycle_ = lifecycle;
  if (arrays) arrays->set_lifecycle(instance_id, static_cast<std::int64_t>(lifecycle));
}

void Instance::track(InstanceArrays& tracked) {
  if (num_requests()) throw std::logic_error("instance " + std::to_string(instance_id) + " already holds requests");
  tracked.add_row(instance_id, kv.total_blocks, kv.watermark_blocks, kv.block_size, settings.role);
  arrays = &tracked;
  kv.track(tracked, instance_id);
}

void Instance::free_kv(Req r) {
  if (cache) {
    cache->free(requests, r);
  } else {
    kv.release(requests.blocks[r]);
    requests.blocks[r] = 0;
  }
}

void Instance::poke() {
  if (busy) {
    truncate();
    return;
  }
  busy = true;
  ++version_;
  seg_decode_.clear();
  seg_prefill_.clear();
  seg_len_ = 0;
  seg_pos_ = 0;
  events.schedule(events.now_s, EventKind::Boundary, instance_id, version_);
}

void Instance::sync() {
  if (!seg_decode_.empty() && seg_pos_ < seg_len_) {
    const auto begin = seg_ends_.begin();
    const auto done = static_cast<std::size_t>(
        std::upper_bound(begin + static_cast<std::ptrdiff_t>(seg_pos_), begin + static_cast<std::ptrdiff_t>(seg_len_),
                         events.now_s) - begin);
    if (done > seg_pos_) apply_decode(done, nullptr);
  }
}

std::int64_t Instance::decode_iterations_done() const {
  const auto begin = seg_ends_.begin();
  return std::upper_bound(begin + static_cast<std::ptrdiff_t>(seg_pos_), begin + static_cast<std::ptrdiff_t>(seg_len_),
                          events.now_s) -
         (begin + static_cast<std::ptrdiff_t>(seg_pos_));
}

std::int64_t Instance::decode_growth_blocks(std::int64_t done) const {
  std::int64_t blocks = 0;
  for (const Req r : seg_decode_) blocks += ceil_div(requests.kv_tokens[r] + done, kv.block_size) - requests.blocks[r];
  return blocks;
}

std::int64_t Instance::unsynced_kv_blocks() const {
  if (seg_decode_.empty() || seg_pos_ >= seg_len_) return 0;
  if (seg_ends_[seg_pos_] > events.now_s) return 0;
  return decode_growth_blocks(decode_iterations_done());
}

std::int64_t Instance::committed_kv_blocks() const {
  if (seg_decode_.empty() || seg_pos_ >= seg_len_) return 0;
  const std::int64_t left = static_cast<std::int64_t>(seg_len_ - seg_pos_);
  return decode_growth_blocks(std::min(decode_iterations_done() + 1, left));
}

std::int64_t Instance::head_of_line_demand_blocks() const {
  const RequestTable& t = requests;
  Req head = -1;
  Key best{0, 0};
  for (const std::vector<Req>* queue : {&waiting, &swapped}) {
    for (const Req r : *queue) {
      const Key key = scheduler->priority_key(t, r);
      if (head < 0 || key < best) {
        head = r;
        best = key;
      }
    }
  }
  if (head < 0) return 0;
  const std::int64_t tokens =
      t.residency[head] == Residency::Swapped ? t.kv_tokens[head] + 1 : t.prefill_target_tokens(head);
  return ceil_div(tokens, kv.block_size);
}

std::array<std::int64_t, 5> Instance::request_counts(double overdue_before_s, std::int64_t fresh_tokens) const {
  const RequestTable& t = requests;
  std::array<std::int64_t, 5> counts{0, 0, 0, 0, 0};  // reasoning, answering, fresh, demoted, overdue
  for (const std::vector<Req>* queue : {&running, &swapped, &waiting}) {
    for (const Req r : *queue) {
      const std::int64_t generated = t.generated_tokens[r];
      const std::int64_t reasoning = t.reasoning_tokens[r];
      if (reasoning && generated < reasoning) {
        ++counts[0];
        counts[3] += t.demoted[r];
      } else if (generated > 0) {
        ++counts[1];
        if (generated == reasoning && t.residency[r] != Residency::Running && t.reasoning_end_s[r] < overdue_before_s) {
          ++counts[4];
        }
        if (reasoning && generated - reasoning < fresh_tokens) ++counts[2];
      }
    }
  }
  return counts;
}

bool Instance::answering_behind_pace(double tpot_target_s) {
  if (!(tpot_target_s > 0)) {
    throw std::invalid_argument("tpot_target_s must be positive, got " + std::to_string(tpot_target_s));
  }
  sync();
  const RequestTable& t = requests;
  const double now = events.now_s;
  for (const std::vector<Req>* queue : {&running, &swapped, &waiting}) {
    for (const Req r : *queue) {
      const std::int64_t answered = t.generated_tokens[r] - t.reasoning_tokens[r];
      if (answered > 0 && answered < t.output_tokens[r] - t.reasoning_tokens[r]) {
        // Python's 1 + int((now - first) / tpot): int() truncates toward zero.
        if (static_cast<double>(answered) < 1.0 + std::trunc((now - t.first_answer_token_s[r]) / tpot_target_s)) {
          return true;
        }
      }
    }
  }
  return false;
}

void Instance::truncate() {
  if (seg_len_ <= 1) return;
  const auto begin = seg_ends_.begin();
  const std::size_t keep =
      1 + static_cast<std::size_t>(
              std::lower_bound(begin, begin + static_cast<std::ptrdiff_t>(seg_len_ - 1), events.now_s) - begin);
  if (keep < seg_len_) {
    seg_len_ = keep;
    ++version_;
    events.schedule(seg_ends_[keep - 1], EventKind::Boundary, instance_id, version_);
  }
}

void Instance::apply_decode(std::size_t upto, std::vector<Req>* attention) {
  RequestTable& t = requests;
  const std::size_t start = seg_pos_;
  const auto count = static_cast<std::int64_t>(upto - start);
  const double first_s = seg_ends_[start];
  const double last_s = seg_ends_[upto - 1];
  // Iterations lengthen by per_context_token_s x batch each step, so a run's largest inner gap
  // is its last one.
  const double last_gap_s = count > 1 ? last_s - seg_ends_[upto - 2] : 0.0;
  const std::int64_t block_size = kv.block_size;
  const bool at_end = upto == seg_len_;
  std::int64_t grown = 0;
  for (const Req r : seg_decode_) {
    const std::int64_t kv_tokens = t.kv_tokens[r] + count;
    t.kv_tokens[r] = kv_tokens;
    const std::int64_t after = t.generated_tokens[r] + count;
    t.on_tokens(r, first_s, last_s, count, last_gap_s);
    const std::int64_t blocks = ceil_div(kv_tokens, block_size);
    grown += blocks - t.blocks[r];
    t.blocks[r] = blocks;
    if (at_end && attention != nullptr &&
        (after >= t.output_tokens[r] || after == t.reasoning_tokens[r] || t.pd_handoff[r])) {
      attention->push_back(r);
    }
  }
  kv.allocate(grown);
  seg_pos_ = upto;
}

void Instance::on_boundary(std::int64_t version) {
  if (version != version_) return;
  const double now = events.now_s;
  end_segment(now);
  plan(now);
}

void Instance::end_segment(double now) {
  RequestTable& t = requests;
  if (seg_len_) {
    busy_time_s += now - seg_start_s_;
    iterations += static_cast<std::int64_t>(seg_len_);
  }
  finished_.clear();
  for (const Prefill& chunk : seg_prefill_) {
    t.kv_tokens[chunk.req] += chunk.tokens;
    if (cache && t.has_block_keys(chunk.req)) cache->register_computed(t, chunk.req);
    if (t.kv_tokens[chunk.req] == t.prefill_target_tokens(chunk.req)) {
      t.on_tokens(chunk.req, now, now, 1, 0.0);
      finished_.push_back(chunk.req);
    }
  }
  if (!seg_decode_.empty()) {
    // Only completions and the end of reasoning need attention here.
    if (seg_pos_ < seg_len_) {
      apply_decode(seg_len_, &finished_);
    } else {
      for (const Req r : seg_decode_) {
        if (t.generated_tokens[r] >= t.output_tokens[r] || t.generated_tokens[r] == t.reasoning_tokens[r] ||
            t.pd_handoff[r]) {
          finished_.push_back(r);
        }
      }
    }
  }
  seg_decode_.clear();
  seg_prefill_.clear();
  seg_len_ = seg_pos_ = 0;
  for (const Req r : finished_) after_token(r);
  if (!detach_.empty()) run_detaches();
}

void Instance::after_token(Req r) {
  RequestTable& t = requests;
  if (t.residency[r] != Residency::Running || t.instance_id[r] != instance_id) return;
  if (t.generated_tokens[r] >= t.output_tokens[r]) {
    remove_first(running, r);
    if (arrays) arrays->leave(instance_id, t, r, kRunning);
    free_kv(r);
    t.phase[r] = Phase::Done;
    count_tier(r, -1);
    host_.on_complete(instance_id, r);
    return;
  }
  const Phase phase = t.decode_phase(r);
  if (t.phase[r] != phase) {
    t.phase[r] = phase;
    if (phase == Phase::Answering && t.reasoning_tokens[r] > 0) {
      scheduler->on_phase_change(t, r);
      host_.on_phase_change(instance_id, r);
      if (t.instance_id[r] != instance_id || t.residency[r] != Residency::Running) return;
    }
  }
  if (t.pd_handoff[r]) host_.on_prefill_done(instance_id, r);
}

bool Instance::form_batch(double now, std::vector<Prefill>& prefills, std::vector<Req>& decode, double& extra_s,
                          bool& single_iteration) {
  if (!waiting.empty() && gate.holds(requests, waiting, now)) {
    // The scheduler does not see the held requests; those it puts back (preempted to recompute)
    // queue behind them.
    std::vector<Req> held;
    held.swap(waiting);
    const std::size_t held_ordered = waiting_ordered;
    waiting_ordered = 0;
    scheduler->form_batch(*this, now, prefills, decode);
    held.insert(held.end(), waiting.begin(), waiting.end());
    waiting.swap(held);
    waiting_ordered = held_ordered;
  } else {
    scheduler->form_batch(*this, now, prefills, decode);
  }
  if (prefills.empty() && decode.empty()) return false;
  extra_s = static_cast<double>(swap_tokens) * settings.swap_s_per_token;
  swap_tokens = 0;
  single_iteration = memory_moved;
  memory_moved = false;
  return true;
}

void Instance::on_wake(std::int64_t) { throw std::logic_error("a wake event for an instance without a pipeline"); }

void Instance::on_microbatch_end(std::int64_t) {
  throw std::logic_error("a microbatch end for an instance without a pipeline");
}

void Instance::plan(double now) {
  if (lifecycle_ == Lifecycle::Stopped) {
    busy = false;
    return;
  }
  next_prefills_.clear();
  next_decode_.clear();
  double extra_s = 0.0;
  bool single_iteration = false;
  if (!form_batch(now, next_prefills_, next_decode_, extra_s, single_iteration)) {
    busy = false;
    host_.on_idle(instance_id);
    return;
  }
  busy = true;
  ++version_;
  seg_start_s_ = now;
  seg_pos_ = 0;
  std::swap(seg_decode_, next_decode_);
  std::swap(seg_prefill_, next_prefills_);
  if (!seg_prefill_.empty()) {
    const double dt = planner_.mixed_iteration_s(seg_prefill_, seg_decode_) + extra_s;
    seg_ends_.assign(1, now + dt);
  } else {
    planner_.decode_ends(now, seg_decode_, extra_s, single_iteration, seg_ends_);
  }
  seg_len_ = seg_ends_.size();
  events.schedule(seg_ends_.back(), EventKind::Boundary, instance_id, version_);
}

}  // namespace servegym_core
