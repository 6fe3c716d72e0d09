# The two set-up commands of the README: `make run` (main job, small default) and `make test`.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: run test build mutation mutation-core

$(VENV)/.installed: pyproject.toml
	python3.11 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

# The compiled core (core/ -> servegym_core/_core*.so): CMake + Ninja in build/core, a no-op when up to date.
build: $(VENV)/.installed
	@core/preflight.sh $(PY)
	@test -f build/core/build.ninja || cmake -S core -B build/core -G Ninja -DPython_EXECUTABLE=$(abspath $(PY)) --log-level=WARNING
	@cmake --build build/core

run: build
	$(PY) -m experiments.main

test: build
	$(PY) -m pytest -n 2 -q

# Mutation testing of the core modules (pyproject.toml's [tool.mutmut]); long, not part of `make test`.
# `mutants/` keeps the results: a second run re-tests only what changed; `mutmut results` lists survivors.
mutation: build
	$(VENV)/bin/mutmut run --max-children 2
	$(VENV)/bin/mutmut results

# Mutation testing of the compiled core (core/src), which mutmut cannot reach: rebuilds the core for each
# mutant and runs the tests that compare it with the Python engine. Edits core/src in place: run it in a
# worktree of its own. SAMPLE=N tests N mutants drawn at random.
mutation-core: build
	$(PY) tests/mutate_core.py $(if $(SAMPLE),--sample $(SAMPLE))
