#include "latency.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace servegym_core {

namespace {

// Token counts up to this many are memoized (a std::vector slot each); larger ones are computed.
constexpr std::int64_t kMemoLimit = std::int64_t{1} << 20;

template <class Compute>
double memoized(std::vector<double>& table, std::int64_t key, Compute compute) {
  if (key < 0 || key >= kMemoLimit) return compute();
  const auto index = static_cast<std::size_t>(key);
  if (index < table.size() && !std::isnan(table[index])) return table[index];
  const double value = compute();
  if (index >= table.size()) {
    table.resize(std::max(index + 1, 2 * table.size()), std::numeric_limits<double>::quiet_NaN());
  }
  table[index] = value;
  return value;
}

// Bytes a GEMM over `tokens` rows moves: w * in * out + a * tokens * (in + out)
// (hardware.profiles.gemm_bytes).
double gemm_bytes(double tokens, double fan_in, double fan_out, double weight_bytes_per_param,
                  double activation_bytes) {
  return weight_bytes_per_param * fan_in * fan_out + activation_bytes * tokens * (fan_in + fan_out);
}

void require_positive(const char* what, std::int64_t value) {
  if (value < 1) throw std::invalid_argument(std::string(what) + "=" + std::to_string(value) + " must be >= 1");
}

}  // namespace

Gemm::Gemm(double fan_in_, double fan_out_, double weight_bytes_per_param_, double activation_bytes_,
           std::int64_t experts_, std::int64_t experts_per_token_)
    : fan_in(fan_in_),
      fan_out(fan_out_),
      weight_bytes_per_param(weight_bytes_per_param_),
      activation_bytes(activation_bytes_),
      experts(experts_),
      experts_per_token(experts_per_token_) {
  require_positive("experts_per_token", experts_per_token);
  if (experts < experts_per_token) {
    throw std::invalid_argument("experts=" + std::to_string(experts) + " is below experts_per_token=" +
                                std::to_string(experts_per_token));
  }
}

double Gemm::flops(std::int64_t tokens) const {
  return 2.0 * static_cast<double>(tokens * experts_per_token) * fan_in * fan_out;
}

double Gemm::moved_bytes(std::int64_t tokens) const {
  const double share = static_cast<double>(experts_per_token) / static_cast<double>(experts);
  const double experts_hit = static_cast<double>(experts) * (1.0 - std::pow(1.0 - share, static_cast<double>(tokens)));
  const double weights = gemm_bytes(0.0, fan_in, fan_out, weight_bytes_per_param, activation_bytes) * experts_hit;
  return weights + gemm_bytes(static_cast<double>(tokens * experts_per_token), fan_in, fan_out, 0.0, activation_bytes);
}

LatencyEvaluator::LatencyEvaluator(LatencyCoefficients coefficients)
    : c_(std::move(coefficients)),
      dense_(c_.linear, c_.fp16_tflops, c_.mem_bandwidth_gbps),
      elementwise_(c_.elementwise_overhead_s, c_.mem_bandwidth_gbps, c_.elementwise_memory_fraction),
      embedding_(c_.embedding_overhead_s, c_.mem_bandwidth_gbps, c_.embedding_memory_fraction),
      all_reduce_link_(c_.all_reduce_latency_s, c_.intra_node_link_gbps, c_.all_reduce_bandwidth_fraction),
      send_recv_(c_.send_recv_latency_s, c_.intra_node_link_gbps, c_.send_recv_bandwidth_fraction),
      prefill_per_token_s_(c_.prefill_bytes_per_query_channel * c_.query_width_per_gpu / (c_.mem_bandwidth_gbps * 1e9)),
      prefill_pair_s_(c_.score_flops_per_pair / (c_.fp16_tflops * 1e12 * c_.prefill_compute_fraction)),
      decode_per_context_token_layer_s_(c_.per_context_token_s / static_cast<double>(c_.num_layers)) {
  require_positive("tp", c_.tp);
  require_positive("pp", c_.pp);
  require_positive("num_layers", c_.num_layers);
  require_positive("hidden_size", c_.hidden_size);
  if (c_.fp8) fp8_.emplace(*c_.fp8, c_.fp16_tflops, c_.mem_bandwidth_gbps);
  if (c_.routed_experts) routed_experts_.emplace(*c_.routed_experts, c_.fp16_tflops, c_.mem_bandwidth_gbps);
}

double LatencyEvaluator::cpu_s(std::int64_t sequences) const {
  return c_.cpu_fixed_s + c_.cpu_per_sequence_s * static_cast<double>(sequences);
}

double LatencyEvaluator::linear_s(const Gemm& gemm, std::int64_t tokens) const {
  const double flops = gemm.flops(tokens);
  const double moved = gemm.moved_bytes(tokens);
  if (gemm.experts > 1 && routed_experts_) return routed_experts_->time_s(flops, moved);
  if (gemm.weight_bytes_per_param == c_.fp8_bytes_per_linear_weight && fp8_) return fp8_->time_s(flops, moved);
  return dense_.time_s(flops, moved);
}

