// Pipeline parallelism with several microbatches in flight, each PP stage a resource
// (simulator/pipeline.py's PipelinedInstance, ported line by line; its docstring has the model
// and how it differs from Vidur's).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "instance.hpp"

namespace servegym_core {

// One batch inside the pipeline: its prefill chunks, decode sequences, start and end times.
struct Microbatch {
  std::int64_t id;
  std::vector<Prefill> prefills;
  std::vector<Req> decode;
  double start_s;
  double end_s;
};

class PipelinedInstance : public Instance {
 public:
  PipelinedInstance(std::int32_t instance_id, const InstanceSettings& settings, const LatencyEvaluator& latency,
                    EventQueue& events, RequestTable& requests, InstanceHost& host);

  // Something changed: form a microbatch as soon as stage 0 and a pipeline slot are free.
  void poke() override;
  void on_wake(std::int64_t version) override;
  void on_microbatch_end(std::int64_t batch_id) override;

 private:
  void wake_at(double time_s);
  // Start a microbatch if stage 0 and a slot are free; wake again when stage 0 frees.
  void fill(double now);
  // Form a microbatch from the sequences not in flight and send it down the pipeline.
  bool start_microbatch(double now);
  std::size_t in_flight_count() const { return in_flight_.size(); }

  const std::size_t depth_;
  std::deque<Microbatch> in_flight_;
  std::vector<double> stage_free_s_;  // when each stage finishes the work it has been given
  double busy_until_s_ = 0.0;
  std::int64_t wake_version_ = 0;
  bool wake_pending_ = false;
  std::int64_t next_batch_id_ = 0;
  std::size_t flying_ = 0;  // sequences in flight
};

}  // namespace servegym_core
