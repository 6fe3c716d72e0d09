// Bindings of core/src/engine.hpp and what it exposes (instances' settings and counters, the
// outcome table): no logic.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <type_traits>

#include "engine.hpp"
#include "numpy_copy.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace servegym_core {

namespace {

using ReadOnlyTable = nb::ndarray<nb::numpy, const std::int64_t, nb::ndim<2>, nb::c_contig>;

// A read-only numpy view of a rows x width table the engine owns; it keeps the engine alive.
// Valid until the table grows (a new instance or tier): the caller fetches it again then.
ReadOnlyTable table_view(const Engine& engine, const std::vector<std::int64_t>& values, std::size_t rows,
                         std::size_t width) {
  const std::size_t shape[2] = {rows, width};
  return ReadOnlyTable(values.data(), 2, shape, nb::find(&engine));
}

// The values of `column` at `rows`, in that order, as a numpy array.
template <class T>
nb::ndarray<nb::numpy, T> gathered(const std::vector<T>& column, const std::vector<Req>& rows) {
  std::vector<T> values;
  values.reserve(rows.size());
  for (const Req r : rows) values.push_back(column[static_cast<std::size_t>(r)]);
  return column_of(std::move(values));
}

const InstanceArrays& arrays_of(const Engine& engine) {
  const InstanceArrays* arrays = engine.arrays();
  if (arrays == nullptr) throw std::logic_error("this engine keeps no arrays (track_arrays=False)");
  return *arrays;
}

}  // namespace

