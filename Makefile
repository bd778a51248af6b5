# `make run` and `make test` work from a clean clone: they create .venv, install torch (CPU
# wheel, pinned) first, then the project, then do their job.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
ARGS   ?=
# Test workers: one per core, at most 4 (each loads torch); files stay whole on one worker
# (--dist loadfile) so a module's fixtures are built once. TEST_JOBS=0 runs in one process.
TEST_JOBS ?= auto

.PHONY: setup run test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -q --upgrade pip
	$(BIN)/python -m pip install --disable-pip-version-check -q torch==2.13.0
	$(BIN)/python -m pip install --disable-pip-version-check -q -e ".[dev]"
	rm -f $(VENV)/.installed-*
	touch $@

run: setup
	$(BIN)/privaudit run $(ARGS)

test: setup
	$(BIN)/python -m pytest -n $(TEST_JOBS) --maxprocesses 4 --dist loadfile $(ARGS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: setup
	$(BIN)/python -m pytest benchmarks --benchmark-enable --benchmark-only $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .benchmarks
