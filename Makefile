# make demo: set up .venv and run the example end to end.  make test: the whole suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check

.PHONY: demo test test-fast test-with-postgres bench clean

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

demo: $(VENV)/.installed-base
	$(BIN)/mlpipe check pipelines/defect_classifier.py
	$(BIN)/mlpipe graph pipelines/defect_classifier.py
	$(BIN)/python -m components.synthetic build/demo-data
	$(BIN)/mlpipe submit pipelines/defect_classifier.py --input raw=build/demo-data/raw \
		--input split=build/demo-data/split.csv --param epochs=3

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest

# The whole suite with the store tests also against a throw-away PostgreSQL server on loopback
# (.ci/postgres: initdb into a temp folder, pg_ctl start on a free port as a non-root user).
test-with-postgres: $(VENV)/.installed-dev
	@pgdir=$$(mktemp -d); \
	url=$$(.ci/postgres start "$$pgdir") || { cat "$$pgdir"/*.log; exit 1; }; \
	MLPIPE_TEST_POSTGRES_URL="$$url" $(BIN)/python -m pytest; rc=$$?; \
	.ci/postgres stop "$$pgdir"; rm -rf "$$pgdir"; exit $$rc

# The fast half: everything not marked slow (no subprocess-heavy, distributed or PostgreSQL tests).
test-fast: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -m "not slow"

bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_build.py

clean:
	rm -rf $(VENV) build .pytest_cache .hypothesis
