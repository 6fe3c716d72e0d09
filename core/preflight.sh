#!/usr/bin/env bash
# Checks the tools that build servegym_core before CMake runs, one line per missing tool, exit 2.
# Usage: core/preflight.sh <python>
status=0
fail() { echo "make: error: $1" >&2; status=2; }
version_at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

cxx="${CXX:-g++}"
if ! command -v "$cxx" >/dev/null 2>&1; then
  fail "compiler $cxx not found: install g++ 12 or newer (apt-get install g++) or set CXX"
else
  version="$("$cxx" -dumpfullversion 2>/dev/null || "$cxx" -dumpversion)"
  version_at_least "$version" 12 || fail "compiler $cxx $version is too old: servegym_core needs g++ >= 12"
fi
if ! command -v cmake >/dev/null 2>&1; then
  fail "cmake not found: install CMake 3.25 or newer (apt-get install cmake)"
else
  version="$(cmake --version | head -n1 | awk '{print $3}')"
  version_at_least "$version" 3.25 || fail "cmake $version is too old: servegym_core needs CMake >= 3.25"
fi
command -v ninja >/dev/null 2>&1 || fail "ninja not found: install Ninja (apt-get install ninja-build)"
if [ -n "$1" ] && ! "$1" -m nanobind --cmake_dir >/dev/null 2>&1; then
  fail "nanobind not found for $1: pip install nanobind"
fi
exit $status
