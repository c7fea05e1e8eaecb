# The two commands: `make demo` and `make test`. Both bootstrap .venv themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
BENCH ?=
MODULE ?=

.PHONY: test test-busy lint types pytest demo bench mutate mutate-all mutate-constants mutate-constants-all clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Reinstall only when pyproject.toml changed since the last install. The dev extra
# (linters, test tools, the SDKs the tests check against) is for `make test`; the demo
# needs only the project's own dependencies (DEMO_STAMP), which the dev install holds.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP) $(DEMO_STAMP)

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(DEMO_STAMP)

lint: $(STAMP)
	$(BIN)/ruff check actors supervisors tests examples bench
	$(BIN)/ruff format --check actors supervisors tests examples bench

types: $(STAMP)
	$(BIN)/mypy --strict actors supervisors

pytest: $(STAMP)
	$(BIN)/python -m pytest

test: lint types pytest

# The whole suite beside two CPU-bound busy loops (a loaded 2-core machine): no test may
# depend on wall-clock speed. The loops stop with the suite, however it ends.
test-busy: $(STAMP)
	@$(BIN)/python -c 'while True: pass' & one=$$!; \
	$(BIN)/python -c 'while True: pass' & two=$$!; \
	trap 'kill $$one $$two' EXIT INT TERM; \
	$(BIN)/python -m pytest

demo: $(DEMO_STAMP)
	$(BIN)/python examples/agent_daemon.py

bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH)

# Mutation score of one module against the tests that exercise it (docs/contributing.md).
mutate: $(STAMP)
	@test -n "$(MODULE)" || { echo "usage: make mutate MODULE=path/to/module.py" >&2; exit 2; }
	$(BIN)/python -m tests.mutation $(MODULE)

# Every module of TESTS_BY_MODULE (or those under MODULE=prefix ...), and the score table
# of docs/contributing.md regenerated from the runs: no score is written by hand.
mutate-all: $(STAMP)
	$(BIN)/python -m tests.mutation --all $(MODULE) --write docs/contributing.md

# Constant mutants of one module: the literals evaluated at import time, which mutmut
# leaves alone (module and class constants, tables, field and parameter defaults).
mutate-constants: $(STAMP)
	@test -n "$(MODULE)" || { echo "usage: make mutate-constants MODULE=path/to/module.py" >&2; exit 2; }
	$(BIN)/python -m tests.mutation_constants $(MODULE)

# Every module of TESTS_BY_MODULE (or those under MODULE=prefix ...), and the constant
# score table of docs/contributing.md regenerated from the runs.
mutate-constants-all: $(STAMP)
	$(BIN)/python -m tests.mutation_constants --all $(MODULE) --write docs/contributing.md

clean:
	rm -rf $(VENV) bench/out .mypy_cache .ruff_cache
