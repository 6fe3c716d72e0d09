// Bindings of the native vector envs (episode_numbers.hpp; routing_mdp.hpp and vector_engine.hpp;
// tier_mdp.hpp and tier_vector_engine.hpp; migration_mdp.hpp and migration_vector_engine.hpp): no logic. The specs' instance-matrix fields are
// ObservationSpec's (bind_observation.cpp).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "migration_vector_engine.hpp"
#include "tier_vector_engine.hpp"
#include "vector_engine.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace servegym_core {

namespace {

// A read-only numpy view of one of the vector engine's buffers; it keeps the engine alive.
template <class V, class T>
nb::ndarray<nb::numpy, const T, nb::c_contig> buffer_view(const V& vector, const std::vector<T>& values,
                                                          std::initializer_list<std::size_t> shape) {
  return nb::ndarray<nb::numpy, const T, nb::c_contig>(values.data(), shape.size(), shape.begin(), nb::find(&vector));
}

}  // namespace

void bind_vector(nb::module_& m) {
  using S = RoutingSpec;
  nb::class_<S, ObservationSpec>(m, "RoutingSpec",
                                 "What the Routing-v0 kernel needs of an env's configuration (envs.vector): the "
                                 "instance matrix's ObservationSpec, then the context's and the reward's.")
      .def(nb::init<>())
      .def_rw("context_k", &S::context_k)
      .def_rw("context_c", &S::context_c)
      .def_rw("ctx_is_arrival", &S::ctx_is_arrival)
      .def_rw("ctx_is_phase_change", &S::ctx_is_phase_change)
      .def_rw("ctx_prompt_tokens", &S::ctx_prompt_tokens)
      .def_rw("ctx_generated_tokens", &S::ctx_generated_tokens)
      .def_rw("ctx_recent_qps", &S::ctx_recent_qps)
      .def_rw("ctx_cost_rate", &S::ctx_cost_rate)
      .def_rw("ctx_arrived", &S::ctx_arrived)
      .def_rw("ctx_tier", &S::ctx_tier)
      .def_rw("ctx_source_slot", &S::ctx_source_slot)
      .def_rw("recent_window_s", &S::recent_window_s)
      .def_rw("reward", &S::reward)
      .def_rw("tier_weights", &S::tier_weights)
      .def_rw("invalid_action_penalty", &S::invalid_action_penalty)
      .def_rw("load_count_scale", &S::load_count_scale)
      .def_rw("e2e_scale_s", &S::e2e_scale_s);

  using N = EpisodeNumbers;
  nb::class_<N>(m, "EpisodeNumbers", "One episode's numbers that live in Python, common to the kernels (envs.native_pool).")
      .def(nb::init<>())
      .def_rw("static_features", &N::static_features)
      .def_rw("arrival_s", &N::arrival_s)
      .def_rw("slo_ttft_s", &N::slo_ttft_s)
      .def_rw("slo_ttfat_s", &N::slo_ttfat_s)
      .def_rw("slo_e2e_s", &N::slo_e2e_s)
      .def_rw("slo_tbt_s", &N::slo_tbt_s)
      .def_rw("held_since_s", &N::held_since_s)
      .def_rw("held_gpus", &N::held_gpus)
      .def_rw("held_usd_per_gpu_s", &N::held_usd_per_gpu_s)
      .def_rw("cost_closed_usd", &N::cost_closed_usd)
      .def_rw("cost_rate_usd_per_s", &N::cost_rate_usd_per_s)
      .def_rw("submitted", &N::submitted);

  using E = RoutingEpisode;
  nb::class_<E, N>(m, "RoutingEpisode", "One Routing-v0 episode's numbers that live in Python (envs.vector).")
      .def(nb::init<>())
      .def_rw("potential", &E::potential)
      .def_rw("latency_last_s", &E::latency_last_s)
      .def_rw("latency_arrived", &E::latency_arrived)
      .def_rw("latency_ended", &E::latency_ended)
      .def_rw("decision_kind", &E::decision_kind)
      .def_rw("decision_row", &E::decision_row)
      .def_rw("decision_instance", &E::decision_instance);

  using V = VectorEngine;
  nb::class_<V>(m, "VectorEngine", "N Routing-v0 envs stepped by one call on a pool of threads (envs.vector).")
      .def(nb::init<const RoutingSpec&, std::int32_t, std::int32_t>(), "spec"_a, "num_envs"_a, "num_threads"_a = 0)
      .def("attach", &V::attach, "env"_a, "engine"_a, "episode"_a,
           "Env i's new episode: its engine (kept alive by the caller) at its first decision.")
      .def("step", [](V& v, nb::ndarray<const std::int64_t, nb::ndim<1>, nb::c_contig> actions) {
        if (actions.shape(0) != static_cast<std::size_t>(v.num_envs())) {
          throw std::invalid_argument("actions: " + std::to_string(actions.shape(0)) + " for " +
                                      std::to_string(v.num_envs()) + " envs");
        }
        nb::gil_scoped_release released;
        v.step(actions.data());
      }, "actions"_a, "Step every env (int64 actions, one per env) without the GIL.")
      .def_prop_ro("num_envs", &V::num_envs)
      .def_prop_ro("num_threads", &V::num_threads)
      .def_prop_ro("instances", [](const V& v) {
        return buffer_view(v, v.instances, {static_cast<std::size_t>(v.num_envs()), v.slots(), v.features()});
      })
      .def_prop_ro("context", [](const V& v) {
        return buffer_view(v, v.context, {static_cast<std::size_t>(v.num_envs()), v.context_size()});
      })
      .def_prop_ro("mask", [](const V& v) {
        return buffer_view(v, v.mask, {static_cast<std::size_t>(v.num_envs()), v.slots()});
      })
      .def_prop_ro("valid", [](const V& v) {
        return buffer_view(v, v.valid, {static_cast<std::size_t>(v.num_envs()), v.slots()});
      })
      .def_prop_ro("done", [](const V& v) { return buffer_view(v, v.done, {v.done.size()}); })
      .def_prop_ro("invalid_action", [](const V& v) { return buffer_view(v, v.invalid_action, {v.done.size()}); })
      .def_prop_ro("reward", [](const V& v) { return buffer_view(v, v.reward, {v.done.size()}); })
      .def_prop_ro("time_s", [](const V& v) { return buffer_view(v, v.time_s, {v.done.size()}); })
      .def_prop_ro("cost_usd", [](const V& v) { return buffer_view(v, v.cost_usd, {v.done.size()}); })
      .def_prop_ro("finished", [](const V& v) { return buffer_view(v, v.finished, {v.done.size()}); })
      .def_prop_ro("slo_met", [](const V& v) { return buffer_view(v, v.slo_met, {v.done.size()}); });

  using TS = TierSpec;
  nb::class_<TS, ObservationSpec>(m, "TierSpec",
                                  "What the Tier-v0 kernel needs of an env's configuration (envs.tier_vector): the "
                                  "instance matrix's ObservationSpec, then the context's and the reward's.")
      .def(nb::init<>())
      .def_rw("context_k", &TS::context_k)
      .def_rw("context_c", &TS::context_c)
      .def_rw("ctx_headroom_fraction", &TS::ctx_headroom_fraction)
      .def_rw("ctx_arrivals_per_s", &TS::ctx_arrivals_per_s)
      .def_rw("ctx_finished", &TS::ctx_finished)
      .def_rw("ctx_slo_attainment", &TS::ctx_slo_attainment)
      .def_rw("ctx_mean_ttft_s", &TS::ctx_mean_ttft_s)
      .def_rw("ctx_recent_qps", &TS::ctx_recent_qps)
      .def_rw("ctx_arrived", &TS::ctx_arrived)
      .def_rw("recent_window_s", &TS::recent_window_s)
      .def_rw("control_interval_s", &TS::control_interval_s)
      .def_rw("headroom_levels", &TS::headroom_levels)
      .def_rw("headroom_cap_fraction", &TS::headroom_cap_fraction)
      .def_rw("reward", &TS::reward)
      .def_rw("tier_weights", &TS::tier_weights)
      .def_rw("e2e_scale_s", &TS::e2e_scale_s);

  using TE = TierEpisode;
  nb::class_<TE, N>(m, "TierEpisode", "One Tier-v0 episode's numbers that live in Python (envs.tier_vector).")
      .def(nb::init<>())
      .def_rw("headroom_fractions", &TE::headroom_fractions)
      .def_rw("interval_stats", &TE::interval_stats)
      .def_rw("next_control_s", &TE::next_control_s)
      .def_rw("arrived_before", &TE::arrived_before)
      .def_rw("outcomes_before", &TE::outcomes_before)
      .def_rw("seen", &TE::seen);

  using TV = TierVectorEngine;
  nb::class_<TV>(m, "TierVectorEngine", "N Tier-v0 envs stepped by one call on a pool of threads (envs.tier_vector).")
      .def(nb::init<const TierSpec&, std::int32_t, std::int32_t>(), "spec"_a, "num_envs"_a, "num_threads"_a = 0)
      .def("attach", &TV::attach, "env"_a, "engine"_a, "episode"_a,
           "Env i's new episode: its engine (kept alive by the caller) after Python's reset.")
      .def("step", [](TV& v, nb::ndarray<const std::int64_t, nb::ndim<2>, nb::c_contig> levels) {
        if (levels.shape(0) != static_cast<std::size_t>(v.num_envs()) ||
            levels.shape(1) != static_cast<std::size_t>(v.num_tiers())) {
          throw std::invalid_argument("levels: shape (" + std::to_string(levels.shape(0)) + ", " +
                                      std::to_string(levels.shape(1)) + ") for " + std::to_string(v.num_envs()) +
                                      " envs of " + std::to_string(v.num_tiers()) + " tiers");
        }
        nb::gil_scoped_release released;
        v.step(levels.data());
      }, "levels"_a, "Step every env (int64 levels, num_envs x num_tiers) without the GIL.")
      .def_prop_ro("num_envs", &TV::num_envs)
      .def_prop_ro("num_threads", &TV::num_threads)
      .def_prop_ro("instances", [](const TV& v) {
        return buffer_view(v, v.instances, {static_cast<std::size_t>(v.num_envs()), v.slots(), v.features()});
      })
      .def_prop_ro("context", [](const TV& v) {
        return buffer_view(v, v.context, {static_cast<std::size_t>(v.num_envs()), v.context_size()});
      })
      .def_prop_ro("headroom_fractions", [](const TV& v) {
        return buffer_view(v, v.headroom_fractions,
                           {static_cast<std::size_t>(v.num_envs()), static_cast<std::size_t>(v.num_tiers())});
      })
      .def_prop_ro("done", [](const TV& v) { return buffer_view(v, v.done, {v.done.size()}); })
      .def_prop_ro("reward", [](const TV& v) { return buffer_view(v, v.reward, {v.done.size()}); })
      .def_prop_ro("time_s", [](const TV& v) { return buffer_view(v, v.time_s, {v.done.size()}); })
      .def_prop_ro("cost_usd", [](const TV& v) { return buffer_view(v, v.cost_usd, {v.done.size()}); })
      .def_prop_ro("finished", [](const TV& v) { return buffer_view(v, v.finished, {v.done.size()}); })
      .def_prop_ro("slo_met", [](const TV& v) { return buffer_view(v, v.slo_met, {v.done.size()}); });
  using MS = MigrationSpec;
  nb::class_<MS, ObservationSpec>(m, "MigrationSpec",
                                  "What the Migration-v0 kernel needs of an env's configuration (envs.migration_vector): "
                                  "the instance matrix's ObservationSpec, then the context's, the action's and the reward's.")
      .def(nb::init<>())
      .def_rw("context_k", &MS::context_k)
      .def_rw("context_c", &MS::context_c)
      .def_rw("ctx_phase_mode", &MS::ctx_phase_mode)
      .def_rw("ctx_recent_qps", &MS::ctx_recent_qps)
      .def_rw("ctx_arrived", &MS::ctx_arrived)
      .def_rw("ctx_live_migrations", &MS::ctx_live_migrations)
      .def_rw("ctx_prompt_tokens", &MS::ctx_prompt_tokens)
      .def_rw("ctx_generated_tokens", &MS::ctx_generated_tokens)
      .def_rw("ctx_has_queued_candidate", &MS::ctx_has_queued_candidate)
      .def_rw("ctx_has_running_candidate", &MS::ctx_has_running_candidate)
      .def_rw("ctx_candidate_kv_tokens", &MS::ctx_candidate_kv_tokens)
      .def_rw("ctx_candidate_tier", &MS::ctx_candidate_tier)
      .def_rw("ctx_freeness_full", &MS::ctx_freeness_full)
      .def_rw("freeness_headroom", &MS::freeness_headroom)
      .def_rw("recent_window_s", &MS::recent_window_s)
      .def_rw("migration_interval_s", &MS::migration_interval_s)
      .def_rw("invalid_action_penalty", &MS::invalid_action_penalty)
      .def_rw("reward", &MS::reward)
      .def_rw("tier_weights", &MS::tier_weights)
      .def_rw("e2e_scale_s", &MS::e2e_scale_s);

  using ME = MigrationEpisode;
  nb::class_<ME, N>(m, "MigrationEpisode", "One Migration-v0 episode's numbers that live in Python (envs.migration_vector).")
      .def(nb::init<>())
      .def_rw("model_codes", &ME::model_codes)
      .def_rw("next_tick_s", &ME::next_tick_s)
      .def_rw("seen", &ME::seen);

  using MV = MigrationVectorEngine;
  nb::class_<MV>(m, "MigrationVectorEngine",
                 "N Migration-v0 envs (periodic) stepped by one call on a pool of threads (envs.migration_vector).")
      .def(nb::init<const MigrationSpec&, std::int32_t, std::int32_t>(), "spec"_a, "num_envs"_a, "num_threads"_a = 0)
      .def("attach", &MV::attach, "env"_a, "engine"_a, "episode"_a,
           "Env i's new episode: its engine (kept alive by the caller) after Python's reset.")
      .def("step", [](MV& v, nb::ndarray<const std::int64_t, nb::ndim<2>, nb::c_contig> actions) {
        if (actions.shape(0) != static_cast<std::size_t>(v.num_envs()) || actions.shape(1) != 2) {
          throw std::invalid_argument("actions: shape (" + std::to_string(actions.shape(0)) + ", " +
                                      std::to_string(actions.shape(1)) + ") for " + std::to_string(v.num_envs()) +
                                      " envs of (source, destination)");
        }
        nb::gil_scoped_release released;
        v.step(actions.data());
      }, "actions"_a, "Step every env (int64 (source, destination) slots, num_envs x 2) without the GIL.")
      .def_prop_ro("num_envs", &MV::num_envs)
      .def_prop_ro("num_threads", &MV::num_threads)
      .def_prop_ro("instances", [](const MV& v) {
        return buffer_view(v, v.instances, {static_cast<std::size_t>(v.num_envs()), v.slots(), v.features()});
      })
      .def_prop_ro("context", [](const MV& v) {
        return buffer_view(v, v.context, {static_cast<std::size_t>(v.num_envs()), v.context_size()});
      })
      .def_prop_ro("mask", [](const MV& v) {
        return buffer_view(v, v.mask, {static_cast<std::size_t>(v.num_envs()), v.mask_size()});
      })
      .def_prop_ro("done", [](const MV& v) { return buffer_view(v, v.done, {v.done.size()}); })
      .def_prop_ro("invalid_action", [](const MV& v) { return buffer_view(v, v.invalid_action, {v.done.size()}); })
      .def_prop_ro("reward", [](const MV& v) { return buffer_view(v, v.reward, {v.done.size()}); })
      .def_prop_ro("time_s", [](const MV& v) { return buffer_view(v, v.time_s, {v.done.size()}); })
      .def_prop_ro("cost_usd", [](const MV& v) { return buffer_view(v, v.cost_usd, {v.done.size()}); })
      .def_prop_ro("finished", [](const MV& v) { return buffer_view(v, v.finished, {v.done.size()}); })
      .def_prop_ro("slo_met", [](const MV& v) { return buffer_view(v, v.slo_met, {v.done.size()}); })
      .def_prop_ro("migrations_started", [](const MV& v) { return buffer_view(v, v.migrations_started, {v.done.size()}); })
      .def_prop_ro("migrations_done", [](const MV& v) { return buffer_view(v, v.migrations_done, {v.done.size()}); })
      .def_prop_ro("migrations_aborted", [](const MV& v) { return buffer_view(v, v.migrations_aborted, {v.done.size()}); });
}

}  // namespace servegym_core
