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
  // llumnix: the headroom fractions from now on (Tier-v0 sets them every step); throws
  // std::logic_error for a router that has none.
  virtual void set_headroom_fractions(std::vector<double> fractions);
  // units: the deployed units from now on, unit u being members[offsets[u]..offsets[u + 1])
  // (its entry first) with routing weight weights[u] (checked by Engine::set_units); throws
  // std::logic_error for another router.
  virtual void set_units(std::vector<std::int32_t> offsets, std::vector<std::int32_t> members,
                         std::vector<double> weights);
};

// What a router is built from: its name, and what some of them take.
struct RouterSpec {
  std::string name = "round_robin";
  // session_affinity: the instance each request's session maps to (worked out in Python from
  // the consistent-hash ring; -1 for a request without a session), by request row.
  std::vector<std::int32_t> session_targets;
  // llumnix: the headroom fraction h_p of each tier p (Llumnix-K eq. 3-4).
  std::vector<double> headroom_fractions;
};

// round_robin: the i-th arrival goes to the (i mod n)-th routable instance; least_loaded: the
// fewest requests (lowest id on ties); session_affinity: the instance the request's session maps
// to, else least loaded; llumnix: the instance of the request's model with the highest F_full
// (simulator.routers.freeness, instance by instance; the first on ties); units: the entry of the
// unit whose entry serves and whose (requests on its instances + 1) / weight is lowest, the first
// unit on ties (simulator.routers.units, Scaling-v0; no unit until set_units). Throws
// std::invalid_argument for another name.
std::unique_ptr<Router> make_router(const RouterSpec& spec);

// F_full of one serving instance (simulator.headroom.freeness_full): (M - usage - M * sum of the
// present tiers' fractions) / (running + 1 if anything is queued), the float operations in
// Python's order; infinite with no request. Throws std::invalid_argument when a tier present
// has no fraction.
double freeness_full(const Instance& instance, const std::vector<double>& headroom_fractions);

}  // namespace servegym_core
