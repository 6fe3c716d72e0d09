// Queues kept in priority order as entries join them (simulator/queue_order.py): order_queue
// gives the order a full stable sort would, sorting only the entries added since `ordered`.
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "sim_types.hpp"

namespace servegym_core {

// `queue` in the order std::stable_sort by `key` gives, knowing its first `ordered` entries
// already are: the rest are stable-sorted and each inserted after its equals (bisect.insort).
template <class KeyOf>
void order_queue(std::vector<Req>& queue, std::size_t ordered, KeyOf key) {
  if (ordered >= queue.size()) return;
  const auto by_key = [&key](Req x, Req y) { return key(x) < key(y); };
  if (ordered == 0) {
    std::stable_sort(queue.begin(), queue.end(), by_key);
    return;
  }
  std::vector<Req> tail(queue.begin() + static_cast<std::ptrdiff_t>(ordered), queue.end());
  queue.resize(ordered);
  std::stable_sort(tail.begin(), tail.end(), by_key);
  if (!(key(tail.front()) < key(queue.back()))) {
    queue.insert(queue.end(), tail.begin(), tail.end());
    return;
  }
  for (const Req item : tail) {
    const Key item_key = key(item);
    const auto at = std::upper_bound(queue.begin(), queue.end(), item_key,
                                     [&key](const Key& k, Req other) { return k < key(other); });
    queue.insert(at, item);
  }
}

// Removes `item` (its first occurrence) and returns how many leading entries stay in order.
inline std::size_t take_from_queue(std::vector<Req>& queue, Req item, std::size_t ordered) {
  const auto at = std::find(queue.begin(), queue.end(), item);
  if (at == queue.end()) throw std::logic_error("take_from_queue: the request is not in the queue");
  const auto index = static_cast<std::size_t>(at - queue.begin());
  queue.erase(at);
  return index < ordered ? ordered - 1 : ordered;
}

// list.remove: erases the first occurrence, keeping the order of the rest.
inline void remove_first(std::vector<Req>& list, Req item) {
  const auto at = std::find(list.begin(), list.end(), item);
  if (at == list.end()) throw std::logic_error("remove_first: the request is not in the list");
  list.erase(at);
}

}  // namespace servegym_core
