"""Layers import only downward: servegym_core -> hardware -> simulator -> envs -> baselines ->
agents -> experiments (DESIGN.md). Checked on every module's import statements, including the
ones inside functions."""

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("servegym_core", "hardware", "simulator", "envs", "baselines", "agents", "experiments")


def upward_imports(package: str) -> list[str]:
    """``file:line imported-module`` for every import in ``package`` of a layer above it."""
    level = LAYERS.index(package)
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in LAYERS and LAYERS.index(top) > level:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    return found


@pytest.mark.parametrize("package", LAYERS)
def test_no_layer_imports_a_layer_above_it(package):
    assert upward_imports(package) == []


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    fake_root = tmp_path
    (fake_root / "hardware").mkdir()
    (fake_root / "hardware" / "bad.py").write_text("def f():\n    from envs.frame import Frame\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", fake_root)
    assert upward_imports("hardware") == ["hardware/bad.py:2 envs.frame"]
