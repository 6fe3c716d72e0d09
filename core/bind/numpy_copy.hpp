// A numpy array that owns a copy of a std::vector: what the bindings return where Python takes
// whole columns at once (observations, outcome columns) instead of lists.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <utility>
#include <vector>

namespace servegym_core {

// A numpy array owning a copy of `values` (rows x width, or 1-D with width 0); returned with
// rv_policy::move (the array owns its copy).
template <class T>
nanobind::ndarray<nanobind::numpy, T> copy_of(const std::vector<T>& values, std::size_t rows, std::size_t width = 0) {
  auto* data = new std::vector<T>(values);
  nanobind::capsule owner(data, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  const std::size_t shape[2] = {rows, width};
  return nanobind::ndarray<nanobind::numpy, T>(data->data(), width == 0 ? 1 : 2, shape, owner);
}

// `values` as a 1-D numpy array that owns them (moved in; pass a copy to keep yours).
template <class T>
nanobind::ndarray<nanobind::numpy, T> column_of(std::vector<T> values) {
  auto* data = new std::vector<T>(std::move(values));
  nanobind::capsule owner(data, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  const std::size_t shape[1] = {data->size()};
  return nanobind::ndarray<nanobind::numpy, T>(data->data(), 1, shape, owner);
}

}  // namespace servegym_core
