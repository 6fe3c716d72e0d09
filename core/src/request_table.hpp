// Requests inside the engine as a struct of arrays, one row per arrival (simulator/sequence.py's
// Sequence: its token counters, KV residency and the timestamps the outcome needs).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "sim_types.hpp"

namespace servegym_core {

// One breakpoint of a delivered-token curve: (time_s, tokens delivered by then).
using CurvePoint = std::pair<double, std::int64_t>;

// The fields a new row takes from its Request.
struct RequestRow {
  std::int64_t request_id;
  double arrival_s;
  std::int64_t prompt_tokens;
  std::int64_t output_tokens;
  std::int64_t reasoning_tokens;
  std::int64_t tier;
  std::int32_t model_index;  // -1: any model
};

// Invariant while decoding: kv_tokens == prompt_tokens + generated_tokens - 1.
class RequestTable {
 public:
  explicit RequestTable(bool record_token_curves = false) : record_token_curves_(record_token_curves) {}

  Req add(const RequestRow& row);
  // Room for n rows in every column.
  void reserve(std::size_t n);
  // A table of the given rows, in that order (the outcome table's).
  RequestTable gather(const std::vector<Req>& rows) const;
  std::size_t size() const { return request_id.size(); }
  bool records_token_curves() const { return record_token_curves_; }

  // Fixed at arrival, except output/reasoning tokens, which the context rule may cap.
  std::vector<std::int64_t> request_id;
  std::vector<double> arrival_s;
  std::vector<std::int64_t> prompt_tokens;
  std::vector<std::int64_t> output_tokens;
  std::vector<std::int64_t> reasoning_tokens;
  std::vector<std::int64_t> tier;
  std::vector<std::int32_t> model_index;

  std::vector<std::int64_t> kv_tokens;
  std::vector<std::int64_t> generated_tokens;
  std::vector<std::int64_t> blocks;
  std::vector<std::int64_t> queue_order;
  std::vector<std::int64_t> quantum_start_tokens;  // round-robin: generated tokens when its quantum began
  std::vector<std::uint8_t> demoted;               // PASCAL: demoted to the low-priority queue
  std::vector<std::uint8_t> in_flight;             // inside a microbatch still in a pipeline
  std::vector<std::uint8_t> pd_handoff;            // on a prefill instance, to move to decode after its prefill
  std::vector<double> gate_since_s;                // when its queue gate counts it waiting from (NaN: not)
  std::vector<Residency> residency;
  std::vector<Phase> phase;
  std::vector<std::int32_t> instance_id;
  std::vector<std::int32_t> num_preemptions;
  std::vector<std::int32_t> num_migrations;
  std::vector<double> first_scheduled_s;
  std::vector<double> first_token_s;
  std::vector<double> first_answer_token_s;
  std::vector<double> reasoning_end_s;
  std::vector<double> last_token_s;
  std::vector<double> max_tbt_s;
  std::vector<double> preempted_since_s;
  std::vector<double> preempted_s;
  std::vector<std::vector<CurvePoint>> token_curve;  // empty unless token curves are recorded
  // Prefix caching: row r's chained block keys are block_keys[key_begin[r], key_begin[r] +
  // key_count[r]) (key_count -1: it carries no block hashes), blocks of block_tokens[r] tokens;
  // it references the first cached_count[r] of them (Sequence.block_keys, cached_keys).
  std::vector<std::int64_t> key_begin;
  std::vector<std::int32_t> key_count;
  std::vector<std::int64_t> block_tokens;
  std::vector<std::int32_t> cached_count;
  std::vector<std::int64_t> block_keys;  // every row's keys, flat (not a per-row column)

  // KV entries a prefill pass must hold: the prompt plus every token generated so far.
  std::int64_t prefill_target_tokens(Req r) const { return prompt_tokens[r] + generated_tokens[r]; }
  std::int64_t remaining_prefill_tokens(Req r) const { return prefill_target_tokens(r) - kv_tokens[r]; }
  // Running and between tokens, and staying here: its next iteration here is a decode step
  // (Sequence.in_decode and not pd_handoff, as every scheduler reads it).
  bool decodes_here(Req r) const { return in_decode(r) && !pd_handoff[r]; }
  // Running and between tokens: its next iteration is a decode step (Sequence.in_decode).
  bool in_decode(Req r) const {
    return generated_tokens[r] > 0 && kv_tokens[r] == prompt_tokens[r] + generated_tokens[r] - 1;
  }
  // Phase of the next token to generate (Sequence.decode_phase).
  Phase decode_phase(Req r) const {
    return generated_tokens[r] < reasoning_tokens[r] ? Phase::Reasoning : Phase::Answering;
  }

  bool has_block_keys(Req r) const { return key_count[r] >= 0; }
  const std::int64_t* keys_of(Req r) const { return block_keys.data() + key_begin[r]; }
  // Row r's keys are the `count` keys appended now, of blocks of `tokens` tokens.
  void set_block_keys(Req r, const std::int64_t* keys, std::int32_t count, std::int64_t tokens);

  // Sequence.on_tokens: `count` tokens delivered, the first at first_time_s, the last at
  // last_time_s; last_gap_s is the largest gap inside the run. Throws std::runtime_error when
  // the reasoning ended inside a coalesced run.
  void on_tokens(Req r, double first_time_s, double last_time_s, std::int64_t count, double last_gap_s);

 private:
  // Calls f(column) for every per-row column but token_curve (recorded or not).
  template <class F>
  void for_each_column(F f) {
    for_each_column_of(*this, [&f](auto& column, const auto&) { f(column); });
  }
  // Calls f(this table's column, the same column of `other`) for every per-row column but token_curve.
  template <class F>
  void for_each_column_of(const RequestTable& other, F f) {
    f(request_id, other.request_id);
    f(arrival_s, other.arrival_s);
    f(prompt_tokens, other.prompt_tokens);
    f(output_tokens, other.output_tokens);
    f(reasoning_tokens, other.reasoning_tokens);
    f(tier, other.tier);
    f(model_index, other.model_index);
    f(kv_tokens, other.kv_tokens);
    f(generated_tokens, other.generated_tokens);
    f(blocks, other.blocks);
    f(queue_order, other.queue_order);
    f(quantum_start_tokens, other.quantum_start_tokens);
    f(demoted, other.demoted);
    f(in_flight, other.in_flight);
    f(pd_handoff, other.pd_handoff);
    f(gate_since_s, other.gate_since_s);
    f(residency, other.residency);
    f(phase, other.phase);
    f(instance_id, other.instance_id);
    f(num_preemptions, other.num_preemptions);
    f(num_migrations, other.num_migrations);
    f(first_scheduled_s, other.first_scheduled_s);
    f(first_token_s, other.first_token_s);
    f(first_answer_token_s, other.first_answer_token_s);
    f(reasoning_end_s, other.reasoning_end_s);
    f(last_token_s, other.last_token_s);
    f(max_tbt_s, other.max_tbt_s);
    f(preempted_since_s, other.preempted_since_s);
    f(preempted_s, other.preempted_s);
    f(key_begin, other.key_begin);
    f(key_count, other.key_count);
    f(block_tokens, other.block_tokens);
    f(cached_count, other.cached_count);
  }

  bool record_token_curves_;
};

}  // namespace servegym_core
