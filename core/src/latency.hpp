// The per-iteration latency model of one (GPU, model, TP, PP, dtype, engine): hardware/latency.py
// fills LatencyCoefficients once, LatencyEvaluator evaluates it (issue #43 §6). The formulas are
// those hardware/latency.py documents; every expression keeps the association the Python
// evaluator had, so the values are the recorded ones bit for bit (tests/latency_fixture).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "kernels.hpp"

namespace servegym_core {

// One linear op on one GPU: `experts` weight blocks of fan_in x fan_out, each token using
// `experts_per_token` of them (1 and 1 for a dense op). For a dense op, flops and moved_bytes
// are hardware.profiles.gemm_flops and gemm_bytes, which the fitting code evaluates on numpy
// arrays; tests/test_kernel_formulas.py checks that they agree bit for bit.
struct Gemm {
  Gemm() = default;
  // Throws std::invalid_argument unless 1 <= experts_per_token <= experts.
  Gemm(double fan_in, double fan_out, double weight_bytes_per_param, double activation_bytes, std::int64_t experts,
       std::int64_t experts_per_token);

  double fan_in = 0.0;
  double fan_out = 0.0;
  double weight_bytes_per_param = 0.0;
  double activation_bytes = 0.0;  // bytes per activation value (fp16/bf16: 2)
  std::int64_t experts = 1;
  std::int64_t experts_per_token = 1;

  // 2 * tokens * experts_per_token * fan_in * fan_out.
  double flops(std::int64_t tokens) const;
  // The weights of the expected number of distinct experts hit, E (1 - (1 - k/E)^tokens), plus
  // the input and output activations of every routed token.
  double moved_bytes(std::int64_t tokens) const;
};

// Layers of one kind (dense or MoE): how many, their GEMMs and their elementwise ops' bytes per token.
struct LayerKind {
  std::int64_t count = 0;
  std::vector<Gemm> gemms;
  std::vector<double> elementwise_bytes_per_token;
};

struct LatencyCoefficients {
  std::vector<LayerKind> layer_kinds;
  Gemm head;

  // The GPU's catalog peaks.
  double fp16_tflops = 0.0;
  double mem_bandwidth_gbps = 0.0;
  double intra_node_link_gbps = 0.0;

  // Kernel efficiencies (hardware.kernel_sets.KernelEfficiency): dense GEMMs, FP8 GEMMs where
  // they have their own (else FP8 weights take the dense kernel), routed experts where grouped
  // GEMMs have their own (chosen for the weight dtype; else the dense kernel).
  GemmKernel linear;
  std::optional<GemmKernel> fp8;
  std::optional<GemmKernel> routed_experts;
  double fp8_bytes_per_linear_weight = 1.0;
  double elementwise_memory_fraction = 0.0;
  double elementwise_overhead_s = 0.0;
  double embedding_memory_fraction = 0.0;
  double embedding_overhead_s = 0.0;

  // Collectives (hardware.profiles.LinkEfficiency).
  double all_reduce_latency_s = 0.0;
  double all_reduce_bandwidth_fraction = 0.0;
  double send_recv_latency_s = 0.0;
  double send_recv_bandwidth_fraction = 0.0;

  // Attention (hardware.profiles.AttentionCalibration).
  double decode_fixed_s = 0.0;
  double decode_per_sequence_s = 0.0;
  double prefill_fixed_s = 0.0;
  double prefill_bytes_per_query_channel = 0.0;
  double prefill_compute_fraction = 0.0;

  double cpu_fixed_s = 0.0;
  double cpu_per_sequence_s = 0.0;
  std::int64_t tp = 1;
  std::int64_t pp = 1;
  std::int64_t num_layers = 1;
  std::int64_t hidden_size = 1;
  double activation_bytes = 2.0;
  double per_context_token_s = 0.0;
  double query_width_per_gpu = 0.0;
  double score_flops_per_pair = 0.0;
};

// (one activation send/recv between stages, the embedding, the LM head) of an iteration.
struct StageTerms {
  double send_s;
  double embedding_s;
  double head_s;
};

class LatencyEvaluator {
 public:
  // Throws std::invalid_argument for coefficients no model has (tp, pp, layers or experts < 1).
  explicit LatencyEvaluator(LatencyCoefficients coefficients);

  const LatencyCoefficients& coefficients() const { return c_; }

  double cpu_s(std::int64_t sequences) const;
  double linear_s(const Gemm& gemm, std::int64_t tokens) const;
  // All layers' linear and elementwise ops for `tokens` tokens (no attention, no collectives).
  double layers_s(std::int64_t tokens) const;
  double prefill_attention_layer_s(double tokens, double attention_pairs) const;
  double decode_attention_layer_s(double batch_size, double context_tokens) const;

  // The token-count-dependent part of an iteration (layers, all-reduces, sends, embedding, head).
  double token_terms_s(std::int64_t tokens, std::int64_t logit_tokens);
  StageTerms stage_terms_s(std::int64_t tokens, std::int64_t logit_tokens);
  // Everything except the KV-read term proportional to decode context tokens.
  double fixed_s(std::int64_t tokens, std::int64_t logit_tokens, std::int64_t prefill_tokens, double prefill_pairs,
                 std::int64_t decode_batch);

  // (base_s, per_context_token_s) of a decode-only iteration of batch_size sequences.
  std::pair<double, double> decode_coefficients(std::int64_t batch_size);
  double decode_time_s(std::int64_t batch_size, std::int64_t context_tokens);
  double iteration_time_s(std::int64_t prefill_tokens, double prefill_attention_pairs, std::int64_t decode_batch_size,
                          std::int64_t decode_context_tokens);
  // Each stage's busy time; empty when iteration_s does not exceed the CPU overhead, embedding,
  // LM head and sends alone (the caller names the error).
  std::vector<double> stage_times_s(std::int64_t tokens, std::int64_t logit_tokens, double iteration_s);

 private:
  double activation_bytes(std::int64_t tokens) const;
  double send_s(std::int64_t tokens) const;
  double embedding_s(std::int64_t tokens) const;
  // Memoized: the head for `logit_tokens`, and the token terms without the head (their sum is
  // evaluated left to right, so the head is added last exactly as the Python did).
  double head_s(std::int64_t logit_tokens);
  double token_prefix_s(std::int64_t tokens);

  LatencyCoefficients c_;
  Roofline dense_;
  std::optional<Roofline> fp8_;
  std::optional<Roofline> routed_experts_;
  Streamed elementwise_;
  Streamed embedding_;
  Streamed all_reduce_link_;
  Streamed send_recv_;
  double prefill_per_token_s_;
  double prefill_pair_s_;
  double decode_per_context_token_layer_s_;
  std::vector<double> head_memo_;
  std::vector<double> prefix_memo_;
  std::vector<double> decode_base_memo_;
};

}  // namespace servegym_core
