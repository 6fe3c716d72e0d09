#include "routers.hpp"

#include <stdexcept>
#include <utility>

namespace servegym_core {

namespace {

std::runtime_error no_instance(const RequestTable& requests, Req r) {
  return std::runtime_error("no serving instance can take request " + std::to_string(requests.request_id[r]));
}

// simulator.routers.base.fewest_requests over every instance (all of them serve in this subset).
std::int32_t fewest_requests(const std::vector<std::unique_ptr<Instance>>& instances, const RequestTable& requests,
                             Req r) {
  std::int32_t best_id = -1;
  std::size_t best_load = 0;
  for (const auto& instance : instances) {
    const std::size_t load = instance->num_requests();
    if (best_id < 0 || load < best_load) {
      best_id = instance->instance_id;
      best_load = load;
    }
  }
  if (best_id < 0) throw no_instance(requests, r);
  return best_id;
}

class RoundRobinRouter : public Router {
 public:
  std::int32_t route(const std::vector<std::unique_ptr<Instance>>& instances, const RequestTable& requests,
                     Req r) override {
    if (instances.empty()) throw no_instance(requests, r);
    const auto choice = static_cast<std::int32_t>(next_ % static_cast<std::int64_t>(instances.size()));
    ++next_;
    return choice;
  }

 private:
  std::int64_t next_ = 0;
};

class LeastLoadedRouter : public Router {
 public:
  std::int32_t route(const std::vector<std::unique_ptr<Instance>>& instances, const RequestTable& requests,
                     Req r) override {
    return fewest_requests(instances, requests, r);
  }
};

class SessionAffinityRouter : public Router {
 public:
  explicit SessionAffinityRouter(std::vector<std::int32_t> targets) : targets_(std::move(targets)) {}

  std::int32_t route(const std::vector<std::unique_ptr<Instance>>& instances, const RequestTable& requests,
                     Req r) override {
    const std::int32_t target = static_cast<std::size_t>(r) < targets_.size() ? targets_[r] : -1;
    if (target < 0 || instances.empty()) return fewest_requests(instances, requests, r);
    return target;
  }

 private:
  std::vector<std::int32_t> targets_;
};

}  // namespace

std::unique_ptr<Router> make_router(const std::string& name, std::vector<std::int32_t> session_targets) {
  if (name == "round_robin") return std::make_unique<RoundRobinRouter>();
  if (name == "least_loaded") return std::make_unique<LeastLoadedRouter>();
  if (name == "session_affinity") return std::make_unique<SessionAffinityRouter>(std::move(session_targets));
  throw std::invalid_argument("router '" + name +
                              "' is not compiled; compiled: round_robin, least_loaded, session_affinity");
}

}  // namespace servegym_core
