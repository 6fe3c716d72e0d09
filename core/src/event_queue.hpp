// The event queue (simulator/events.py): a binary heap ordered by (time, insertion counter), so
// events at the same time run in the order they were scheduled, as heapq pops them.
#pragma once

#include <cstdint>
#include <vector>

namespace servegym_core {

enum class EventKind : std::uint8_t {
  Arrival,          // a: unused, b: the request's row (Cluster._on_arrival)
  Boundary,         // a: instance, b: the segment version it ends (Instance._on_boundary)
  FrontendEnqueue,  // a: instance, b: the request's row, after the engine's frontend time (Cluster.dispatch)
  Wake,             // a: instance, b: its wake version (PipelinedInstance._on_wake)
  MicrobatchEnd,    // a: instance, b: the microbatch's id (PipelinedInstance._on_microbatch_end)
  TransferDone,     // a: target instance, b: the request's row, its KV arrived (Cluster._transfer)
  Started,          // a: instance, its weights loaded (Cluster._on_started)
  MigrationStage,   // b: the live migration whose stage's copy ended (Cluster._migration_stage)
  MigrationHandOff, // b: the live migration whose final copy ended (Cluster._final_stage)
  PythonCallback,   // b: the slot of a Python callback (Cluster.every's ticks): advance stops for it
  GateDeadline,     // a: instance, b: the bits of its queue gate's deadline (QueueGate._on_deadline)
  AddedArrival,     // b: the row of a request added while serving (Cluster.add_arrival)
  Judge,            // b: the model cascade's judgement that ends (CascadeRouter._judged)
};

struct Event {
  double time_s;
  std::uint64_t counter;
  EventKind kind;
  std::int32_t a;
  std::int64_t b;
};

class EventQueue {
 public:
  double now_s = 0.0;

  // Throws std::logic_error for a time before the clock (EventQueue.schedule's ValueError).
  void schedule(double time_s, EventKind kind, std::int32_t a, std::int64_t b);
  bool empty() const { return heap_.empty(); }
  // The earliest event's time (the queue must not be empty).
  double peek_time_s() const { return heap_.front().time_s; }
  std::size_t size() const { return heap_.size(); }
  // Removes the earliest event and moves the clock to its time.
  Event pop();

 private:
  std::vector<Event> heap_;
  std::uint64_t counter_ = 0;
};

}  // namespace servegym_core
