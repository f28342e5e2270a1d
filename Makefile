# Two commands do everything on a fresh machine:  `make demo`  and  `make test`.
VENV   ?= .venv
PYTHON ?= python3
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test test-fast check lint typecheck docs services bench typescript clean

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

# Four xdist workers: most tests wait on servers, workers and the database, so four keep two
# cores busy; each worker has its own databases (tests/parallel.py), and a test file stays on
# one worker (loadfile), so its module-scoped servers and Celery workers start once. Files go
# out in the order tests/conftest.py sorts them, the most work first (not by test count).
XDIST  ?= -n 4 --dist loadfile --no-loadscope-reorder
# The tests' temporary files (every SQLite store of the suite among them) live in memory where
# the machine has a tmpfs: each SQLite commit's fsync costs milliseconds on a disk and nothing
# there, a third of the SQLite tests' time; no test is about surviving a power cut.
TEST_TMPDIR ?= $(if $(wildcard /dev/shm/.),/dev/shm,$(or $(TMPDIR),/tmp))

## The whole suite: lint, strict types, the documentation site, the TypeScript client built,
## then every test on SQLite and the real Postgres/Redis (the client's node tests among them).
test: check docs services typescript
	TMPDIR=$(TEST_TMPDIR) $(BIN)/pytest $(XDIST) --durations=40

## The loop between edits: unit tests and the integration tests on SQLite (no PostgreSQL,
## Celery, browser or slow test; Redis is still used by a few).
FAST   := not postgres and not celery and not browser and not slow
test-fast: $(STAMP)
	TMPDIR=$(TEST_TMPDIR) $(BIN)/pytest $(XDIST) -q -m "$(FAST)"

# The TypeScript client (clients/typescript): `npm ci` only when its lock file changed (npm ci
# writes node_modules/.package-lock.json last), then the build.
TS := clients/typescript
$(TS)/node_modules/.package-lock.json: $(TS)/package-lock.json
	cd $(TS) && npm ci --no-audit --no-fund

typescript: $(TS)/node_modules/.package-lock.json
	cd $(TS) && npm run build

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
	rm -rf $(TS)/node_modules $(TS)/dist $(TS)/build
