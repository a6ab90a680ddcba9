# Quick start:  make demo   (local registry with sample images, one found, one missing)
#               make test   (lint, types, then every test: unit, integration, examples, image)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint unit integration agreement docs docs-serve bench bench-scan bench-corpus bench-startup bench-webhook bench-webhook-soak bench-webhook-attack bench-gate bench-runc system-deps venv clean

system-deps:
	@scripts/system-deps.sh

# The runtime dependencies at the image's pins (docker/constraints.txt): the tests run the
# versions the image ships, and a new release upstream changes neither until the pins move.
$(BIN)/.installed: pyproject.toml docker/constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]' -c docker/constraints.txt
	@touch $@

venv: $(BIN)/.installed

demo: system-deps venv
	$(BIN)/python scripts/demo.py

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: system-deps venv lint
	$(BIN)/pytest

unit: venv
	$(BIN)/pytest tests/unit

integration: system-deps venv
	$(BIN)/pytest tests/integration

agreement: system-deps venv
	$(BIN)/pytest tests/integration/differential

# The documentation site (mkdocs.yml): built strict into site/, or served with live reload.
docs: system-deps venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: system-deps venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --strict

bench: system-deps venv
	$(BIN)/python benchmarks/check_many.py

bench-scan: system-deps venv
	$(BIN)/python benchmarks/scan_tree.py

bench-corpus: venv
	$(BIN)/python benchmarks/scan_corpus.py

bench-startup: system-deps venv
	$(BIN)/python benchmarks/startup.py

bench-webhook: system-deps venv
	$(BIN)/python benchmarks/webhook_load.py

bench-webhook-soak: venv
	$(BIN)/python benchmarks/webhook_soak.py

bench-webhook-attack: system-deps venv
	$(BIN)/python benchmarks/webhook_attack.py

bench-gate: system-deps venv
	$(BIN)/python benchmarks/gate_latency.py

bench-runc: system-deps venv
	$(BIN)/python benchmarks/runc_start.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
