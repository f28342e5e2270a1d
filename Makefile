# Two commands do everything on a fresh machine:  `make demo`  and  `make test`.
VENV   ?= .venv
PYTHON ?= python3
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test check lint typecheck docs services bench clean

# PYTHONWARNINGS hides the notice setuptools prints on every editable install (a folder named
# like a package may shadow it): here those folders are the packages.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	PYTHONWARNINGS='ignore:Editable installation' $(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

## Run the example on a fresh embedded SQLite store (./sgam-demo.sqlite3); then .venv/bin/sgam.
demo: $(STAMP)
	$(BIN)/sgam demo

## The whole suite: lint, strict types, the documentation site, then every test on SQLite and
## the real Postgres/Redis.
test: check docs services
	$(BIN)/pytest --durations=15

## The documentation site, offline, into site/: the reference pages must match the code
## (scripts/reference.py writes them), and any warning (a broken link, an asset from another
## host) fails the build.
docs: $(STAMP)
	$(BIN)/python scripts/reference.py --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

check: lint typecheck

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

services:
	scripts/services

bench: $(STAMP) services
	$(BIN)/python bench/ledger.py

clean:
	rm -rf $(VENV) site .mypy_cache .pytest_cache .ruff_cache .hypothesis sgam.sqlite3* sgam-demo.sqlite3*
