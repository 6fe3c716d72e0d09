// The compiled global routers (simulator/routers): which instance takes each arrival.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "instance.hpp"
#include "sim_types.hpp"

namespace servegym_core {

class Router {
 public:
  virtual ~Router() = default;
  // The instance (an index into `instances`) that takes request r; throws std::runtime_error
  // naming the request when no instance can.
  virtual std::int32_t route(const std::vector<std::unique_ptr<Instance>>& instances, const RequestTable& requests,
                             Req r) = 0;
};

// round_robin: the i-th arrival goes to the (i mod n)-th routable instance; least_loaded: the
// fewest requests (lowest id on ties); session_affinity: the instance the request's session
// maps to (`session_targets`, worked out in Python from the consistent-hash ring, -1 for a
// request without a session), else least loaded. Throws std::invalid_argument for another name.
std::unique_ptr<Router> make_router(const std::string& name, std::vector<std::int32_t> session_targets);

}  // namespace servegym_core
