// The compiled local schedulers by name (simulator/schedulers/__init__.py's registry).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "schedulers/base.hpp"

namespace servegym_core {

// A scheduler's name and options (InstanceConfig.scheduler_options, defaults filled in Python).
struct SchedulerOptions {
  std::string name = "fcfs";
  std::int64_t chunk_tokens = 0;        // sarathi
  std::int64_t quantum_tokens = 0;      // rr, pascal
  std::int64_t demotion_kv_tokens = 0;  // pascal
};

// `fcfs`, `priority`, `sarathi`, `rr` or `pascal` with its options; throws std::invalid_argument
// naming any other name or a bad option.
std::unique_ptr<LocalScheduler> make_scheduler(const SchedulerOptions& options);

}  // namespace servegym_core
