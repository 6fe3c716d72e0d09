// The cluster's event loop for aggregated instances (simulator/cluster.py's arrivals,
// dispatch, on_complete / on_reject and run), holding every instance, the request table, the
// event queue and the outcome log. Python validates configs and requests and fills it
// (simulator/compiled.py); run() then needs no Python until the end.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "event_queue.hpp"
#include "instance.hpp"
#include "instance_arrays.hpp"
#include "latency.hpp"
#include "outcomes.hpp"
#include "request_table.hpp"
#include "routers.hpp"

namespace servegym_core {

class Engine : public InstanceHost {
 public:
  // `router`: as make_router takes it (its session_targets come with the requests), or
  // "external": every arrival stops `advance` for a route decision, answered with
  // dispatch_decision. `model_names[i]` names model index i (for messages). With
  // `track_arrays` the instances keep the observation arrays (arrays()).
  Engine(RouterSpec router, bool record_token_curves, std::vector<std::string> model_names,
         bool track_arrays = false);

  // A new serving instance (ids are dense, in order); the evaluator is copied.
  std::int32_t add_instance(const InstanceSettings& settings, const LatencyEvaluator& latency);
  // The requests, sorted by arrival (checked in Python), as columns; session_targets as
  // RouterSpec holds them. Schedules the first arrival. Throws std::logic_error if called twice.
  void submit(const std::vector<std::int64_t>& request_id, const std::vector<double>& arrival_s,
              const std::vector<std::int64_t>& prompt_tokens, const std::vector<std::int64_t>& output_tokens,
              const std::vector<std::int64_t>& reasoning_tokens, const std::vector<std::int64_t>& tier,
              const std::vector<std::int32_t>& model_index, std::vector<std::int32_t> session_targets);
  // Prefix caching: row r's chained block keys are keys[offsets[r], offsets[r + 1]) of blocks of
  // block_tokens[r] tokens (0: the request carries no block hashes). After submit, before run.
  void set_block_keys(const std::vector<std::int64_t>& block_tokens, const std::vector<std::int64_t>& offsets,
                      const std::vector<std::int64_t>& keys);
  // Runs every event; throws std::runtime_error if a request neither completed nor was rejected.
  void run();
  // Runs events up to until_s or until a request waits for a route decision; returns its row,
  // or -1 (then the clock is at until_s when that is finite and later). Cluster.advance.
  Req advance(double until_s);
  // Answer the pending route decision of row r: send it to instance_id (Cluster.dispatch).
  void dispatch_decision(Req r, std::int32_t instance_id);
  const InstanceArrays* arrays() const { return arrays_.get(); }
  // llumnix: route with these headroom fractions from now on (after submit).
  void set_headroom_fractions(std::vector<double> fractions);
  std::size_t num_outcomes() const { return outcomes_.size(); }
  std::size_t arrived() const { return arrived_; }

  double now_s() const { return events_.now_s; }
  // The outcomes recorded from the `first`-th on, as columns, in the order recorded.
  OutcomeTable outcome_table(std::size_t first = 0) const;
  const Instance& instance(std::int32_t instance_id) const;

  void on_complete(std::int32_t instance_id, Req r) override;
  void on_reject(Req r, RejectReason reason) override;

 private:
  void schedule_next_arrival();
  void step(const Event& event);
  void admit(Req r);
  void dispatch(Req r, std::int32_t instance_id);

  RouterSpec router_spec_;
  std::vector<std::string> model_names_;
  EventQueue events_;
  RequestTable requests_;
  OutcomeLog outcomes_;
  std::vector<std::unique_ptr<Instance>> instances_;
  std::unique_ptr<Router> router_;  // null for an external router
  bool external_router_ = false;
  Req pending_route_ = -1;
  std::size_t arrived_ = 0;
  std::unique_ptr<InstanceArrays> arrays_;
  std::size_t next_arrival_ = 0;
  bool submitted_ = false;
};

}  // namespace servegym_core
