// One aggregated model replica running one batch at a time (simulator/instance.py's Instance,
// ported line by line for the subset without pipelining, transfers, migration and the queue
// gate): its queues, KV pool and prefix cache, segment in progress and boundary events.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "event_queue.hpp"
#include "instance_arrays.hpp"
#include "kv_blocks.hpp"
#include "latency.hpp"
#include "prefix_cache.hpp"
#include "queue_gate.hpp"
#include "request_table.hpp"
#include "schedulers/base.hpp"
#include "schedulers/registry.hpp"
#include "segments.hpp"
#include "sim_types.hpp"

namespace servegym_core {

// What Python's InstanceConfig.resolved() and Instance.__init__ worked out for one replica.
struct InstanceSettings {
  std::int64_t total_blocks = 0;
  std::int64_t block_size = 0;
  std::int64_t watermark_blocks = 0;
  std::int64_t max_batch_size = 0;
  std::int64_t max_batched_tokens = 0;
  std::int64_t context_tokens = 0;  // the model's context window
  double swap_s_per_token = 0.0;    // host-link seconds per swapped KV token
  double frontend_s = 0.0;          // the engine's frontend time before a request is queued
  // KV transfers between instances (Cluster.link_gbps, hardware.latency.kv_transfer_time_s).
  std::int32_t gpu_index = 0;            // the GPU type's index (same type: the intra-node link)
  double intra_node_link_gbps = 0.0;
  double host_link_gbps = 0.0;
  double kv_bytes_per_token = 0.0;
  bool preempt_by_swap = false;     // preemption "swap" (else "recompute")
  bool prefix_caching = false;            // automatic prefix caching (InstanceConfig.prefix_caching)
  std::int64_t host_capacity_blocks = 0;  // its host tier (InstanceConfig.host_cache_gb), in KV blocks
  std::int32_t model_index = 0;
  std::int32_t role = 0;  // ROLE_CODES: 0 aggregated, 1 prefill, 2 decode
  std::int64_t max_segment_iterations = 1024;  // 1: coalesce=False
  std::int64_t pp = 1;                          // pipeline stages
  std::int64_t pipeline_depth = 1;              // microbatches in flight (> 1: a PipelinedInstance)
  SchedulerOptions scheduler;
};

// What an instance tells the engine around it (simulator.instance.InstanceHost).
class InstanceHost {
 public:
  virtual ~InstanceHost() = default;
  virtual void on_complete(std::int32_t instance_id, Req r) = 0;
  virtual void on_reject(Req r, RejectReason reason) = 0;
  // r finished reasoning on instance_id and is still running there.
  virtual void on_phase_change(std::int32_t instance_id, Req r) = 0;
  // The instance found nothing to run (Cluster.on_idle: a draining instance stops when empty).
  virtual void on_idle(std::int32_t instance_id) = 0;
  // r finished its prefill on a prefill instance and moves to a decode instance (PD hand-off).
  virtual void on_prefill_done(std::int32_t instance_id, Req r) = 0;
  // detach_at_boundary's callbacks: r was taken out at the boundary (live migration's final
  // stage starts), or had left the batch by then (the migration is abandoned).
  virtual void on_detached(std::int64_t token, Req r) = 0;
  virtual void on_detach_gone(std::int64_t token) = 0;
};

class Instance {
 public:
  Instance(std::int32_t instance_id, const InstanceSettings& settings, const LatencyEvaluator& latency,
           EventQueue& events, RequestTable& requests, InstanceHost& host);
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;
  virtual ~Instance() = default;

