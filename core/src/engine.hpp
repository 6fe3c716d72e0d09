// The cluster's event loop for aggregated instances (simulator/cluster.py's arrivals,
// dispatch, on_complete / on_reject and run), holding every instance, the request table, the
// event queue and the outcome log. Python validates configs and requests and fills it
// (simulator/compiled.py); run() then needs no Python until the end.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cascade.hpp"
#include "event_queue.hpp"
#include "instance.hpp"
#include "instance_arrays.hpp"
#include "latency.hpp"
#include "outcomes.hpp"
#include "request_table.hpp"
#include "routers.hpp"

namespace servegym_core {

// A point where the engine waits for Python (simulator.cluster.Decision): a new arrival to route
// (an external router), or a request that finished reasoning on `instance_id` to place (external
// phase decisions).
// A Callback stop is a Python timer due now (row: its slot); it needs no answer.
// A Completion stop: a request completed on instance_id and a Python completion hook decides what
// becomes of it (its outcome is not recorded by the engine); it needs no answer either.
enum class DecisionKind : std::uint8_t { None = 0, Route = 1, Phase = 2, Callback = 3, Completion = 4 };
struct Decision {
  DecisionKind kind = DecisionKind::None;
  Req row = -1;
  std::int32_t instance_id = -1;
};

// Live migration's stages (simulator.cluster.MigrationConfig, Llumnix-K §3.5).
struct MigrationSettings {
  std::int64_t last_stage_max_blocks = 16;
  std::int64_t max_stages = 3;
};

// One live migration in progress: its request, instances, the KV tokens copied so far and the
// stage running.
struct Migration {
  Req r;
  std::int32_t source;
  std::int32_t target;
  std::int64_t copied_tokens;
  std::int64_t to_copy_tokens;
  std::int64_t stage;
};

class Engine : public InstanceHost {
 public:
  // `router`: as make_router takes it (its session_targets come with the requests),
  // "external": every arrival stops `advance` for a route decision, answered with
  // dispatch_decision, or "cascade": a model cascade routes and judges (set_cascade). `model_names[i]` names model index i (for messages). With
  // `track_arrays` the instances keep the observation arrays (arrays()).
  Engine(RouterSpec router, bool record_token_curves, std::vector<std::string> model_names,
         bool track_arrays = false, bool external_phase_decisions = false);

