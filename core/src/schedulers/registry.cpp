#include "schedulers/registry.hpp"

#include <stdexcept>

#include "schedulers/priority.hpp"
#include "schedulers/sarathi.hpp"

namespace servegym_core {

std::unique_ptr<LocalScheduler> make_scheduler(const std::string& name, std::int64_t chunk_tokens) {
  if (name == "fcfs") return std::make_unique<LocalScheduler>();
  if (name == "priority") return std::make_unique<PriorityScheduler>();
  if (name == "sarathi") return std::make_unique<SarathiScheduler>(chunk_tokens);
  throw std::invalid_argument("scheduler '" + name + "' is not compiled; compiled: fcfs, priority, sarathi");
}

}  // namespace servegym_core
