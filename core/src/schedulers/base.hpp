// The local-scheduler interface (simulator/schedulers/base.py): request order, preemption
// victims and how a batch is formed on one instance; this class is vLLM v0's default
// (simulator/schedulers/fcfs.py adds nothing to it).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "request_table.hpp"
#include "sim_types.hpp"

namespace servegym_core {

class Instance;

class LocalScheduler {
 public:
  virtual ~LocalScheduler() = default;

  // Smaller runs first; the preemption victim is the largest. Fixed while a request is queued.
  virtual Key priority_key(const RequestTable& requests, Req r) const { return Key{0, requests.queue_order[r]}; }
  virtual void on_enqueue(RequestTable& requests, Req r) { requests.queue_order[r] = next_order(); }
  // Called when r finished reasoning (its next token is the first answer token).
  virtual void on_phase_change(RequestTable&, Req) {}
  // Whether priority keys of running requests change (then iterations_until_change is asked).
  virtual bool priority_may_change() const { return false; }
  // Decode iterations until r's priority changes (the instance re-plans there).
  virtual std::int64_t iterations_until_change(const RequestTable&, Req) const { return 0; }

  // The next batch: its prefill chunks and its decode sequences (every running one between
  // tokens; none beside whole prefills unless prefills are chunked). Both come in empty.
  void form_batch(Instance& instance, double now, std::vector<Prefill>& prefills, std::vector<Req>& decode);

  // Sarathi-style token budget per iteration; none: whole prefills in prefill-only iterations.
  std::optional<std::int64_t> chunked_prefill_tokens;

 protected:
  // vLLM v0 (Scheduler._schedule_default): admit waiting requests in priority order into free
  // memory for a prefill-only iteration of at most max_batched_tokens prompt tokens (a longer
  // prompt runs alone), none while a request is swapped out; with none admitted, reserve the
  // decode slots and swap back in what fits.
  virtual void schedule(Instance& instance, double now, std::vector<Prefill>& prefills);
  // Called at every iteration boundary, before the batch is formed.
  virtual void on_boundary(Instance&) {}

  std::int64_t next_order() { return ++order_; }
  void order_waiting(Instance& instance) const;
  void order_swapped(Instance& instance) const;
  // Swap sequences back in, in priority order, while their decode slots fit.
  void swap_in_in_order(Instance& instance, double now) const;

 private:
  std::int64_t order_ = 0;
};

}  // namespace servegym_core