  // A new serving instance (ids are dense, in order); the evaluator is copied. Before or after
  // submit (scaling).
  std::int32_t add_instance(const InstanceSettings& settings, const LatencyEvaluator& latency);
  // The instance is starting and serves from time_s on (Cluster._start_at).
  void start_at(std::int32_t instance_id, double time_s);
  // Set an instance's lifecycle from Python (Cluster.drain and _stop).
  void set_lifecycle(std::int32_t instance_id, Lifecycle lifecycle);
  // The instances that stopped by themselves (drained and empty) since the last call, with when:
  // Python releases their GPUs then (Cluster._release).
  std::vector<std::pair<std::int32_t, double>> take_stops();
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
  // Runs events up to until_s or until a decision is due; returns it (kind None: the clock is
  // then at until_s when that is finite and later). Cluster.advance.
  Decision advance(double until_s);
  // Answer the pending route decision of row r: send it to instance_id (Cluster.dispatch).
  void dispatch_decision(Req r, std::int32_t instance_id);
  // Answer the pending phase decision of row r: continue answering on instance_id, the same
  // instance or another one after a KV transfer (Cluster.place_answering).
  void place_answering(Req r, std::int32_t instance_id);
  // GPU combos (simulator.combo_cluster, Cauchy §3.4.2): the prefill instance `entry_id` hands
  // its requests to one of decode_ids after their prefill, in turn (basic_rr) or to the one with
  // the fewest requests (opportunistic), to itself when none of them serves.
  void add_combo(std::int32_t entry_id, std::vector<std::int32_t> decode_ids, bool basic_rr);
  // Answer the pending route decision of row r by running it wholly on instance_id, whatever its
  // role (Cluster.dispatch_in_place: no frontend time, no hand-off).
  void dispatch_in_place(Req r, std::int32_t instance_id);
  // A "units" router's choice `entry_id`, for new request r: ComboCluster.dispatch's opportunistic
  // in-place run on an idle member of its combo; false (nothing done) where it does not apply.
  bool place_in_combo(Req r, std::int32_t entry_id);
  // Completions stop advance for a Python hook instead of being recorded (Cluster.completion_hook).
  void set_completion_hook(bool on) { completion_hook_ = on; }
  // Cluster.phase_router: called inside the iteration boundary where a request finishes reasoning,
  // with its row and instance; it returns the instance to answer on (-1 or the same one: stay).
  using PhaseRouter = std::function<std::int32_t(Req, std::int32_t)>;
  void set_phase_router(PhaseRouter router) { phase_router_ = std::move(router); }
  // The router "cascade"'s stages (the engine's model index of each) and judge latency: arrivals
  // enter the entry stage, completions are judged (Cascade, simulator.routers.cascade). Once,
  // before submit.
  void set_cascade(std::vector<std::int32_t> stage_models, double judge_latency_s);
  // The cascade, to set its thresholds, entry stage, scores and signals between steps; throws
  // std::logic_error without one.
  Cascade& cascade();
  // A new row for row r's request, state fresh but for the given carried-over fields, sent to
  // instance_id now (a model cascade's next stage, simulator.routers.cascade); returns the row.
  Req redispatch(Req r, std::int32_t instance_id, double first_scheduled_s, double preempted_s,
                 std::int32_t num_preemptions, std::int32_t num_migrations);
  // One more request arriving at max(arrival_s, now) (Cluster.add_arrival: a closed-loop client's
  // next request); returns its row.
  Req add_arrival(const RequestRow& row);
  // Row r's outcome ending at finish_s, as a one-row outcome table (Sequence.outcome).
  OutcomeTable outcome_of(Req r, double finish_s) const;
  // Stop advance at time_s for the Python callback in `slot` (Cluster.every's ticks).
  void schedule_callback(double time_s, std::int64_t slot) {
    events_.schedule(time_s, EventKind::PythonCallback, -1, slot);
  }
  // Generated and KV tokens of row r now.
  std::pair<std::int64_t, std::int64_t> request_tokens(Req r) const;
  // Live-migrate row r to target_id (Cluster.migrate after its Python checks): a queued request
  // moves at once, a running decode request in stages while it decodes; false (nothing done)
  // when the target cannot take it now. Throws std::invalid_argument for another request.
  bool migrate(Req r, std::int32_t target_id);
  void set_migration(MigrationSettings settings) { migration_ = settings; }
  const RequestTable& requests() const { return requests_; }
  std::int64_t migrations_started = 0;
  std::int64_t migrations_done = 0;
  std::int64_t migrations_aborted = 0;
  // New requests a "units" router sent to a PD combo that ran wholly in place on an idle member
  // (ComboCluster.in_place_dispatches).
  std::int64_t in_place_dispatches = 0;
  const InstanceArrays* arrays() const { return arrays_.get(); }
  // llumnix: route with these headroom fractions from now on (after submit).
  void set_headroom_fractions(std::vector<double> fractions);
  // units: route to these units from now on (after submit): unit u is the instances
  // members[offsets[u]..offsets[u + 1]), its entry first, with routing weight weights[u].
  // Throws std::invalid_argument for an unknown instance, an empty unit or a weight that is not
  // positive and finite.
  void set_units(std::vector<std::int32_t> offsets, std::vector<std::int32_t> members, std::vector<double> weights);
  // Per instance of ids: the request it would migrate out (Instance::migration_candidate,
  // skipping request ids in excluded) as (queued 1 / running 0, prompt + generated tokens, KV
  // tokens, tier), or four -1s where there is none; flat, 4 values an instance.
  std::vector<std::int64_t> migration_candidates(const std::vector<std::int32_t>& ids,
                                                 const std::vector<std::int64_t>& excluded) const;
  std::size_t num_outcomes() const { return outcomes_.size(); }
  // The outcome log itself (rows, finish times, reasons in the order recorded): the MDP kernels read it.
  const OutcomeLog& outcome_log() const { return outcomes_; }
  std::size_t num_instances() const { return instances_.size(); }
  std::size_t arrived() const { return arrived_; }

