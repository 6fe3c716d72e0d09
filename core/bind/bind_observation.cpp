// Bindings of core/src/instance_observation.hpp (envs.observation's kernel): no logic.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <stdexcept>
#include <string>

#include "instance_observation.hpp"
#include "numpy_copy.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace servegym_core {

void bind_observation(nb::module_& m) {
  using S = ObservationSpec;
  nb::class_<S>(m, "ObservationSpec", "What InstanceFeatures' constructor fixes (envs.observation).")
      .def(nb::init<>())
      .def_rw("max_instances", &S::max_instances)
      .def_rw("num_tiers", &S::num_tiers)
      .def_rw("per_request_detail", &S::per_request_detail)
      .def_rw("tpot_target_s", &S::tpot_target_s)
      .def_rw("fresh_quantum_tokens", &S::fresh_quantum_tokens)
      .def_rw("prefix_caching", &S::prefix_caching)
      .def_rw("prefix_match", &S::prefix_match)
      .def_rw("service_time_ewma_weight", &S::service_time_ewma_weight)
      .def_rw("headroom_fractions", &S::headroom_fractions)
      .def_rw("instance_k", &S::instance_k)
      .def_rw("instance_c", &S::instance_c);

  m.def("instance_columns", &InstanceObservation::columns, "num_tiers"_a, "prefix_caching"_a, "prefix_match"_a,
        "The instance columns the kernel writes, in order (envs.observation.instance_fields' names).");

  using O = InstanceObservation;
  nb::class_<O>(m, "InstanceObservation", "The instance-observation matrix of one env (envs.observation).")
      .def(nb::init<ObservationSpec>(), "spec"_a)
      .def("reset", &O::reset, "A new episode: no static features, no service-time EWMA.")
      .def("set_static", &O::set_static, "per_instance"_a,
           "Static features of instances 0 .. n − 1, 6 per instance (instance-major); n only grows.")
      .def("fill", [](O& o, Engine& engine, nb::ndarray<const std::int32_t, nb::ndim<1>, nb::c_contig> slots,
                      std::int64_t request, nb::ndarray<float, nb::ndim<2>, nb::c_contig> out) {
        const std::size_t rows = static_cast<std::size_t>(o.spec().max_instances);
        if (out.shape(0) != rows || out.shape(1) != o.features()) {
          throw std::invalid_argument("out: shape (" + std::to_string(out.shape(0)) + ", " +
                                      std::to_string(out.shape(1)) + "), the matrix is (" + std::to_string(rows) +
                                      ", " + std::to_string(o.features()) + ")");
        }
        o.fill(engine, slots.data(), slots.shape(0), static_cast<Req>(request), out.data());
      }, "engine"_a, "slots"_a, "request"_a, "out"_a,
      "Write the matrix into `out`: row k for instance slots[k] (int32, −1 empty); `request` the routed row or −1.")
      .def_prop_ro("features", &O::features)
      .def_prop_ro("rows", [](const O& o) { return copy_of(o.rows(), o.rows().size()); }, nb::rv_policy::move,
                   "The last fill's slots holding a live instance (a copy; the others too).")
      .def_prop_ro("ids", [](const O& o) { return copy_of(o.ids(), o.ids().size()); }, nb::rv_policy::move)
      .def_prop_ro("table", [](const O& o) { return copy_of(o.table(), o.ids().size(), kArrayWidth); }, nb::rv_policy::move)
      .def_prop_ro("used_blocks", [](const O& o) { return copy_of(o.used_blocks(), o.ids().size()); }, nb::rv_policy::move)
      .def_prop_ro("head_of_line_blocks", [](const O& o) { return copy_of(o.head_of_line_blocks(), o.ids().size()); }, nb::rv_policy::move)
      .def_prop_ro("tier_requests", [](const O& o) {
        return copy_of(o.tier_requests(), o.ids().size(), static_cast<std::size_t>(o.spec().num_tiers));
      }, nb::rv_policy::move)
      .def_prop_ro("beyond_tiers", &O::beyond_tiers)
      .def("freeness_full", [](const O& o, const std::vector<double>& headroom_fractions) {
        const std::vector<double> value = o.freeness_full(headroom_fractions);
        return copy_of(value, value.size());
      }, "headroom_fractions"_a, nb::rv_policy::move, "InstanceLoad.freeness_full of the last fill's load.")
      .def_prop_ro("service_ewma_s", [](const O& o) { return copy_of(o.service_ewma_s(), o.service_ewma_s().size()); }, nb::rv_policy::move);
}

}  // namespace servegym_core
