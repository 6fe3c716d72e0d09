"""servegym's compiled core: the C++ extension ``servegym_core._core``, the layer below ``hardware``.

Built from ``core/`` by ``make build`` (``make run`` and ``make test`` call it): g++ >= 12, CMake
>= 3.25, Ninja and nanobind. Importing this package checks that the module exists and was built
from the C++ sources in this checkout, and otherwise raises an ``ImportError`` that says to run
``make build``.
"""

from servegym_core._build import load_core

_core = load_core()

__all__ = ["_core"]