  double now_s() const { return events_.now_s; }
  // At most `count` outcomes recorded from the `first`-th on, as columns, in the order recorded.
  OutcomeTable outcome_table(std::size_t first, std::size_t count) const;
  const Instance& instance(std::int32_t instance_id) const;
  Instance& instance_mut(std::int32_t instance_id) { return instance_at(instance_id); }

  void on_complete(std::int32_t instance_id, Req r) override;
  void on_reject(Req r, RejectReason reason) override;
  void on_phase_change(std::int32_t instance_id, Req r) override;
  void on_idle(std::int32_t instance_id) override;
  void on_detached(std::int64_t token, Req r) override;
  void on_prefill_done(std::int32_t instance_id, Req r) override;
  void on_detach_gone(std::int64_t token) override;

 private:
  void schedule_next_arrival();
  void step(const Event& event);
  void admit(Req r);
  void dispatch(Req r, std::int32_t instance_id);
  // Move a paused r's whole KV from source to target (Cluster._transfer).
  void transfer(Req r, const Instance& source, std::int32_t target_id);
  // Seconds to copy `tokens` KV tokens from source to target (Cluster.link_gbps, kv_transfer_time_s).
  double transfer_s(const Instance& source, const Instance& target, std::int64_t tokens) const;
  // Start copying migration m's KV not copied yet (Cluster._migration_stage).
  void migration_stage(std::int64_t m);
  void on_migration_stage(std::int64_t m);
  // A cascade stage's answer completed on instance_id: accept it (the last stage) or judge it
  // (CascadeRouter.on_complete).
  void cascade_complete(std::int32_t instance_id, Req r);
  // The judgement ended: accept, or forward to the next stage (CascadeRouter._judged).
  void on_judged(std::int64_t j);
  // The decision due first (a Completion stop is removed as it is returned).
  Decision next_decision();
  // The pending decision, checked to be of `kind` for row r; removed.
  Decision take_decision(DecisionKind kind, Req r);
  Instance& instance_at(std::int32_t instance_id);

  RouterSpec router_spec_;
  std::vector<std::string> model_names_;
  EventQueue events_;
  RequestTable requests_;
  OutcomeLog outcomes_;
  std::vector<std::unique_ptr<Instance>> instances_;
  std::unique_ptr<Router> router_;  // null for an external router or a cascade
  std::unique_ptr<Cascade> cascade_;
  bool external_router_ = false;
  bool cascade_router_ = false;
  bool units_router_ = false;  // its choice is checked to serve the request's model (Cluster._refusal)
  bool external_phase_decisions_ = false;
  bool completion_hook_ = false;
  PhaseRouter phase_router_;
  std::deque<Decision> decisions_;  // the one due first, then those that came with it
  std::vector<std::pair<std::int32_t, double>> stops_;
  MigrationSettings migration_;
  struct Combo {
    std::int32_t entry;
    std::vector<std::int32_t> decode_ids;
    bool basic_rr;
    std::int64_t turn = 0;
  };
  std::vector<Combo> combos_;
  std::vector<std::int32_t> combo_of_;  // by instance id: its combo's index, -1 for none
  std::vector<Migration> migrations_;
  std::size_t arrived_ = 0;
  std::unique_ptr<InstanceArrays> arrays_;
  std::size_t next_arrival_ = 0;
  std::size_t submitted_rows_ = 0;  // the workload's rows, which arrive; rows added later do not
  std::size_t redispatched_rows_ = 0;  // rows that continue another row's request: no outcome of their own
  bool submitted_ = false;
};

}  // namespace servegym_core
