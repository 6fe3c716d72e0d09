#include "event_queue.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace servegym_core {

namespace {

// std::push_heap keeps the largest on top: "later" puts the earliest (time, counter) there.
struct Later {
  bool operator()(const Event& x, const Event& y) const {
    return x.time_s > y.time_s || (x.time_s == y.time_s && x.counter > y.counter);
  }
};

}  // namespace

void EventQueue::schedule(double time_s, EventKind kind, std::int32_t a, std::int64_t b) {
  if (time_s < now_s) {
    throw std::logic_error("cannot schedule an event at " + std::to_string(time_s) + " s, before the clock (" +
                           std::to_string(now_s) + " s)");
  }
  ++counter_;
  heap_.push_back(Event{time_s, counter_, kind, a, b});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
}

Event EventQueue::pop() {
  std::pop_heap(heap_.begin(), heap_.end(), Later{});
  const Event event = heap_.back();
  heap_.pop_back();
  now_s = event.time_s;
  return event;
}

}  // namespace servegym_core
