// The compiled local schedulers by name (simulator/schedulers/__init__.py's registry).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "schedulers/base.hpp"

namespace servegym_core {

// `fcfs`, `priority` or `sarathi` (with its chunk_tokens); throws std::invalid_argument naming
// any other name.
std::unique_ptr<LocalScheduler> make_scheduler(const std::string& name, std::int64_t chunk_tokens);

}  // namespace servegym_core
