# One command per stage. Every target sets up .venv first when it is missing.
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test lint

install: $(STAMP)

# torch is installed on its own first, so that the project's dependencies find it and never
# pull another (CUDA) build.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest

lint: $(STAMP)
	$(PY) -m ruff check seq2seq scripts tests
	$(PY) -m ruff format --check seq2seq scripts tests
