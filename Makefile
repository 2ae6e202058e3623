# One venv for everything; torch is pinned first so pip takes the local CPU build.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test venv lint bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[torch,cli,test,fsspec]'
	# Every framework, so no framework test is skipped in CI.
	$(BIN)/pip install -q jax flax tensorflow-cpu paddlepaddle 'mlx[cpu]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) demo bench-data

# Fuzz for a time budget (seconds); exit 1 and inputs under fuzz/crashes/ when a bug is found.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= all
FUZZ_SEED ?=
.PHONY: fuzz
fuzz: $(STAMP)
	$(BIN)/python fuzz/run.py --seconds $(FUZZ_SECONDS) --target $(FUZZ_TARGETS) $(if $(FUZZ_SEED),--seed $(FUZZ_SEED))
