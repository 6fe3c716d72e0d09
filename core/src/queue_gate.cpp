#include "queue_gate.hpp"

#include <cmath>
#include <cstring>

namespace servegym_core {

bool QueueGate::set(RequestTable& t, std::int64_t length, double max_wait, const std::vector<Req>& waiting) {
  const double now = events_.now_s;
  for (const Req r : waiting) {
    if (length > 1) {
      if (std::isnan(t.gate_since_s[r])) t.gate_since_s[r] = now;
    } else {
      leave(t, r);
    }
  }
  const bool changed = length != min_length || max_wait != max_wait_s;
  min_length = length;
  max_wait_s = max_wait;
  return changed;
}

bool QueueGate::holds(const RequestTable& t, const std::vector<Req>& waiting, double now) {
  if (min_length == 1 || static_cast<std::int64_t>(waiting.size()) >= min_length) return false;
  double oldest = std::numeric_limits<double>::infinity();
  for (const Req r : waiting) {
    const double since = std::isnan(t.gate_since_s[r]) ? now : t.gate_since_s[r];
    if (since < oldest) oldest = since;
  }
  const double deadline = oldest + max_wait_s;
  if (now >= deadline) return false;
  if (deadline != wake_s_) {
    wake_s_ = deadline;
    std::int64_t bits = 0;
    std::memcpy(&bits, &deadline, sizeof bits);
    events_.schedule(deadline, EventKind::GateDeadline, instance_id_, bits);
  }
  return true;
}

bool QueueGate::on_deadline(double deadline) {
  if (deadline != wake_s_) return false;
  wake_s_ = std::numeric_limits<double>::infinity();
  return true;
}

}  // namespace servegym_core
