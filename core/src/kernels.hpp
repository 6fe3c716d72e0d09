// Operator cost formulas of one kernel: the roofline GEMM, memory-bound ops and collectives.
//
// The one implementation of these formulas: the latency evaluator (latency.cpp) uses them, and so
// do hardware/profiles.py's ComputeEfficiency and LinkEfficiency and hardware/kernel_sets.py's
// GemmEfficiency, on Python numbers and numpy arrays alike. Each expression keeps the
// association of the Python it replaced (the values recorded in tests/latency_fixture): a
// denominator is the product written there, a time is a quotient by it (no reciprocal).
#pragma once

#include <cstddef>
#include <cstdint>

namespace servegym_core {

// A GEMM kernel's roofline: max(FLOPs / (peak * compute_fraction), bytes / (bandwidth *
// memory_fraction)) + overhead_s, with peak = fp16 peak * peak_over_fp16.
struct GemmKernel {
  double compute_fraction = 0.0;
  double memory_fraction = 0.0;
  double overhead_s = 0.0;
  double peak_over_fp16 = 1.0;
};

// The roofline's two denominators on one GPU, computed as the Python writes them:
// fp16_tflops * 1e12 * peak_over_fp16 * compute_fraction and mem_bandwidth_gbps * 1e9 * memory_fraction.
struct Roofline {
  Roofline() = default;
  Roofline(const GemmKernel& kernel, double fp16_tflops, double mem_bandwidth_gbps);

  double time_s(double flops, double moved_bytes) const;

  double flops_per_s = 1.0;
  double bytes_per_s = 1.0;
  double overhead_s = 0.0;
};

// overhead_s + moved_bytes / (rate_gbps * 1e9 * fraction): elementwise ops, the embedding gather
// and point-to-point copies.
struct Streamed {
  Streamed() = default;
  Streamed(double overhead_s, double rate_gbps, double fraction);

  double time_s(double moved_bytes) const;

  double overhead_s = 0.0;
  double bytes_per_s = 1.0;
};

// Ring all-reduce of buffer_bytes over num_gpus on a link fitted as `link`: each GPU moves
// 2 (n - 1) / n of the buffer.
double all_reduce_time_s(const Streamed& link, double buffer_bytes, std::int64_t num_gpus);

// The same formulas over n values each (numpy arrays in hardware.profiles and hardware.kernel_sets).
void roofline_times_s(const Roofline& roofline, const double* flops, const double* moved_bytes, double* out,
                      std::size_t n);
void streamed_times_s(const Streamed& streamed, const double* moved_bytes, double* out, std::size_t n);
void all_reduce_times_s(const Streamed& link, const double* buffer_bytes, std::int64_t num_gpus, double* out,
                        std::size_t n);

}  // namespace servegym_core