double LatencyEvaluator::layers_s(std::int64_t tokens) const {
  double total = 0.0;
  for (const LayerKind& kind : c_.layer_kinds) {
    double layer = 0.0;
    for (const Gemm& gemm : kind.gemms) layer += linear_s(gemm, tokens);
    double elementwise = 0.0;
    for (double moved : kind.elementwise_bytes_per_token) {
      elementwise += elementwise_.time_s(moved * static_cast<double>(tokens));
    }
    layer += elementwise;
    total += static_cast<double>(kind.count) * layer;
  }
  return total;
}

double LatencyEvaluator::prefill_attention_layer_s(double tokens, double attention_pairs) const {
  return c_.prefill_fixed_s + prefill_per_token_s_ * tokens + prefill_pair_s_ * attention_pairs;
}

double LatencyEvaluator::decode_attention_layer_s(double batch_size, double context_tokens) const {
  const double per_sequence_s = c_.decode_per_sequence_s * batch_size;
  return c_.decode_fixed_s + per_sequence_s + decode_per_context_token_layer_s_ * context_tokens;
}

double LatencyEvaluator::activation_bytes(std::int64_t tokens) const {
  return static_cast<double>(tokens * c_.hidden_size) * c_.activation_bytes;
}

double LatencyEvaluator::send_s(std::int64_t tokens) const { return send_recv_.time_s(activation_bytes(tokens)); }

double LatencyEvaluator::embedding_s(std::int64_t tokens) const {
  return embedding_.time_s(2.0 * activation_bytes(tokens));
}

double LatencyEvaluator::head_s(std::int64_t logit_tokens) {
  return memoized(head_memo_, logit_tokens, [&] { return linear_s(c_.head, logit_tokens); });
}

double LatencyEvaluator::token_prefix_s(std::int64_t tokens) {
  return memoized(prefix_memo_, tokens, [&] {
    double total = layers_s(tokens);
    if (c_.tp > 1) {
      total += static_cast<double>(2 * c_.num_layers) * all_reduce_time_s(all_reduce_link_, activation_bytes(tokens), c_.tp);
    }
    total += static_cast<double>(c_.pp - 1) * send_s(tokens);
    total += embedding_s(tokens);
    return total;
  });
}

double LatencyEvaluator::token_terms_s(std::int64_t tokens, std::int64_t logit_tokens) {
  return token_prefix_s(tokens) + head_s(logit_tokens);
}

StageTerms LatencyEvaluator::stage_terms_s(std::int64_t tokens, std::int64_t logit_tokens) {
  return StageTerms{send_s(tokens), embedding_s(tokens), head_s(logit_tokens)};
}

double LatencyEvaluator::fixed_s(std::int64_t tokens, std::int64_t logit_tokens, std::int64_t prefill_tokens,
                                 double prefill_pairs, std::int64_t decode_batch) {
  const double layers = static_cast<double>(c_.num_layers);
  double total = token_terms_s(tokens, logit_tokens);
  if (prefill_tokens != 0) {
    total += layers * prefill_attention_layer_s(static_cast<double>(prefill_tokens), prefill_pairs);
  }
  if (decode_batch != 0) {
    total += layers * (c_.decode_fixed_s + c_.decode_per_sequence_s * static_cast<double>(decode_batch));
  }
  return total + cpu_s(logit_tokens);
}

std::pair<double, double> LatencyEvaluator::decode_coefficients(std::int64_t batch_size) {
  const double base_s = memoized(decode_base_memo_, batch_size,
                                 [&] { return fixed_s(batch_size, batch_size, 0, 0.0, batch_size); });
  return {base_s, c_.per_context_token_s};
}

double LatencyEvaluator::decode_time_s(std::int64_t batch_size, std::int64_t context_tokens) {
  const auto [base_s, per_context_token_s] = decode_coefficients(batch_size);
  return base_s + per_context_token_s * static_cast<double>(context_tokens);
}

double LatencyEvaluator::iteration_time_s(std::int64_t prefill_tokens, double prefill_attention_pairs,
                                          std::int64_t decode_batch_size, std::int64_t decode_context_tokens) {
  if (prefill_tokens == 0) return decode_time_s(decode_batch_size, decode_context_tokens);
  const double fixed = fixed_s(prefill_tokens + decode_batch_size, decode_batch_size + 1, prefill_tokens,
                               prefill_attention_pairs, decode_batch_size);
  return fixed + c_.per_context_token_s * static_cast<double>(decode_context_tokens);
}

std::vector<double> LatencyEvaluator::stage_times_s(std::int64_t tokens, std::int64_t logit_tokens,
                                                    double iteration_s) {
  const std::int64_t pp = c_.pp;
  if (pp == 1) return {iteration_s};
  const StageTerms terms = stage_terms_s(tokens, logit_tokens);
  const double cpu = cpu_s(logit_tokens);
  const double layers = iteration_s - cpu - terms.embedding_s - terms.head_s - static_cast<double>(pp - 1) * terms.send_s;
  if (layers <= 0) return {};
  const double stage = layers / static_cast<double>(pp);
  std::vector<double> times(static_cast<std::size_t>(pp), stage + terms.send_s);
  times.front() = cpu + terms.embedding_s + stage + terms.send_s;
  times.back() = stage + terms.head_s;
  return times;
}

}  // namespace servegym_core
