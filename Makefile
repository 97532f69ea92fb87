# Two commands set up a fresh machine (Python 3.11 + pip):
#   make run    install into .venv and serve the webhook on 127.0.0.1:8080 (embedded Postgres,
#               local embedding model, sample corpus loaded once; Tesseract for scans when root)
#   make test-unit  the tests that need no database, model, browser or n8n (docs/tests.md)
#   make test   install and run the whole test suite (including the real-n8n end-to-end test,
#               Supabase's PostgreSQL 15 + pgvector 0.8.0 and Tesseract, from Debian's packages,
#               the Docker image, built and run with Debian's podman, and the keeper's pages in
#               Debian's headless Chromium)
VENV ?= .venv
PY := $(VENV)/bin/python
ARC := $(VENV)/bin/arc-retrieval
STAMP := $(VENV)/.installed

.PHONY: install run lint test test-unit test-fast test-n8n postgres15 ocr podman browser clean

install: $(STAMP)

$(STAMP): pyproject.toml scripts/portable-pgvector.sh
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e ".[test,eval]"
	scripts/portable-pgvector.sh $(PY)
	touch $(STAMP)

run: install ocr
	$(ARC) serve --load-sample

# ruff (lint and format) and mypy on worker/, as configured in pyproject.toml
lint: install
	$(VENV)/bin/ruff check worker && $(VENV)/bin/ruff format --check worker && $(VENV)/bin/mypy

# Test processes for `make test`: 2 cores, but most tests wait on subprocesses (the worker, n8n,
# gunicorn, Chromium, conversions), servers and I/O, so three keep both cores busy (docs/tests.md).
# Each process has its own embedded Postgres, model and servers; a module (an n8n module: one n8n
# version of it) runs in one process, the long ones first (tests/conftest.py's scheduler).
TEST_WORKERS ?= 3

test: install lint postgres15 ocr podman browser
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# Marked `unit` by tests/conftest.py from the fixtures each test uses
test-unit: install
	$(PY) -m pytest -q -m unit -n 2

# Tesseract, which reads scanned PDF pages (root: CI; otherwise a note and scans are refused)
ocr:
	scripts/install-ocr.sh

# Headless Chromium + ChromeDriver for the browser test of the keeper's pages (root: CI)
browser:
	scripts/install-browser.sh

# Supabase's PostgreSQL 15 + pgvector 0.8.0, a second database target for the tests (root: CI)
postgres15:
	scripts/install-postgres15.sh

# podman and a locally made python:3.11-slim, to build and run the Dockerfile (root: CI)
podman: install
	scripts/install-podman.sh $(PY)

test-fast: install ocr  # everything but the n8n end-to-end test (which installs n8n once, ~5 min) and the image's
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not n8n and not docker"

test-n8n: install
	$(PY) -m pytest -q -m n8n tests/test_n8n.py tests/test_n8n_node.py

clean:
	rm -rf $(VENV) .arc-data .pytest_cache .mypy_cache .ruff_cache
