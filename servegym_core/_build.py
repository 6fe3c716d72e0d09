"""Finds the compiled module and refuses a missing or stale build with a one-line reason."""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path
from types import ModuleType

CORE_SOURCE_DIR = Path(__file__).resolve().parent.parent / "core"
"""The C++ sources, in a checkout; absent where servegym is installed from a wheel."""

HASHED_PATTERNS = ("src/**/*.cpp", "src/**/*.hpp", "bind/**/*.cpp", "bind/**/*.hpp")
REBUILD_HINT = "run `make build` (needs g++ >= 12, CMake >= 3.25, Ninja and nanobind)"


def source_hash(root: Path = CORE_SOURCE_DIR) -> str:
    """The digest ``core/source_hash.cmake`` compiles into the module: SHA-256 over the lines
    ``"<path relative to root> <SHA-256 of the file>\\n"`` of the sources, sorted by path."""
    paths = sorted({p.relative_to(root).as_posix() for pattern in HASHED_PATTERNS for p in root.glob(pattern)})
    lines = "".join(f"{path} {hashlib.sha256((root / path).read_bytes()).hexdigest()}\n" for path in paths)
    return hashlib.sha256(lines.encode()).hexdigest()


def check_fresh(built_hash: str, root: Path = CORE_SOURCE_DIR) -> None:
    """Raise ``ImportError`` if the sources under ``root`` differ from those the module was built from."""
    if not root.is_dir():
        return
    if built_hash != source_hash(root):
        raise ImportError(f"servegym_core._core is stale (its C++ sources in {root} changed since the build): {REBUILD_HINT}")


def load_core() -> ModuleType:
    """Import ``servegym_core._core``, checked for presence and freshness."""
    try:
        core = importlib.import_module("servegym_core._core")
    except ModuleNotFoundError as error:
        if error.name != "servegym_core._core":
            raise
        raise ImportError(f"servegym_core._core is not built: {REBUILD_HINT}") from None
    check_fresh(core.source_hash())
    return core
