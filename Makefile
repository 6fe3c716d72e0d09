# The two set-up commands of the README: `make run` (main job, small default) and `make test`.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: run test

$(VENV)/.installed: pyproject.toml
	python3.11 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

run: $(VENV)/.installed
	$(PY) -m experiments.main

test: $(VENV)/.installed
	$(PY) -m pytest -n 2 -q
