# Two entry points for a fresh machine (see README): `make run` and `make test`.
# Each creates .venv itself; nothing is installed outside it.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run test check lint typecheck pytest schema clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-run: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed-run

## run: install agent-team and bring up its ledger on the embedded defaults
run: $(VENV)/.installed-run
	$(BIN)/agent-team migrate

## test: install the dev tools, then lint, type-check and run the whole suite
test: check pytest

check: lint typecheck

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

pytest: $(VENV)/.installed-dev
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## schema: regenerate schema.sql from the migrations
schema: $(VENV)/.installed-run
	$(BIN)/agent-team schema --write schema.sql

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache build *.egg-info