  // A request joins the waiting queue after the context rule of this instance's model: a prompt
  // longer than the context is rejected, a longer output capped; one over the KV pool rejected.
  void enqueue(Req r);
  // Keep row instance_id of `arrays` current from now on (queues, KV); before it serves.
  void track(InstanceArrays& arrays);
  // Instance.set_min_queue_length: no new prefill batch until `length` requests wait or the oldest
  // waited max_wait_s (length 1: off); re-plans if that changed anything. Throws
  // std::invalid_argument for a length below 1 or a negative or infinite wait.
  void set_min_queue_length(std::int64_t length, double max_wait_s);
  // The queue gate's GateDeadline event for `deadline`.
  void on_gate_deadline(double deadline);
  // Take r, whose KV arrives over the network, into the batch: false (nothing taken) if its
  // blocks or a batch slot are not free now (Instance.accept_running).
  bool accept_running(Req r);
  // Take r, whose KV just arrived: into the batch if it fits now, else parked with the swapped
  // requests; rejected if it can never fit (Instance.accept_transferred).
  void accept_transferred(Req r);
  // Take r out (it leaves for another instance); its GPU blocks are freed (Instance.remove).
  void remove(Req r);
  // Take the running r out after the iteration in progress, then tell the host with `token`
  // (Instance.detach_at_boundary: the hand-off of live migration, Llumnix-K §3.5).
  void detach_at_boundary(Req r, std::int64_t token);
  // The request the instance would migrate out (Instance.migration_candidate): the last queued
  // one in the local scheduler's order, else the running decode request of the lowest priority
  // with the fewest KV tokens, skipping the request ids in `excluded`; -1 if none.
  Req migration_candidate(const std::vector<std::int64_t>& excluded) const;
  // r gives up its GPU blocks (completed or preempted): with a prefix cache its full blocks stay
  // cached (PrefixCache::free), else they are released (KVBlockManager.free).
  void free_kv(Req r);
  // Something changed: re-plan at the next iteration boundary.
  virtual void poke();
  // Apply the decode iterations finished by now, so counters and KV use are current.
  void sync();
  // The boundary event of segment `version` (stale versions are ignored).
  void on_boundary(std::int64_t version);
  // A pipelined instance's events (simulator/pipeline.py); a plain instance has none.
  virtual void on_wake(std::int64_t version);
  virtual void on_microbatch_end(std::int64_t batch_id);

  std::size_t num_requests() const { return waiting.size() + running.size() + swapped.size(); }
  Lifecycle lifecycle() const { return lifecycle_; }
  bool serving() const { return lifecycle_ == Lifecycle::Serving; }
  // Cluster.routable_ids: serving and not decode-only (role 2), so it may take a new request.
  bool routable() const { return serving() && settings.role != 2; }
  // Instance.lifecycle's setter: the arrays' lifecycle column follows.
  void set_lifecycle(Lifecycle lifecycle);
  // KV blocks the decode iterations finished by now but not yet applied (sync) fill: the sum over
  // the segment's sequences of ceil((kv + d) / b) - blocks for the d iterations done.
  std::int64_t unsynced_kv_blocks() const;
  // unsynced_kv_blocks plus the growth of the iteration under way, which a re-plan keeps and applies
  // at its end: what a sequence joining the batch now must leave free (accept_running).
  std::int64_t committed_kv_blocks() const;
  // The blocks the first queued (waiting, then swapped) request in priority order would take:
  // its prefill's, or a swapped one's KV plus its next token's slot; 0 with nothing queued.
  std::int64_t head_of_line_demand_blocks() const;
  // Its requests now: reasoning, answering, fresh answering (fewer than fresh_tokens answered),
  // demoted reasoning, answers overdue (reasoning ended before overdue_before_s and not running
  // since); Instance.request_counts.
  std::array<std::int64_t, 5> request_counts(double overdue_before_s, std::int64_t fresh_tokens) const;
  // PASCAL's token-pacer flag (simulator.pacer): some answering request delivered fewer answer
  // tokens by now than one per tpot_target_s since its first; applies the finished decode
  // iterations first, as Instance.answering_behind_pace does.
  bool answering_behind_pace(double tpot_target_s);
  // Requests of each tier here now (waiting, running or swapped); grown as tiers arrive.
  const std::vector<std::int64_t>& tier_counts() const { return tier_counts_; }
  // Largest prompt + output a request may have here (the KV it needs at its end).
  std::int64_t max_request_tokens() const { return (kv.total_blocks - kv.watermark_blocks) * kv.block_size; }
  // KV blocks a new batch may hold: the pool less those of sequences inside a batch still in
  // the pipeline.
  std::int64_t batch_capacity_blocks() const { return kv.total_blocks - flying_blocks_; }

