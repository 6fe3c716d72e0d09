// Integer keys kept in insertion order, each with a value (Python's OrderedDict used as a queue
// in simulator/prefix_cache.py): append, remove by key and pop the oldest, each in O(1).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

namespace servegym_core {

class OrderedKeys {
 public:
  bool empty() const { return head_ == kNone; }
  // The value of `key`, or nullptr when it is absent.
  const std::int64_t* find(std::int64_t key) const {
    const auto it = nodes_.find(key);
    return it == nodes_.end() ? nullptr : &it->second.value;
  }
  // Appends `key` (which must be absent: the prefix cache never re-inserts a present key).
  void push_back(std::int64_t key, std::int64_t value) {
    if (key < 0) throw std::logic_error("OrderedKeys: key " + std::to_string(key) + " is negative");
    const auto [it, added] = nodes_.try_emplace(key, Node{value, tail_, kNone});
    if (!added) throw std::logic_error("OrderedKeys: key " + std::to_string(key) + " is already present");
    if (tail_ == kNone) {
      head_ = key;
    } else {
      nodes_.at(tail_).next = key;
    }
    tail_ = key;
  }
  // Removes the present `key` and returns its value.
  std::int64_t erase(std::int64_t key) {
    const auto it = nodes_.find(key);
    if (it == nodes_.end()) throw std::logic_error("OrderedKeys: key " + std::to_string(key) + " is absent");
    const Node node = it->second;
    nodes_.erase(it);
    if (node.prev == kNone) {
      head_ = node.next;
    } else {
      nodes_.at(node.prev).next = node.next;
    }
    if (node.next == kNone) {
      tail_ = node.prev;
    } else {
      nodes_.at(node.next).prev = node.prev;
    }
    return node.value;
  }
  // Removes the oldest key; returns it with its value.
  std::pair<std::int64_t, std::int64_t> pop_front() {
    if (head_ == kNone) throw std::logic_error("OrderedKeys: pop from an empty queue");
    const std::int64_t key = head_;
    return {key, erase(key)};
  }

 private:
  static constexpr std::int64_t kNone = -1;  // keys are >= 0
  struct Node {
    std::int64_t value;
    std::int64_t prev;
    std::int64_t next;
  };
  std::unordered_map<std::int64_t, Node> nodes_;
  std::int64_t head_ = kNone;
  std::int64_t tail_ = kNone;
};

}  // namespace servegym_core
