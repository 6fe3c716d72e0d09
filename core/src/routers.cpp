#include "routers.hpp"

#include <limits>
#include <stdexcept>
#include <utility>

namespace servegym_core {

namespace {

std::runtime_error no_instance(const RequestTable& requests, Req r) {
  return std::runtime_error("no serving instance can take request " + std::to_string(requests.request_id[r]));
}

// simulator.routers.base.fewest_requests over the routable instances.
std::int32_t fewest_requests(const std::vector<std::unique_ptr<Instance>>& instances, const RequestTable& requests,
                             Req r) {
  std::int32_t best_id = -1;
  std::size_t best_load = 0;
  for (const auto& instance : instances) {
    if (!instance->routable()) continue;
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
    routable_.clear();
    for (const auto& instance : instances) {
      if (instance->routable()) routable_.push_back(instance->instance_id);
    }
    if (routable_.empty()) throw no_instance(requests, r);
    const std::int32_t choice = routable_[static_cast<std::size_t>(next_ % static_cast<std::int64_t>(routable_.size()))];
    ++next_;
    return choice;
  }

 private:
  std::int64_t next_ = 0;
  std::vector<std::int32_t> routable_;  // scratch: the routable instances now
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

class FreestInstanceRouter : public Router {
 public:
  explicit FreestInstanceRouter(std::vector<double> fractions) : fractions_(std::move(fractions)) {}

  std::int32_t route(const std::vector<std::unique_ptr<Instance>>& instances, const RequestTable& requests,
                     Req r) override {
    const std::int32_t model = requests.model_index[r];
    std::int32_t best_id = -1;
    double best = -std::numeric_limits<double>::infinity();
    for (const auto& instance : instances) {
      if (!instance->routable() || (model >= 0 && instance->settings.model_index != model)) continue;
      const double value = freeness_full(*instance, fractions_);
      if (best_id < 0 || value > best) {
        best_id = instance->instance_id;
        best = value;
      }
    }
    if (best_id < 0) throw no_instance(requests, r);
    return best_id;
  }

  void set_headroom_fractions(std::vector<double> fractions) override { fractions_ = std::move(fractions); }

 private:
  std::vector<double> fractions_;
};

class WeightedUnitRouter : public Router {
 public:
  std::int32_t route(const std::vector<std::unique_ptr<Instance>>& instances, const RequestTable& requests,
                     Req r) override {
    std::int32_t best_id = -1;
    double best_load = 0.0;
    for (std::size_t u = 0; u < weights_.size(); ++u) {
      const Instance& entry = *instances[static_cast<std::size_t>(members_[offsets_[u]])];
      if (entry.lifecycle() != Lifecycle::Serving) continue;
      std::size_t outstanding = 0;
      for (std::int32_t k = offsets_[u]; k < offsets_[u + 1]; ++k) {
        outstanding += instances[static_cast<std::size_t>(members_[k])]->num_requests();
      }
      // Python's (outstanding + 1) / weight: both exact doubles, one correctly rounded division.
      const double load = static_cast<double>(outstanding + 1) / weights_[u];
      if (best_id < 0 || load < best_load) {
        best_id = entry.instance_id;
        best_load = load;
      }
    }
    if (best_id < 0) {
      throw std::runtime_error("no serving unit can take request " + std::to_string(requests.request_id[r]));
    }
    return best_id;
  }

  void set_units(std::vector<std::int32_t> offsets, std::vector<std::int32_t> members,
                 std::vector<double> weights) override {
    offsets_ = std::move(offsets);
    members_ = std::move(members);
    weights_ = std::move(weights);
  }

 private:
  std::vector<std::int32_t> offsets_{0};
  std::vector<std::int32_t> members_;
  std::vector<double> weights_;
};

}  // namespace

double freeness_full(const Instance& instance, const std::vector<double>& headroom_fractions) {
  const bool queued = !instance.waiting.empty() || !instance.swapped.empty();
  std::int64_t usage_blocks = instance.kv.used_blocks + instance.unsynced_kv_blocks();
  usage_blocks += instance.head_of_line_demand_blocks();  // 0 with nothing queued
  double usage = static_cast<double>(usage_blocks);
  const std::vector<std::int64_t>& counts = instance.tier_counts();
  std::string beyond;
  double present = 0.0;  // Python's sum() from int 0: the first addition is exact either way
  for (std::size_t tier = 0; tier < counts.size(); ++tier) {
    if (counts[tier] <= 0) continue;
    if (tier >= headroom_fractions.size()) {
      beyond += (beyond.empty() ? "" : ", ") + std::to_string(tier);
    } else {
      present = present + headroom_fractions[tier];
    }
  }
  if (!beyond.empty()) {
    throw std::invalid_argument("requests of tier(s) [" + beyond + "] on instance " +
                                std::to_string(instance.instance_id) + ", but headroom fractions cover tiers 0.." +
                                std::to_string(static_cast<std::int64_t>(headroom_fractions.size()) - 1));
  }
  const auto total = static_cast<double>(instance.kv.total_blocks);
  usage += total * present;
  const auto batch = static_cast<std::int64_t>(instance.running.size()) + (queued ? 1 : 0);
  if (batch == 0) return std::numeric_limits<double>::infinity();
  return (total - usage) / static_cast<double>(batch);
}

void Router::set_headroom_fractions(std::vector<double>) {
  throw std::logic_error("this router has no headroom fractions");
}

void Router::set_units(std::vector<std::int32_t>, std::vector<std::int32_t>, std::vector<double>) {
  throw std::logic_error("this router routes to no units");
}

std::unique_ptr<Router> make_router(const RouterSpec& spec) {
  const std::string& name = spec.name;
  if (name == "round_robin") return std::make_unique<RoundRobinRouter>();
  if (name == "least_loaded") return std::make_unique<LeastLoadedRouter>();
  if (name == "session_affinity") return std::make_unique<SessionAffinityRouter>(spec.session_targets);
  if (name == "llumnix") return std::make_unique<FreestInstanceRouter>(spec.headroom_fractions);
  if (name == "units") return std::make_unique<WeightedUnitRouter>();
  throw std::invalid_argument("router '" + name +
                              "' is not compiled; compiled: round_robin, least_loaded, session_affinity, llumnix, units");
}

}  // namespace servegym_core