void bind_engine(nb::module_& m) {
  nb::class_<RouterSpec>(m, "RouterSpec", "A compiled router's name and, for llumnix, its headroom fractions.")
      .def(nb::init<>())
      .def_rw("name", &RouterSpec::name)
      .def_rw("headroom_fractions", &RouterSpec::headroom_fractions);

  using O = SchedulerOptions;
  nb::class_<O>(m, "SchedulerOptions", "A local scheduler's name and options, defaults filled in.")
      .def(nb::init<>())
      .def_rw("name", &O::name)
      .def_rw("chunk_tokens", &O::chunk_tokens)
      .def_rw("quantum_tokens", &O::quantum_tokens)
      .def_rw("demotion_kv_tokens", &O::demotion_kv_tokens);

  using S = InstanceSettings;
  nb::class_<S>(m, "InstanceSettings", "One replica as simulator.compiled resolved it from its InstanceConfig.")
      .def(nb::init<>())
      .def_rw("total_blocks", &S::total_blocks)
      .def_rw("block_size", &S::block_size)
      .def_rw("watermark_blocks", &S::watermark_blocks)
      .def_rw("max_batch_size", &S::max_batch_size)
      .def_rw("max_batched_tokens", &S::max_batched_tokens)
      .def_rw("context_tokens", &S::context_tokens)
      .def_rw("swap_s_per_token", &S::swap_s_per_token)
      .def_rw("frontend_s", &S::frontend_s)
      .def_rw("gpu_index", &S::gpu_index)
      .def_rw("intra_node_link_gbps", &S::intra_node_link_gbps)
      .def_rw("host_link_gbps", &S::host_link_gbps)
      .def_rw("kv_bytes_per_token", &S::kv_bytes_per_token)
      .def_rw("preempt_by_swap", &S::preempt_by_swap)
      .def_rw("prefix_caching", &S::prefix_caching)
      .def_rw("host_capacity_blocks", &S::host_capacity_blocks)
      .def_rw("model_index", &S::model_index)
      .def_rw("role", &S::role)
      .def_rw("max_segment_iterations", &S::max_segment_iterations)
      .def_rw("pp", &S::pp)
      .def_rw("pipeline_depth", &S::pipeline_depth)
      .def_rw("scheduler", &S::scheduler);

  nb::class_<Instance>(m, "EngineInstance", "An instance's counters after a run (read-only).")
      .def_ro("instance_id", &Instance::instance_id)
      .def_ro("busy_time_s", &Instance::busy_time_s)
      .def_ro("iterations", &Instance::iterations)
      .def_ro("context_truncated", &Instance::context_truncated)
      .def_prop_ro("num_requests", &Instance::num_requests)
      .def_prop_ro("min_queue_length", [](const Instance& i) { return i.gate.min_length; })
      .def_prop_ro("lifecycle_code", [](const Instance& i) { return static_cast<int>(i.lifecycle()); })
      .def_ro("busy", &Instance::busy)
      .def("unsynced_kv_blocks", &Instance::unsynced_kv_blocks,
           "KV blocks the decode iterations finished by now but not yet applied fill.")
      .def("request_counts", &Instance::request_counts, "overdue_before_s"_a, "fresh_tokens"_a,
           "(reasoning, answering, fresh answering, demoted, answers overdue) of its requests now.")
      .def("answering_behind_pace", &Instance::answering_behind_pace, "tpot_target_s"_a,
           "PASCAL's token-pacer flag for its requests now (applies the finished decode iterations).")
      .def("prefix_match", [](const Instance& i, Req r) {
        if (!i.cache) throw std::logic_error("instance " + std::to_string(i.instance_id) + " has no prefix cache");
        if (r < 0 || static_cast<std::size_t>(r) >= i.requests.size()) {
          throw std::invalid_argument("request row " + std::to_string(r) + " is not in the engine");
        }
        const PrefixMatch found = i.cache->match(i.requests, r);
        return std::make_tuple(found.gpu, found.host, found.unreferenced);
      }, "row"_a, "PrefixCache.match of a queued request row: (GPU blocks, host blocks after them, unreferenced).")
      .def("sync", &Instance::sync, "Apply the decode iterations finished by now.")
      .def_ro("waiting", &Instance::waiting, "Request rows waiting here, in queue order (a copy).")
      .def_ro("running", &Instance::running, "Request rows running here, in order (a copy).")
      .def_ro("swapped", &Instance::swapped, "Request rows swapped out to host memory, in queue order (a copy).")
      .def("migration_candidate", &Instance::migration_candidate, "excluded"_a,
           "The request row the instance would migrate out (-1: none).")
      .def("head_of_line_demand_blocks", &Instance::head_of_line_demand_blocks,
           "The blocks the first queued request in the local scheduler's order would take.")
      .def_prop_ro("kv_used_blocks", [](const Instance& i) { return i.kv.used_blocks; })
      .def_prop_ro("kv_cached_blocks", [](const Instance& i) { return i.kv.cached_blocks; })
      .def_prop_ro("prefix_cache", [](const Instance& i) { return i.cache.get(); }, nb::rv_policy::reference_internal,
                   "Its prefix cache's counters, or None without prefix caching.");

  nb::class_<PrefixCache>(m, "PrefixCacheCounters", "An instance's prefix-cache counters after a run (read-only).")
      .def_ro("query_tokens", &PrefixCache::query_tokens)
      .def_ro("hit_tokens", &PrefixCache::hit_tokens)
      .def_ro("host_hit_tokens", &PrefixCache::host_hit_tokens)
      .def_ro("evicted_blocks", &PrefixCache::evicted_blocks)
      .def_ro("host_dropped_blocks", &PrefixCache::host_dropped_blocks)
      .def_ro("entry_blocks", &PrefixCache::entry_blocks)
      .def_ro("host_blocks", &PrefixCache::host_blocks)
      .def_ro("host_capacity_blocks", &PrefixCache::host_capacity_blocks);

  using T = RequestTable;
  nb::class_<T>(m, "RequestTable", "Requests as columns, one row each (read-only copies).")
      .def_prop_ro("size", &T::size)
      .def_ro("request_id", &T::request_id)
      .def_ro("instance_id", &T::instance_id)
      .def_ro("output_tokens", &T::output_tokens)
      .def_ro("reasoning_tokens", &T::reasoning_tokens)
      .def_ro("first_scheduled_s", &T::first_scheduled_s)
      .def_ro("first_token_s", &T::first_token_s)
      .def_ro("first_answer_token_s", &T::first_answer_token_s)
      .def_ro("reasoning_end_s", &T::reasoning_end_s)
      .def_ro("max_tbt_s", &T::max_tbt_s)
      .def_ro("preempted_s", &T::preempted_s)
      .def_ro("num_preemptions", &T::num_preemptions)
      .def_ro("num_migrations", &T::num_migrations)
      .def_ro("token_curve", &T::token_curve);

  nb::class_<OutcomeTable>(m, "OutcomeTable", "The outcomes in the order recorded: rows, their requests, end and reason.")
      .def_ro("rows", &OutcomeTable::rows)
      .def_ro("requests", &OutcomeTable::requests, nb::rv_policy::reference_internal)
      .def_ro("finish_s", &OutcomeTable::finish_s)
      .def_ro("reasons", &OutcomeTable::reasons)
      .def_ro("quality", &OutcomeTable::quality);

  nb::class_<Engine>(m, "Engine", "The compiled event loop of aggregated instances (simulator.compiled).")
      .def(nb::init<RouterSpec, bool, std::vector<std::string>, bool, bool>(), "router"_a, "record_token_curves"_a,
           "model_names"_a, "track_arrays"_a = false, "external_phase_decisions"_a = false)
      .def("add_instance", &Engine::add_instance, "settings"_a, "latency"_a)
      .def("start_at", &Engine::start_at, "instance_id"_a, "time_s"_a)
      .def("set_min_queue_length", [](Engine& e, std::int32_t id, std::int64_t length, double max_wait_s) {
        e.instance_mut(id).set_min_queue_length(length, max_wait_s);
      }, "instance_id"_a, "length"_a, "max_wait_s"_a)
      .def("set_lifecycle", [](Engine& e, std::int32_t id, int code) {
        if (code < 0 || code > 3) throw std::invalid_argument("lifecycle code " + std::to_string(code));
        e.set_lifecycle(id, static_cast<Lifecycle>(code));
      }, "instance_id"_a, "code"_a)
      .def("take_stops", &Engine::take_stops)
      .def("submit", &Engine::submit, "request_id"_a, "arrival_s"_a, "prompt_tokens"_a, "output_tokens"_a,
           "reasoning_tokens"_a, "tier"_a, "model_index"_a, "session_targets"_a)
      .def("set_block_keys", &Engine::set_block_keys, "block_tokens"_a, "offsets"_a, "keys"_a)
      .def("run", &Engine::run, nb::call_guard<nb::gil_scoped_release>())
      .def("advance", [](Engine& e, double until_s) {
        Decision decision;
        {
          nb::gil_scoped_release released;
          decision = e.advance(until_s);
        }
        return std::make_tuple(static_cast<int>(decision.kind), decision.row, decision.instance_id);
      }, "until_s"_a, "Run events up to until_s or a stop: (kind 0 none / 1 route / 2 phase / 3 Python callback, "
                      "row or callback slot, instance).")
      .def("dispatch_decision", &Engine::dispatch_decision, "row"_a, "instance_id"_a)
      .def("place_answering", &Engine::place_answering, "row"_a, "instance_id"_a)
      .def("unsynced_kv_blocks", [](const Engine& e, const std::vector<std::int32_t>& ids) {
        std::vector<std::int64_t> blocks;
        blocks.reserve(ids.size());
        for (const std::int32_t id : ids) blocks.push_back(e.instance(id).unsynced_kv_blocks());
        return blocks;
      }, "ids"_a, "Instance.unsynced_kv_blocks of each instance of ids.")
      .def("prefix_cache_counters", [](const Engine& e, const std::vector<std::int32_t>& ids) {
        std::vector<std::int64_t> counters;
        counters.reserve(4 * ids.size());
        for (const std::int32_t id : ids) {
          const PrefixCache* cache = e.instance(id).cache.get();
          if (cache == nullptr) {
            counters.insert(counters.end(), {-1, -1, -1, -1});
          } else {
            counters.insert(counters.end(),
                            {cache->entry_blocks, cache->query_tokens, cache->hit_tokens, cache->host_hit_tokens});
          }
        }
        return counters;
      }, "ids"_a, "Per instance of ids: (entry_blocks, query_tokens, hit_tokens, host_hit_tokens), -1s without a cache.")
      .def("request_tokens", &Engine::request_tokens, "row"_a, "(generated, KV) tokens of a request row now.")
      .def("request_state", [](const Engine& e, Req r) {
        const RequestTable& t = e.requests();
        if (r < 0 || static_cast<std::size_t>(r) >= t.size()) {
          throw std::invalid_argument("request row " + std::to_string(r) + " is not in the engine");
        }
        return std::make_tuple(static_cast<int>(t.residency[r]), static_cast<int>(t.phase[r]), t.instance_id[r],
                               t.output_tokens[r], t.reasoning_tokens[r], t.first_token_s[r], t.first_scheduled_s[r],
                               t.preempted_s[r], t.num_preemptions[r], t.num_migrations[r],
                               static_cast<bool>(t.pd_handoff[r]), static_cast<bool>(t.demoted[r]),
                               t.reasoning_end_s[r], t.first_answer_token_s[r]);
      }, "row"_a, "(residency code, phase code, instance id, output tokens, reasoning tokens, first token time, "
                  "first scheduled time, seconds preempted, preemptions, migrations, PD hand-off, demoted, end of "
                  "reasoning, first answer token) of a request row now (the "
                  "token counts as the context rule capped them).")
      .def("migrate", &Engine::migrate, "row"_a, "target_id"_a)
      .def("schedule_callback", &Engine::schedule_callback, "time_s"_a, "slot"_a)
      .def("set_completion_hook", &Engine::set_completion_hook, "on"_a)
      .def("set_phase_router", [](Engine& e, nb::callable router) {
        e.set_phase_router([router](Req r, std::int32_t instance_id) {
          nb::gil_scoped_acquire acquire;  // advance and run release the GIL
          return nb::cast<std::int32_t>(router(r, instance_id));
        });
      }, "router"_a, "router(row, instance_id) -> instance id (-1: stay), called where a request finishes reasoning.")
      .def("set_cascade", &Engine::set_cascade, "stage_models"_a, "judge_latency_s"_a)
      .def("set_cascade_thresholds", [](Engine& e, std::vector<double> thresholds) {
        e.cascade().set_thresholds(std::move(thresholds));
      }, "thresholds"_a)
      .def("set_cascade_entry_stage", [](Engine& e, std::int32_t stage) { e.cascade().set_entry_stage(stage); },
           "stage"_a)
      .def("set_cascade_scores", [](Engine& e, const std::vector<std::int32_t>& rows, const std::vector<double>& values,
                                    const std::vector<std::uint8_t>& present) {
        e.cascade().set_scores(rows, values, present);
      }, "rows"_a, "values"_a, "present"_a, "Quality scores of rows x stages (present 0: none).")
      .def("set_cascade_signals", [](Engine& e, const std::vector<std::int32_t>& rows, const std::vector<double>& values,
                                     const std::vector<std::uint8_t>& present) {
        e.cascade().set_signals(rows, values, present);
      }, "rows"_a, "values"_a, "present"_a, "Judge signals of rows x stages (present 0: none).")
      .def("clear_cascade_signals", [](Engine& e) { e.cascade().clear_signals(); },
           "The judge compares the quality scores.")
      .def_prop_ro("num_rows", [](const Engine& e) { return e.requests().size(); })
      .def("row_origins", [](Engine& e, std::size_t first) {
        std::vector<Req> origins;
        for (std::size_t r = first; r < e.requests().size(); ++r) origins.push_back(e.cascade().origin(static_cast<Req>(r)));
        return origins;
      }, "first"_a, "The cascade's origin row of each row from `first` on (a forwarded row's first row).")
      .def("add_arrival", [](Engine& e, std::int64_t request_id, double arrival_s, std::int64_t prompt_tokens,
                             std::int64_t output_tokens, std::int64_t reasoning_tokens, std::int64_t tier,
                             std::int32_t model_index) {
        return e.add_arrival(RequestRow{request_id, arrival_s, prompt_tokens, output_tokens, reasoning_tokens, tier,
                                        model_index});
      }, "request_id"_a, "arrival_s"_a, "prompt_tokens"_a, "output_tokens"_a, "reasoning_tokens"_a, "tier"_a,
         "model_index"_a)
      .def("add_combo", &Engine::add_combo, "entry_id"_a, "decode_ids"_a, "basic_rr"_a)
      .def("dispatch_in_place", &Engine::dispatch_in_place, "row"_a, "instance_id"_a)
      .def("redispatch", &Engine::redispatch, "row"_a, "instance_id"_a, "first_scheduled_s"_a, "preempted_s"_a,
           "num_preemptions"_a, "num_migrations"_a)
      .def("outcome_of", &Engine::outcome_of, "row"_a, "finish_s"_a)
      .def("set_migration", [](Engine& e, std::int64_t last_stage_max_blocks, std::int64_t max_stages) {
        e.set_migration(MigrationSettings{last_stage_max_blocks, max_stages});
      }, "last_stage_max_blocks"_a, "max_stages"_a)
      .def_prop_ro("migrations", [](const Engine& e) {
        return std::make_tuple(e.migrations_started, e.migrations_done, e.migrations_aborted);
      }, "(started, done, aborted) live migrations so far.")
      .def_ro("in_place_dispatches", &Engine::in_place_dispatches,
              "New requests the 'units' router sent to a PD combo that ran in place on an idle member.")
      .def("set_headroom_fractions", &Engine::set_headroom_fractions, "fractions"_a)
      .def("set_units", &Engine::set_units, "offsets"_a, "members"_a, "weights"_a,
           "Route to these units from now on (router 'units'): unit u is members[offsets[u]:offsets[u + 1]], "
           "entry first, with routing weight weights[u].")
      .def("migration_candidates", &Engine::migration_candidates, "ids"_a, "excluded"_a,
           "Per instance of ids: its migration candidate as (queued, prompt + generated tokens, KV tokens, tier), "
           "-1s for none; flat, 4 values an instance.")
      .def_prop_ro("num_outcomes", &Engine::num_outcomes)
      .def_prop_ro("num_instances", &Engine::num_instances)
      .def_prop_ro("arrived", &Engine::arrived)
      .def_prop_ro("arrays_table", [](const Engine& e) {
        const InstanceArrays& a = arrays_of(e);
        return table_view(e, a.table, static_cast<std::size_t>(a.rows), kArrayWidth);
      }, "simulator.instance_arrays' table, a read-only view (rows x 12).")
      .def_prop_ro("arrays_tier_table", [](const Engine& e) {
        const InstanceArrays& a = arrays_of(e);
        return table_view(e, a.tier_table, static_cast<std::size_t>(a.rows), static_cast<std::size_t>(a.tiers));
      }, "Requests of each tier on each instance, a read-only view (rows x tiers).")
      .def_prop_ro("arrays_tiers", [](const Engine& e) { return arrays_of(e).tiers; })
      .def_prop_ro("arrays_layout_version", [](const Engine& e) { return arrays_of(e).layout_version; })
      .def_prop_ro("now_s", &Engine::now_s)
      .def("instance", &Engine::instance, "instance_id"_a, nb::rv_policy::reference_internal)
      .def("outcome_table", &Engine::outcome_table, "first"_a, "count"_a)
      .def("outcome_columns", [](const Engine& e, std::size_t first) {
        const OutcomeLog& log = e.outcome_log();
        const RequestTable& r = e.requests();
        first = std::min(first, log.size());
        const std::vector<Req> rows(log.rows.begin() + static_cast<std::ptrdiff_t>(first), log.rows.end());
        const auto tail = [first](const auto& values) {
          using T = typename std::decay_t<decltype(values)>::value_type;
          return column_of(std::vector<T>(values.begin() + static_cast<std::ptrdiff_t>(first), values.end()));
        };
        nb::dict columns;
        columns["row"] = column_of(std::vector<Req>(rows));
        columns["request_id"] = gathered(r.request_id, rows);
        columns["tier"] = gathered(r.tier, rows);
        columns["instance_id"] = gathered(r.instance_id, rows);
        columns["arrival_s"] = gathered(r.arrival_s, rows);
        columns["prompt_tokens"] = gathered(r.prompt_tokens, rows);
        columns["output_tokens"] = gathered(r.output_tokens, rows);
        columns["reasoning_tokens"] = gathered(r.reasoning_tokens, rows);
        columns["first_scheduled_s"] = gathered(r.first_scheduled_s, rows);
        columns["first_token_s"] = gathered(r.first_token_s, rows);
        columns["first_answer_token_s"] = gathered(r.first_answer_token_s, rows);
        columns["finish_s"] = tail(log.finish_s);
        columns["max_tbt_s"] = gathered(r.max_tbt_s, rows);
        columns["preempted_s"] = gathered(r.preempted_s, rows);
        columns["num_preemptions"] = gathered(r.num_preemptions, rows);
        columns["num_migrations"] = gathered(r.num_migrations, rows);
        columns["quality"] = tail(log.quality);
        columns["reason"] = tail(log.reasons);
        return columns;
      }, "first"_a,
           "The outcomes from the first-th on as numpy columns (copies), in the order recorded: the engine row, the "
           "request's fields, its times and counters, the end (finish_s), quality and the reject code (reason).");
}

}  // namespace servegym_core
