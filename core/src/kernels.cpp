#include "kernels.hpp"

#include <algorithm>

namespace servegym_core {

Roofline::Roofline(const GemmKernel& kernel, double fp16_tflops, double mem_bandwidth_gbps)
    : flops_per_s(fp16_tflops * 1e12 * kernel.peak_over_fp16 * kernel.compute_fraction),
      bytes_per_s(mem_bandwidth_gbps * 1e9 * kernel.memory_fraction),
      overhead_s(kernel.overhead_s) {}

double Roofline::time_s(double flops, double moved_bytes) const {
  const double compute_s = flops / flops_per_s;
  const double memory_s = moved_bytes / bytes_per_s;
  return std::max(compute_s, memory_s) + overhead_s;
}

Streamed::Streamed(double overhead, double rate_gbps, double fraction)
    : overhead_s(overhead), bytes_per_s(rate_gbps * 1e9 * fraction) {}

double Streamed::time_s(double moved_bytes) const { return overhead_s + moved_bytes / bytes_per_s; }

double all_reduce_time_s(const Streamed& link, double buffer_bytes, std::int64_t num_gpus) {
  const double moved_bytes = 2.0 * static_cast<double>(num_gpus - 1) / static_cast<double>(num_gpus) * buffer_bytes;
  return link.time_s(moved_bytes);
}

void roofline_times_s(const Roofline& roofline, const double* flops, const double* moved_bytes, double* out,
                      std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = roofline.time_s(flops[i], moved_bytes[i]);
}

void streamed_times_s(const Streamed& streamed, const double* moved_bytes, double* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = streamed.time_s(moved_bytes[i]);
}

void all_reduce_times_s(const Streamed& link, const double* buffer_bytes, std::int64_t num_gpus, double* out,
                        std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = all_reduce_time_s(link, buffer_bytes[i], num_gpus);
}

}  // namespace servegym_core
