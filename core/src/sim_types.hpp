// Index types, enums and integer helpers of the compiled engine (simulator/sequence.py's
// Residency, simulator/request.py's Phase, LocalScheduler.priority_key's tuples).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace servegym_core {

// A request's row in the RequestTable: its arrival index.
using Req = std::int32_t;

// Where a sequence's KV cache lives (simulator.sequence.Residency).
enum class Residency : std::uint8_t { Queued = 0, Running = 1, Swapped = 2, Moving = 3 };

// Lifecycle of a request (simulator.request.Phase).
enum class Phase : std::uint8_t { Waiting = 0, Prefill = 1, Reasoning = 2, Answering = 3, Done = 4, Rejected = 5 };

// An instance's deployment state (simulator.instance.Lifecycle; the codes of LIFECYCLE_CODES).
enum class Lifecycle : std::uint8_t { Starting = 0, Serving = 1, Draining = 2, Stopped = 3 };

// Why a request was rejected (the strings of simulator.context and Instance.enqueue).
enum class RejectReason : std::uint8_t { None = 0, ExceedsContext = 1, ExceedsKvCapacity = 2 };

// A local scheduler's priority key, compared as the Python tuple (level, order) is; a scheduler
// whose key is the 1-tuple (queue_order,) uses level 0 throughout.
struct Key {
  std::int64_t level;
  std::int64_t order;
};

inline bool operator<(const Key& a, const Key& b) {
  return a.level < b.level || (a.level == b.level && a.order < b.order);
}

// One prefill chunk of a batch: the request and the prompt tokens it computes.
struct Prefill {
  Req req;
  std::int64_t tokens;
};

[[noreturn]] inline void bad_ceil_div(std::int64_t a, std::int64_t b) {
  throw std::logic_error("ceil_div(" + std::to_string(a) + ", " + std::to_string(b) + "): needs a >= 0 and b > 0");
}

// Python's -(-a // b) for a >= 0 and b > 0 (every ceiling of the engine); anything else is a bug.
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  if (a < 0 || b <= 0) [[unlikely]] bad_ceil_div(a, b);
  return (a + b - 1) / b;
}

}  // namespace servegym_core
