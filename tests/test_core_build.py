"""The compiled core's build: present, fresh, built with the flags that keep results bit-exact,
and refused with one line when a tool is missing or the build is stale."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import servegym_core
from servegym_core._build import CORE_SOURCE_DIR, check_fresh, load_core, source_hash

ROOT = Path(__file__).resolve().parent.parent
PREFLIGHT = ROOT / "core" / "preflight.sh"


def test_module_was_built_from_this_checkouts_sources():
    assert servegym_core._core.source_hash() == source_hash(CORE_SOURCE_DIR)


def test_an_edited_source_makes_the_build_stale(tmp_path):
    copy = tmp_path / "core"
    shutil.copytree(CORE_SOURCE_DIR, copy)
    built = source_hash(copy)
    check_fresh(built, copy)
    (copy / "bind" / "module.cpp").write_text((copy / "bind" / "module.cpp").read_text() + "\n")
    with pytest.raises(ImportError, match=r"stale .* run `make build`"):
        check_fresh(built, copy)


def test_a_new_source_file_makes_the_build_stale(tmp_path):
    copy = tmp_path / "core"
    shutil.copytree(CORE_SOURCE_DIR, copy)
    built = source_hash(copy)
    (copy / "src").mkdir(exist_ok=True)
    (copy / "src" / "extra.hpp").write_text("#pragma once\n")
    with pytest.raises(ImportError, match="stale"):
        check_fresh(built, copy)


def test_every_core_translation_unit_is_compiled_without_contraction_or_fast_math():
    commands = json.loads((ROOT / "build" / "core" / "compile_commands.json").read_text())
    core_units = [c for c in commands if str(CORE_SOURCE_DIR) in c["file"]]
    assert core_units, "no core translation unit in compile_commands.json"
    for unit in core_units:
        flags = unit["command"].split()
        assert "-ffp-contract=off" in flags, unit["file"]
        assert not any(f in ("-ffast-math", "-Ofast") or f.startswith("-march") for f in flags), unit["file"]


def test_a_missing_module_says_to_build_it(monkeypatch):
    def not_built(name):
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    monkeypatch.setattr("servegym_core._build.importlib.import_module", not_built)
    with pytest.raises(ImportError, match=r"^servegym_core._core is not built: run `make build`"):
        load_core()


def _tool_dir(tmp_path: Path, tools: list[str]) -> Path:
    """A PATH holding only ``tools`` (and what the script itself runs)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ["bash", "sort", "head", "awk", *tools]:
        os.symlink(shutil.which(tool), bin_dir / tool)
    return bin_dir


@pytest.mark.parametrize(
    "tools,env,message",
    [
        (["g++", "ninja"], {}, "make: error: cmake not found: install CMake 3.25"),
        (["g++", "cmake"], {}, "make: error: ninja not found"),
        (["cmake", "ninja"], {"CXX": "clang-99"}, "make: error: compiler clang-99 not found"),
    ],
)
def test_preflight_names_the_missing_tool_and_exits_2(tmp_path, tools, env, message):
    path = _tool_dir(tmp_path, tools)
    result = subprocess.run(
        ["bash", str(PREFLIGHT)], env={"PATH": str(path), **env}, capture_output=True, text=True
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2
    assert len(lines) == 1 and lines[0].startswith(message), lines


def test_preflight_refuses_an_old_compiler(tmp_path):
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "old-g++").write_text("#!/bin/sh\necho 11.4.0\n")
    (fake / "old-g++").chmod(0o755)
    path = _tool_dir(tmp_path, ["cmake", "ninja"])
    result = subprocess.run(
        ["bash", str(PREFLIGHT)], env={"PATH": f"{path}:{fake}", "CXX": "old-g++"}, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "make: error: compiler old-g++ 11.4.0 is too old: servegym_core needs g++ >= 12"


def test_preflight_passes_on_this_machine():
    result = subprocess.run(["bash", str(PREFLIGHT)], capture_output=True, text=True)
    assert (result.returncode, result.stderr) == (0, "")
