// Bindings of Scaling-v0's native vector env (scaling_mdp.hpp, scaling_vector_engine.hpp): no
// logic. The spec's instance-matrix fields are ObservationSpec's (bind_observation.cpp); the
// episode's common numbers are EpisodeNumbers' (bind_vector.cpp).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <tuple>

#include "scaling_vector_engine.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace servegym_core {

namespace {

// A read-only numpy view of one of the vector engine's buffers; it keeps the engine alive.
template <class T>
nb::ndarray<nb::numpy, const T, nb::c_contig> view(const ScalingVectorEngine& engine, const std::vector<T>& values,
                                                   std::initializer_list<std::size_t> shape) {
  return nb::ndarray<nb::numpy, const T, nb::c_contig>(values.data(), shape.size(), shape.begin(), nb::find(&engine));
}

}  // namespace

void bind_scaling(nb::module_& m) {
  using C = ScalingConfig;
  nb::class_<C>(m, "ScalingConfig", "One InstanceConfig a Scaling-v0 unit kind deploys, as the engine takes it.")
      .def(nb::init<InstanceSettings, LatencyEvaluator, std::int32_t, std::int64_t, double, double, std::vector<double>>(),
           "settings"_a, "latency"_a, "gpu_type"_a, "num_gpus"_a, "usd_per_gpu_s"_a, "load_s"_a, "static_features"_a)
      .def_ro("gpu_type", &C::gpu_type)
      .def_ro("num_gpus", &C::num_gpus)
      .def_ro("usd_per_gpu_s", &C::usd_per_gpu_s)
      .def_ro("load_s", &C::load_s);

  using S = ScalingSpec;
  nb::class_<S, ObservationSpec>(m, "ScalingSpec",
                                 "What the Scaling-v0 kernel needs of an env's configuration (envs.scaling_vector): "
                                 "the instance matrix's ObservationSpec, then the context's, the units' and the reward's.")
      .def(nb::init<>())
      .def_rw("context_k", &S::context_k)
      .def_rw("context_c", &S::context_c)
      .def_rw("ctx_arrivals_per_s", &S::ctx_arrivals_per_s)
      .def_rw("ctx_waiting", &S::ctx_waiting)
      .def_rw("ctx_running", &S::ctx_running)
      .def_rw("ctx_swapped", &S::ctx_swapped)
      .def_rw("ctx_cost_rate", &S::ctx_cost_rate)
      .def_rw("ctx_slo_attainment", &S::ctx_slo_attainment)
      .def_rw("ctx_finished", &S::ctx_finished)
      .def_rw("ctx_arrived", &S::ctx_arrived)
      .def_rw("ctx_serving_units", &S::ctx_serving_units)
      .def_rw("ctx_starting_units", &S::ctx_starting_units)
      .def_rw("ctx_draining_units", &S::ctx_draining_units)
      .def_rw("window_s", &S::window_s)
      .def_rw("one_unit", &S::one_unit)
      .def_rw("kind_offsets", &S::kind_offsets)
      .def_rw("kind_configs", &S::kind_configs)
      .def_rw("kind_weights", &S::kind_weights)
      .def_rw("provisioning_s", &S::provisioning_s)
      .def_rw("combos", &S::combos)
      .def_rw("combo_basic_rr", &S::combo_basic_rr)
      .def_rw("configs", &S::configs)
      .def_rw("gpu_inventory", &S::gpu_inventory)
      .def_rw("invalid_action_penalty", &S::invalid_action_penalty)
      .def_rw("reward", &S::reward)
      .def_rw("tier_weights", &S::tier_weights)
      .def_rw("e2e_scale_s", &S::e2e_scale_s)
      .def_rw("usd_weight", &S::usd_weight)
      .def_rw("waiting_potential", &S::waiting_potential);

  using E = ScalingEpisode;
  nb::class_<E, EpisodeNumbers>(m, "ScalingEpisode", "One Scaling-v0 episode's numbers that live in Python (envs.scaling_vector).")
      .def(nb::init<>())
      .def_rw("held_ids", &E::held_ids)
      .def_rw("held_gpu_types", &E::held_gpu_types)
      .def_rw("gpus_in_use", &E::gpus_in_use)
      .def_rw("config_models", &E::config_models)
      .def_rw("config_gpus", &E::config_gpus)
      .def_rw("unit_kinds", &E::unit_kinds)
      .def_rw("unit_offsets", &E::unit_offsets)
      .def_rw("unit_members", &E::unit_members)
      .def_rw("slots", &E::slots)
      .def_rw("until_s", &E::until_s)
      .def_rw("window_first_outcome", &E::window_first_outcome)
      .def_rw("seen", &E::seen)
      .def_rw("last_cost_usd", &E::last_cost_usd)
      .def_rw("potential", &E::potential);

  using V = ScalingVectorEngine;
  nb::class_<V>(m, "ScalingVectorEngine", "N Scaling-v0 envs stepped by one call on a pool of threads (envs.scaling_vector).")
      .def(nb::init<const ScalingSpec&, std::int32_t, std::int32_t>(), "spec"_a, "num_envs"_a, "num_threads"_a = 0)
      .def("attach", &V::attach, "env"_a, "engine"_a, "episode"_a,
           "Env i's new episode: its engine (kept alive by the caller) after Python's reset.")
      .def("step", [](V& v, nb::ndarray<const std::int64_t, nb::ndim<2>, nb::c_contig> actions) {
        if (actions.shape(0) != static_cast<std::size_t>(v.num_envs()) || actions.shape(1) != v.action_size()) {
          throw std::invalid_argument("actions: shape (" + std::to_string(actions.shape(0)) + ", " +
                                      std::to_string(actions.shape(1)) + ") for " + std::to_string(v.num_envs()) +
                                      " envs of " + std::to_string(v.action_size()) + " values");
        }
        nb::gil_scoped_release released;
        v.step(actions.data());
      }, "actions"_a, "Step every env (int64 actions, num_envs x action size) without the GIL.")
      .def("events", [](const V& v, std::int32_t env) {
        std::vector<std::tuple<std::int32_t, std::int32_t, double>> events;
        for (const ScalingEvent& e : v.kernel(env).events()) events.emplace_back(e.config, e.instance_id, e.time_s);
        return events;
      }, "env"_a, "Env i's deployments (config, instance id, since) and releases (-1, instance id, stopped) this episode, in order.")
      .def("deployed", [](const V& v, std::int32_t env) {
        const ScalingMDP& k = v.kernel(env);
        return std::make_tuple(k.unit_kinds(), k.unit_offsets(), k.unit_members(), k.slots(), k.until_s(),
                               k.window_first_outcome());
      }, "env"_a, "Env i's units (kinds, offsets, members), slots (-1: empty), window end and first outcome of the window.")
      .def_prop_ro("num_envs", &V::num_envs)
      .def_prop_ro("num_threads", &V::num_threads)
      .def_prop_ro("instances", [](const V& v) {
        return view(v, v.instances, {static_cast<std::size_t>(v.num_envs()), v.slots(), v.features()});
      })
      .def_prop_ro("context", [](const V& v) {
        return view(v, v.context, {static_cast<std::size_t>(v.num_envs()), v.context_size()});
      })
      .def_prop_ro("mask", [](const V& v) { return view(v, v.mask, {static_cast<std::size_t>(v.num_envs()), v.mask_size()}); })
      .def_prop_ro("done", [](const V& v) { return view(v, v.done, {v.done.size()}); })
      .def_prop_ro("invalid_action", [](const V& v) { return view(v, v.invalid_action, {v.done.size()}); })
      .def_prop_ro("reward", [](const V& v) { return view(v, v.reward, {v.done.size()}); })
      .def_prop_ro("time_s", [](const V& v) { return view(v, v.time_s, {v.done.size()}); })
      .def_prop_ro("cost_usd", [](const V& v) { return view(v, v.cost_usd, {v.done.size()}); })
      .def_prop_ro("finished", [](const V& v) { return view(v, v.finished, {v.done.size()}); })
      .def_prop_ro("slo_met", [](const V& v) { return view(v, v.slo_met, {v.done.size()}); });
}

}  // namespace servegym_core
