// The extension module servegym_core._core: bindings only, no logic.
#include <nanobind/nanobind.h>

namespace servegym_core {
const char* source_hash();
void bind_kernels(nanobind::module_& m);
void bind_latency(nanobind::module_& m);
void bind_engine(nanobind::module_& m);
void bind_observation(nanobind::module_& m);
void bind_vector(nanobind::module_& m);
void bind_scaling(nanobind::module_& m);
}

NB_MODULE(_core, m) {
  m.doc() = "servegym's compiled simulator core";
  // Latency models live in module-level tables of scenarios and tests until the interpreter
  // exits, and Python does not collect every such object at exit; nanobind would then list them
  // as leaks on stderr. Nothing is leaked while the process runs.
  nanobind::set_leak_warnings(false);
  m.def("source_hash", &servegym_core::source_hash,
        "SHA-256 of the C++ sources this module was built from (see servegym_core._build).");
  servegym_core::bind_kernels(m);
  servegym_core::bind_latency(m);
  servegym_core::bind_engine(m);
  servegym_core::bind_observation(m);
  servegym_core::bind_vector(m);
  servegym_core::bind_scaling(m);
}
