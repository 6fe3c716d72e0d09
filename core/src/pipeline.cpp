#include "pipeline.hpp"

#include <algorithm>
#include <charconv>
#include <string>
#include <stdexcept>
#include <utility>

namespace servegym_core {

PipelinedInstance::PipelinedInstance(std::int32_t instance_id_, const InstanceSettings& settings_,
                                     const LatencyEvaluator& latency_, EventQueue& events_, RequestTable& requests_,
                                     InstanceHost& host)
    : Instance(instance_id_, settings_, latency_, events_, requests_, host),
      depth_(static_cast<std::size_t>(settings_.pipeline_depth)),
      stage_free_s_(static_cast<std::size_t>(settings_.pp), 0.0) {
  if (settings_.pipeline_depth < 2 || settings_.pipeline_depth > settings_.pp) {
    throw std::invalid_argument("a pipelined instance keeps 2 to pp=" + std::to_string(settings_.pp) +
                                " microbatches in flight, got " + std::to_string(settings_.pipeline_depth));
  }
}

void PipelinedInstance::poke() {
  if (!wake_pending_ && in_flight_count() < depth_) wake_at(std::max(events.now_s, stage_free_s_[0]));
}

void PipelinedInstance::wake_at(double time_s) {
  ++wake_version_;
  wake_pending_ = true;
  busy = true;
  events.schedule(time_s, EventKind::Wake, instance_id, wake_version_);
}

void PipelinedInstance::on_wake(std::int64_t version) {
  if (version != wake_version_) return;
  run_detaches();
  fill(events.now_s);
}

void PipelinedInstance::on_microbatch_end(std::int64_t batch_id) {
  const double now = events.now_s;
  const auto it = std::find_if(in_flight_.begin(), in_flight_.end(),
                               [batch_id](const Microbatch& batch) { return batch.id == batch_id; });
  if (it == in_flight_.end()) throw std::logic_error("microbatch " + std::to_string(batch_id) + " is not in flight");
  Microbatch batch = std::move(*it);
  in_flight_.erase(it);
  RequestTable& t = requests;
  for (const Prefill& chunk : batch.prefills) t.in_flight[chunk.req] = 0;
  for (const Req r : batch.decode) t.in_flight[r] = 0;
  flying_ -= batch.prefills.size() + batch.decode.size();
  // The plain instance's boundary handling, for this one microbatch; busy time counts the time
  // any microbatch is in flight.
  seg_start_s_ = std::max(batch.start_s, busy_until_s_);
  busy_until_s_ = now;
  seg_prefill_ = std::move(batch.prefills);
  seg_decode_ = std::move(batch.decode);
  seg_ends_.assign(1, now);
  seg_len_ = 1;
  seg_pos_ = 0;
  end_segment(now);
  fill(now);
}

void PipelinedInstance::fill(double now) {
  ++wake_version_;
  wake_pending_ = false;
  if (lifecycle() == Lifecycle::Stopped) {
    busy = !in_flight_.empty();
    return;
  }
  if (in_flight_count() < depth_) {
    if (stage_free_s_[0] > now) {
      wake_at(stage_free_s_[0]);
    } else if (start_microbatch(now) && in_flight_count() < depth_) {
      wake_at(stage_free_s_[0]);
    }
  }
  if (!in_flight_.empty() || wake_pending_) {
    busy = true;
  } else {
    busy = false;
    host_.on_idle(instance_id);
  }
}

bool PipelinedInstance::start_microbatch(double now) {
  RequestTable& t = requests;
  std::vector<Req> flying;
  if (flying_) {
    std::vector<Req> rest;
    flying_blocks_ = 0;
    for (const Req r : running) {
      if (t.in_flight[r]) {
        flying.push_back(r);
        flying_blocks_ += t.blocks[r];
      } else {
        rest.push_back(r);
      }
    }
    running = std::move(rest);
  }
  std::vector<Prefill> prefills;
  std::vector<Req> decode;
  double extra_s = 0.0;
  bool single_iteration = false;
  const bool formed = form_batch(now, prefills, decode, extra_s, single_iteration);
  if (flying_) {
    flying.insert(flying.end(), running.begin(), running.end());
    running = std::move(flying);
    flying_blocks_ = 0;
  }
  if (!formed) return false;
  const auto room = std::max<std::int64_t>(max_batch_size - static_cast<std::int64_t>(prefills.size()), 0);
  if (static_cast<std::int64_t>(decode.size()) > room) {  // more sequences came back than one microbatch holds
    std::stable_sort(decode.begin(), decode.end(),
                     [this, &t](Req x, Req y) { return scheduler->priority_key(t, x) < scheduler->priority_key(t, y); });
    decode.resize(static_cast<std::size_t>(room));
  }
  double iteration_s = 0.0;
  std::int64_t tokens = 0;
  std::int64_t logit_tokens = 0;
  if (!prefills.empty()) {
    iteration_s = planner_.mixed_iteration_s(prefills, decode);
    for (const Prefill& chunk : prefills) tokens += chunk.tokens;
    tokens += static_cast<std::int64_t>(decode.size());
    logit_tokens = static_cast<std::int64_t>(decode.size()) + 1;
  } else {
    const auto batch_size = static_cast<std::int64_t>(decode.size());
    std::int64_t context = batch_size;
    for (const Req r : decode) context += t.kv_tokens[r];
    const auto [base_s, per_token_s] = latency.decode_coefficients(batch_size);
    iteration_s = static_cast<double>(context) * per_token_s + base_s;  // the float operations of a decode segment
    tokens = logit_tokens = batch_size;
  }
  double end_s = now + (iteration_s + extra_s);
  const std::vector<double> stage_s = latency.stage_times_s(tokens, logit_tokens, iteration_s);
  if (stage_s.empty()) {
    char shortest[32];
    const auto written = std::to_chars(shortest, shortest + sizeof shortest, iteration_s);  // Python's repr
    throw std::invalid_argument("iteration_s=" + std::string(shortest, written.ptr) +
                                " is shorter than the CPU overhead, embedding, LM head and sends of " +
                                std::to_string(tokens) + " tokens alone");
  }
  double time_s = now;
  bool waited = false;
  for (std::size_t stage = 0; stage < stage_s.size(); ++stage) {
    if (stage_free_s_[stage] > time_s) {
      time_s = stage_free_s_[stage];
      waited = true;
    }
    time_s += stage == 0 ? stage_s[stage] + extra_s : stage_s[stage];
    stage_free_s_[stage] = time_s;
  }
  if (waited) end_s = time_s;
  const std::int64_t id = next_batch_id_++;
  for (const Prefill& chunk : prefills) t.in_flight[chunk.req] = 1;
  for (const Req r : decode) t.in_flight[r] = 1;
  flying_ += prefills.size() + decode.size();
  in_flight_.push_back(Microbatch{id, std::move(prefills), std::move(decode), now, end_s});
  events.schedule(end_s, EventKind::MicrobatchEnd, instance_id, id);
  return true;
}

}  // namespace servegym_core
