// Sarathi-Serve: chunked prefill with stall-free decodes (simulator/schedulers/sarathi.py).
#pragma once

#include <cstdint>

#include "schedulers/base.hpp"

namespace servegym_core {

class SarathiScheduler : public LocalScheduler {
 public:
  // Throws std::invalid_argument unless chunk_tokens > 0.
  explicit SarathiScheduler(std::int64_t chunk_tokens);

 protected:
  // Reserve the decode slots and swap back in first; the budget left after one token per
  // decode goes to running prefills in priority order, then, when nothing is swapped out, to
  // waiting requests admitted in order into free memory.
  void schedule(Instance& instance, double now, std::vector<Prefill>& prefills) override;
};

}  // namespace servegym_core
