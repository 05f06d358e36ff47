# Two commands: `make run` (the app with Redis and a Celery worker on http://127.0.0.1:8000)
# and `make test` (the whole suite). Both set up .venv on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: run test install install-test lint format bench clean

$(VENV)/.installed-run: pyproject.toml
	@scripts/check-python.sh "$(PYTHON)"
	@scripts/make-venv.sh "$(PYTHON)" $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -e .
	@touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed-run
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $@

install: $(VENV)/.installed-run

install-test: $(VENV)/.installed-test

run: install
	@scripts/run-dev.sh

test: install-test
	@scripts/ensure-system-packages.sh redis-server chromium
	$(PY) -m pytest

lint: install-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install-test
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: install-test
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,bench]'
	$(PY) bench/engine.py

clean:
	rm -rf $(VENV) var staticfiles .pytest_cache .ruff_cache