  const std::int32_t instance_id;
  const InstanceSettings settings;
  EventQueue& events;
  RequestTable& requests;
  KVBlocks kv;
  std::unique_ptr<PrefixCache> cache;  // null without prefix caching
  LatencyEvaluator latency;
  std::unique_ptr<LocalScheduler> scheduler;
  InstanceArrays* arrays = nullptr;  // the engine's arrays when it keeps them
  QueueGate gate;
  // Sequences one batch may hold (a microbatch's share in a pipelined instance).
  const std::int64_t max_batch_size;

  // waiting and swapped keep their first *_ordered entries in priority order (queue_order.hpp).
  std::vector<Req> waiting;
  std::vector<Req> running;
  std::vector<Req> swapped;
  std::size_t waiting_ordered = 0;
  std::size_t swapped_ordered = 0;
  // KV tokens swapped in or out since the last batch formed: the next iteration waits for them.
  std::int64_t swap_tokens = 0;
  // A preemption or swap-in since the last batch formed: the next decode plan runs one iteration.
  bool memory_moved = false;
  bool busy = false;

  // Scratch of reserve_decode_slots: the running sequences that grow by a block, and by how many.
  std::vector<std::pair<Req, std::int64_t>> growing;

  double busy_time_s = 0.0;
  std::int64_t iterations = 0;
  std::int64_t context_truncated = 0;

 protected:
  // The next batch (scheduler's form_batch) into prefills and decode, with the swap seconds to
  // add and whether memory moved; false if it is empty (Instance._form_batch).
  bool form_batch(double now, std::vector<Prefill>& prefills, std::vector<Req>& decode, double& extra_s,
                  bool& single_iteration);
  // Requests of r's tier here change by sign.
  void count_tier(Req r, std::int64_t sign);
  // Hand off the sequences detach_at_boundary asked for (those in a batch in flight wait).
  void run_detaches();
  // Cut the planned segment after the iteration in progress now.
  void truncate();
  // Apply the segment's decode iterations up to `upto`; at the segment's end, append to
  // `attention` (when given) the sequences that completed or ended their reasoning.
  void apply_decode(std::size_t upto, std::vector<Req>* attention);
  // Apply the finished segment's tokens, completions and phase changes.
  void end_segment(double now);
  // Completion and phase change, after r emitted a token.
  void after_token(Req r);
  void plan(double now);
  // The segment's decode iterations ended by now, past those applied.
  std::int64_t decode_iterations_done() const;
  // Σ over the segment's decode sequences of ceil((kv + done) / b) − blocks.
  std::int64_t decode_growth_blocks(std::int64_t done) const;

  InstanceHost& host_;
  SegmentPlanner planner_;
  std::int64_t flying_blocks_ = 0;  // blocks of the sequences in flight while a microbatch forms
  Lifecycle lifecycle_ = Lifecycle::Serving;
  std::vector<std::pair<Req, std::int64_t>> detach_;  // (request, token) to take out at the boundary
  std::vector<std::int64_t> tier_counts_;
  std::int64_t version_ = 0;
  double seg_start_s_ = 0.0;
  std::vector<double> seg_ends_;
  std::size_t seg_pos_ = 0;
  std::size_t seg_len_ = 0;
  std::vector<Req> seg_decode_;
  std::vector<Prefill> seg_prefill_;
  std::vector<Req> finished_;  // scratch of end_segment
  std::vector<Prefill> next_prefills_;  // scratch of plan
  std::vector<Req> next_decode_;        // scratch of plan
};

}  // namespace servegym_core
