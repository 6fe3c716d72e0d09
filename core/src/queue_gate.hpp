// CascadeServe's minimum queue length (CascadeServe §4.5; simulator/queue_gate.py, ported line by
// line): an instance starts no new prefill batch until `min_length` requests wait or the oldest
// has waited `max_wait_s`; min_length 1 turns the gate off. A request's entry time lives in the
// RequestTable (gate_since_s: NaN when the gate does not count it).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "event_queue.hpp"
#include "request_table.hpp"
#include "sim_types.hpp"

namespace servegym_core {

class QueueGate {
 public:
  QueueGate(EventQueue& events, std::int32_t instance_id) : events_(events), instance_id_(instance_id) {}

  // Set the minimum length and the longest wait; requests already `waiting` count from now if
  // they were not counted yet. Returns whether either value changed.
  bool set(RequestTable& t, std::int64_t length, double max_wait_s, const std::vector<Req>& waiting);
  // r joined the waiting queue at `now`.
  void enter(RequestTable& t, Req r, double now) const {
    if (min_length > 1) t.gate_since_s[r] = now;
  }
  // r left the waiting queue (admitted, or taken away).
  static void leave(RequestTable& t, Req r) { t.gate_since_s[r] = std::numeric_limits<double>::quiet_NaN(); }
  // Whether the gate holds the non-empty `waiting` queue back now; if so, the instance is woken
  // at the deadline (a GateDeadline event carrying the deadline's bits).
  bool holds(const RequestTable& t, const std::vector<Req>& waiting, double now);
  // The GateDeadline event for `deadline`: true when it is the one in force (the gate opens).
  bool on_deadline(double deadline);

  std::int64_t min_length = 1;
  double max_wait_s = 0.0;

 private:
  EventQueue& events_;
  std::int32_t instance_id_;
  double wake_s_ = std::numeric_limits<double>::infinity();
};

}  // namespace servegym_core
