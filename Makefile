# make demo: set up .venv and run the example end to end.  make test: the whole suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check

.PHONY: demo test test-fast bench bench-local bench-azure golden-azure clean

# pip 23 cannot resolve azure-ai-ml's dependencies: upgrade pip inside the venv first.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(VENV)/.installed-base: pyproject.toml | $(BIN)/python
	$(PIP) install --quiet -e .
	@touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(PIP) install --quiet -e '.[dev]'
	@touch $@ $(VENV)/.installed-base

# torch (the CPU build) for the distributed tests; the default install never pulls it.
$(VENV)/.installed-torch: pyproject.toml | $(VENV)/.installed-dev
	$(PIP) install --quiet -e '.[dev,torch]'
	@touch $@

demo: $(VENV)/.installed-base
	$(BIN)/mlpipe check pipelines/defect_classifier.py
	$(BIN)/mlpipe graph pipelines/defect_classifier.py
	$(BIN)/python -m components.synthetic build/demo-data
	$(BIN)/mlpipe submit pipelines/defect_classifier.py --input raw=build/demo-data/raw \
		--input split=build/demo-data/split.csv --param epochs=3

# The whole suite; the store tests also run against a throw-away PostgreSQL server on loopback
# when PostgreSQL is installed (.ci/with-postgres; .ci/run installs it from Debian's packages).
test: $(VENV)/.installed-dev $(VENV)/.installed-torch
	.ci/with-postgres $(BIN)/python -m pytest

# The fast half: everything not marked slow (no subprocess-heavy, distributed or PostgreSQL tests).
test-fast: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -m "not slow"

bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_build.py
	$(BIN)/python benchmarks/bench_contracts.py

# Azure ML export against azure-ai-ml's build + dump (figures in docs/performance.md).
# The local executor, snapshots and evidence queries (figures in docs/performance.md).
bench-local: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_local.py

bench-azure: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_azure_export.py

# Regenerate the golden Azure ML YAML after an intended change of the export format.
golden-azure: $(VENV)/.installed-dev
	MLPIPE_UPDATE_GOLDEN=1 $(BIN)/python -m pytest tests/backends/azure/test_golden.py

clean:
	rm -rf $(VENV) build .pytest_cache .hypothesis
