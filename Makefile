# Two commands: `make run` trains the default task, `make test` runs the whole suite.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test lint bench slow learn docs clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,ray]'
	touch $(STAMP)

run: setup
	$(BIN)/interplay train configs/quickstart.yaml $(ARGS)

# Two processes, each test file whole on one of them (files share trained runs between tests).
test: setup
	$(BIN)/python -m pytest -m "not slow" -q -n 2 --dist loadfile $(PYTEST_ARGS)

# The slow tests that fit CI's budget (Ray runners, example scripts, learning checks); the
# longer learning checks (marked learning) are `make learn`.
slow: setup
	$(BIN)/python -m pytest -m "slow and not learning" -q -n 2 --dist loadfile $(PYTEST_ARGS)

learn: setup
	$(BIN)/python benchmarks/learning_checks.py $(ARGS)

lint: setup
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/mypy

# docs/reference.md, docs/metrics.md and docs/cli.md, generated from the code (a test diffs them).
docs: setup
	$(BIN)/python -m interplay.docs

bench: setup
	$(BIN)/python benchmarks/runner_overhead.py
	$(BIN)/python benchmarks/native_env_speed.py
	$(BIN)/python benchmarks/async_scaling.py
	$(BIN)/python benchmarks/ray_scaling.py
	$(BIN)/python benchmarks/ippo_speed.py
	$(BIN)/python benchmarks/vmas_speed.py
	$(BIN)/python benchmarks/env_families.py
	$(BIN)/python benchmarks/ppo_mpe.py configs/ippo_spread_fast.yaml --eval-env mpe2.simple_spread_v3

clean:
	rm -rf $(VENV) runs .pytest_cache
