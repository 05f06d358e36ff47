# Two commands: `make run` (the app with Redis and a Celery worker on http://127.0.0.1:8000)
# and `make test` (the whole suite); `make test-fast` runs the tests that need no process,
# browser or PostgreSQL (about a minute). All set up .venv on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3.12 || command -v python3.13 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
# pycanon (the tests' independent checker) and anjana (compared in `make bench`) pin older
# pandas and numpy than the app: they live in a venv of their own.
PYCANON_VENV := .venv-pycanon

.PHONY: run run-spark install-spark test test-fast test-parallel test-serial test-second-python install install-test pycanon-env lint format screenshots bench bench-io bench-web bench-pages bench-load bench-chaos clean

$(VENV)/.installed-run: pyproject.toml
	@scripts/check-python.sh "$(PYTHON)"
	@scripts/make-venv.sh "$(PYTHON)" $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -e .
	@touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed-run
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $@

$(PYCANON_VENV)/.installed: tests/support/pycanon-requirements.txt
	@scripts/check-python.sh "$(PYTHON)"
	@scripts/make-venv.sh "$(PYTHON)" $(PYCANON_VENV)
	$(PYCANON_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PYCANON_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		-r tests/support/pycanon-requirements.txt
	@touch $@

install: $(VENV)/.installed-run

install-test: $(VENV)/.installed-test $(PYCANON_VENV)/.installed

pycanon-env: $(PYCANON_VENV)/.installed

run: install
	@scripts/run-dev.sh

# `make run` with a local standalone Spark cluster (a master and two workers on 127.0.0.1) and
# SPARK_MASTER pointing at it.
run-spark: install-spark
	@scripts/run-spark.sh

install-spark: $(VENV)/.installed-spark

$(VENV)/.installed-spark: pyproject.toml $(VENV)/.installed-run
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[spark]'
	@touch $@

# pytest-xdist processes (-n): one per core by default.
TEST_WORKERS ?= auto
# Tests that must not share the machine with others (timing-sensitive chaos and load runs, the
# Spark cluster's JVMs) run alone, after the parallel pass.
SERIAL := chaos or load or spark

# The whole suite: in parallel where safe, then the serial tests, then the engine's tests on a
# second Python.
test: install-test
	@scripts/ensure-system-packages.sh redis-server chromium postgresql java
	@$(MAKE) --no-print-directory test-parallel
	@$(MAKE) --no-print-directory test-serial
	@$(MAKE) --no-print-directory test-second-python

# Browser tests that share the session's app stack run on one worker (xdist_group "stack"),
# which starts it once.
test-parallel: install-test
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup -m "not ($(SERIAL))"

test-serial: install-test
	$(PY) -m pytest -m "$(SERIAL)"

# The fast tier: no process, browser or PostgreSQL; a test that starts a process without a
# full-tier marker fails here (tests/support/tiers.py). Work stealing hands each worker a run of
# neighbouring tests, so a module's shared fixtures are made once per worker, not again each
# time the worker comes back to the module.
test-fast: install-test
	$(PY) -m pytest --fast -n $(TEST_WORKERS) --dist worksteal

# The engine's tests again on a second supported Python (3.11-3.13), when the machine has one.
test-second-python:
	@alt=$$(scripts/find-python.sh $(PY)); \
	if [ -z "$$alt" ]; then echo "No second Python 3.11-3.13 here: engine tests ran on one version only."; exit 0; fi; \
	echo "Engine tests on $$alt"; \
	scripts/make-venv.sh "$$alt" .venv-alt && \
	.venv-alt/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]' && \
	.venv-alt/bin/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) tests/engine tests/test_tabular.py

lint: install-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/vulture
	$(VENV)/bin/mypy

format: install-test
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The README's screenshots (docs/screenshots/) from a throwaway demo under var/ and chromium.
screenshots: install-test
	@scripts/ensure-system-packages.sh redis-server chromium
	$(PY) scripts/screenshots.py

bench: install-test
	$(PYCANON_VENV)/bin/python -m pip install --quiet --disable-pip-version-check 'anjana>=1.2,<2'
	$(PY) bench/engine.py

# The paths a user takes: the command as typed (1M rows), upload and profiling of a 1 GB file.
bench-io: install-test
	$(PY) bench/cli.py
	$(PY) bench/profile_upload.py --rows 12000000

# The web path over HTTP on real processes (1 GB file by default) and the review pages at scale.
ROWS ?= 12000000
bench-web: install-test
	$(PY) bench/web_path.py --rows $(ROWS)

bench-pages: install-test
	$(PY) bench/pages.py

# 50 simulated people for 60 s on gunicorn, PostgreSQL, Redis and a worker (loopback only).
bench-load: install-test
	$(PY) bench/load.py

# Faults caused for real during every kind of job (kill -9, Redis and PostgreSQL stopped), on
# throwaway servers on 127.0.0.1; prints a table (CHAOS_ARGS="--quick" for a short run).
CHAOS_ARGS ?=
bench-chaos: install-test
	@scripts/ensure-system-packages.sh redis-server postgresql
	$(PY) bench/chaos.py $(CHAOS_ARGS)

clean:
	rm -rf $(VENV) .venv-alt $(PYCANON_VENV) var staticfiles .pytest_cache .ruff_cache
