#include "schedulers/registry.hpp"

#include <stdexcept>

#include "schedulers/pascal.hpp"
#include "schedulers/priority.hpp"
#include "schedulers/round_robin.hpp"
#include "schedulers/sarathi.hpp"

namespace servegym_core {

std::unique_ptr<LocalScheduler> make_scheduler(const SchedulerOptions& options) {
  const std::string& name = options.name;
  if (name == "fcfs") return std::make_unique<LocalScheduler>();
  if (name == "priority") return std::make_unique<PriorityScheduler>();
  if (name == "sarathi") return std::make_unique<SarathiScheduler>(options.chunk_tokens);
  if (name == "rr") return std::make_unique<RoundRobinScheduler>(options.quantum_tokens);
  if (name == "pascal") return std::make_unique<PascalScheduler>(options.quantum_tokens, options.demotion_kv_tokens);
  throw std::invalid_argument("scheduler '" + name + "' is not compiled; compiled: fcfs, priority, sarathi, rr, pascal");
}

}  // namespace servegym_core
