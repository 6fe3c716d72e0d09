// Bindings of core/src/latency.hpp: no logic.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/vector.h>

#include "latency.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace servegym_core {

void bind_latency(nb::module_& m) {
  nb::class_<Gemm>(m, "Gemm", "One linear op on one GPU (hardware.latency builds them).")
      .def(nb::init<double, double, double, double, std::int64_t, std::int64_t>(), "fan_in"_a, "fan_out"_a,
           "weight_bytes_per_param"_a, "activation_bytes"_a, "experts"_a, "experts_per_token"_a)
      .def_ro("fan_in", &Gemm::fan_in)
      .def_ro("fan_out", &Gemm::fan_out)
      .def_ro("weight_bytes_per_param", &Gemm::weight_bytes_per_param)
      .def_ro("activation_bytes", &Gemm::activation_bytes)
      .def_ro("experts", &Gemm::experts)
      .def_ro("experts_per_token", &Gemm::experts_per_token)
      .def("flops", &Gemm::flops, "tokens"_a)
      .def("moved_bytes", &Gemm::moved_bytes, "tokens"_a);

  nb::class_<LayerKind>(m, "LayerKind", "Layers of one kind: count, GEMMs, elementwise bytes per token.")
      .def(nb::init<>())
      .def_rw("count", &LayerKind::count)
      .def_rw("gemms", &LayerKind::gemms)
      .def_rw("elementwise_bytes_per_token", &LayerKind::elementwise_bytes_per_token);

  using C = LatencyCoefficients;
  nb::class_<C>(m, "LatencyCoefficients", "What the latency evaluator needs of a (GPU, model, TP, PP, dtype, engine).")
      .def(nb::init<>())
      .def_rw("layer_kinds", &C::layer_kinds)
      .def_rw("head", &C::head)
      .def_rw("fp16_tflops", &C::fp16_tflops)
      .def_rw("mem_bandwidth_gbps", &C::mem_bandwidth_gbps)
      .def_rw("intra_node_link_gbps", &C::intra_node_link_gbps)
      .def_rw("linear", &C::linear)
      .def_rw("fp8", &C::fp8, nb::arg().none())
      .def_rw("routed_experts", &C::routed_experts, nb::arg().none())
      .def_rw("fp8_bytes_per_linear_weight", &C::fp8_bytes_per_linear_weight)
      .def_rw("elementwise_memory_fraction", &C::elementwise_memory_fraction)
      .def_rw("elementwise_overhead_s", &C::elementwise_overhead_s)
      .def_rw("embedding_memory_fraction", &C::embedding_memory_fraction)
      .def_rw("embedding_overhead_s", &C::embedding_overhead_s)
      .def_rw("all_reduce_latency_s", &C::all_reduce_latency_s)
      .def_rw("all_reduce_bandwidth_fraction", &C::all_reduce_bandwidth_fraction)
      .def_rw("send_recv_latency_s", &C::send_recv_latency_s)
      .def_rw("send_recv_bandwidth_fraction", &C::send_recv_bandwidth_fraction)
      .def_rw("decode_fixed_s", &C::decode_fixed_s)
      .def_rw("decode_per_sequence_s", &C::decode_per_sequence_s)
      .def_rw("prefill_fixed_s", &C::prefill_fixed_s)
      .def_rw("prefill_bytes_per_query_channel", &C::prefill_bytes_per_query_channel)
      .def_rw("prefill_compute_fraction", &C::prefill_compute_fraction)
      .def_rw("cpu_fixed_s", &C::cpu_fixed_s)
      .def_rw("cpu_per_sequence_s", &C::cpu_per_sequence_s)
      .def_rw("tp", &C::tp)
      .def_rw("pp", &C::pp)
      .def_rw("num_layers", &C::num_layers)
      .def_rw("hidden_size", &C::hidden_size)
      .def_rw("activation_bytes", &C::activation_bytes)
      .def_rw("per_context_token_s", &C::per_context_token_s)
      .def_rw("query_width_per_gpu", &C::query_width_per_gpu)
      .def_rw("score_flops_per_pair", &C::score_flops_per_pair);

  using E = LatencyEvaluator;
  nb::class_<E>(m, "LatencyEvaluator", "Evaluates LatencyCoefficients, with memo tables per token count.")
      .def(nb::init<LatencyCoefficients>(), "coefficients"_a)
      .def_prop_ro("coefficients", &E::coefficients)
      .def("cpu_s", &E::cpu_s, "sequences"_a)
      .def("linear_s", &E::linear_s, "gemm"_a, "tokens"_a)
      .def("layers_s", &E::layers_s, "tokens"_a)
      .def("prefill_attention_layer_s", &E::prefill_attention_layer_s, "tokens"_a, "attention_pairs"_a)
      .def("decode_attention_layer_s", &E::decode_attention_layer_s, "batch_size"_a, "context_tokens"_a)
      .def("token_terms_s", &E::token_terms_s, "tokens"_a, "logit_tokens"_a)
      .def("decode_coefficients", &E::decode_coefficients, "batch_size"_a)
      .def("decode_time_s", &E::decode_time_s, "batch_size"_a, "context_tokens"_a)
      .def("iteration_time_s", &E::iteration_time_s, "prefill_tokens"_a, "prefill_attention_pairs"_a,
           "decode_batch_size"_a, "decode_context_tokens"_a)
      .def("stage_times_s", &E::stage_times_s, "tokens"_a, "logit_tokens"_a, "iteration_s"_a);
}

}  // namespace servegym_core
