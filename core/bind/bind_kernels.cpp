// Bindings of core/src/kernels.hpp, on Python numbers and on 1-D float64 numpy arrays: no logic.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <stdexcept>

#include "kernels.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace servegym_core {

namespace {

using Values = nb::ndarray<const double, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Result = nb::ndarray<nb::numpy, double, nb::ndim<1>>;

// A new numpy array of n doubles, filled by fill(out).
template <class Fill>
Result new_result(std::size_t n, Fill fill) {
  double* out = new double[n];
  nb::capsule owner(out, [](void* p) noexcept { delete[] static_cast<double*>(p); });
  fill(out);
  return Result(out, {n}, owner);
}

void require_same_size(const Values& a, const Values& b) {
  if (a.shape(0) != b.shape(0)) throw std::invalid_argument("arrays of different sizes");
}

}  // namespace

void bind_kernels(nb::module_& m) {
  nb::class_<GemmKernel>(m, "GemmKernel", "Roofline efficiency of one GEMM kernel (fractions of the GPU's peaks).")
      .def(nb::init<>())
      .def("__init__",
           [](GemmKernel* self, double compute_fraction, double memory_fraction, double overhead_s,
              double peak_over_fp16) {
             new (self) GemmKernel{compute_fraction, memory_fraction, overhead_s, peak_over_fp16};
           },
           "compute_fraction"_a, "memory_fraction"_a, "overhead_s"_a, "peak_over_fp16"_a)
      .def_rw("compute_fraction", &GemmKernel::compute_fraction)
      .def_rw("memory_fraction", &GemmKernel::memory_fraction)
      .def_rw("overhead_s", &GemmKernel::overhead_s)
      .def_rw("peak_over_fp16", &GemmKernel::peak_over_fp16);

  nb::class_<Roofline>(m, "Roofline", "A GEMM kernel's roofline on one GPU.")
      .def(nb::init<const GemmKernel&, double, double>(), "kernel"_a, "fp16_tflops"_a, "mem_bandwidth_gbps"_a)
      .def("time_s", &Roofline::time_s, "flops"_a, "moved_bytes"_a)
      .def("times_s",
           [](const Roofline& self, Values flops, Values moved_bytes) {
             require_same_size(flops, moved_bytes);
             return new_result(flops.shape(0), [&](double* out) {
               roofline_times_s(self, flops.data(), moved_bytes.data(), out, flops.shape(0));
             });
           },
           "flops"_a, "moved_bytes"_a);

  nb::class_<Streamed>(m, "Streamed", "overhead_s + bytes / (rate_gbps * 1e9 * fraction).")
      .def(nb::init<double, double, double>(), "overhead_s"_a, "rate_gbps"_a, "fraction"_a)
      .def("time_s", &Streamed::time_s, "moved_bytes"_a)
      .def("times_s",
           [](const Streamed& self, Values moved_bytes) {
             return new_result(moved_bytes.shape(0), [&](double* out) {
               streamed_times_s(self, moved_bytes.data(), out, moved_bytes.shape(0));
             });
           },
           "moved_bytes"_a);

  m.def("all_reduce_time_s", &all_reduce_time_s, "link"_a, "buffer_bytes"_a, "num_gpus"_a);
  m.def("all_reduce_times_s",
        [](const Streamed& link, Values buffer_bytes, std::int64_t num_gpus) {
          return new_result(buffer_bytes.shape(0), [&](double* out) {
            all_reduce_times_s(link, buffer_bytes.data(), num_gpus, out, buffer_bytes.shape(0));
          });
        },
        "link"_a, "buffer_bytes"_a, "num_gpus"_a);
}

}  // namespace servegym_core
