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

## run: install agent-team and start the daemon on its embedded defaults
##      (SQLite ./agent-team.db, local answers, offline model and builder,
##      dashboard on http://127.0.0.1:8765 with a token printed on first run)
run: $(VENV)/.installed-run
	$(BIN)/agent-team daemon --demo

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

## schema: regenerate schema.sql and schema.postgres.sql (on a throwaway PostgreSQL) from
##         the migrations
schema: $(VENV)/.installed-dev
	$(BIN)/agent-team schema --write schema.sql
	$(BIN)/python -m tests.pg_server $(BIN)/agent-team schema --dialect postgres \
		--write schema.postgres.sql

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache build *.egg-info
