# Two commands on a fresh machine: `make run` (install, ingest, serve) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SGLANG_REPO ?= https://github.com/sgl-project/sglang.git
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run ingest serve test lint format openapi bench clean

install: $(VENV)/.installed static/vendor/htmx.min.js test-output/axe.min.js

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,postgres]'
	touch $@

# htmx from the npm package, pinned in package.json, copied into static/ (ignored by git).
static/vendor/htmx.min.js: package.json
	npm install --no-audit --no-fund --silent
	mkdir -p static/vendor
	cp node_modules/htmx.org/dist/htmx.min.js static/vendor/htmx.min.js

# axe-core is for the browser tests only: kept out of static/ so the app never serves it;
# the tests inject it with Playwright.
test-output/axe.min.js: package.json static/vendor/htmx.min.js
	mkdir -p test-output
	cp node_modules/axe-core/axe.min.js $@

ingest: install
	$(BIN)/flagatlas ingest --repo "$(SGLANG_REPO)"

run: ingest
	$(BIN)/flagatlas check-docs
	$(BIN)/flagatlas serve --host $(HOST) --port $(PORT)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test: lint
	$(BIN)/pytest

# The committed API description; tests/test_contract.py fails when it differs from the app's.
openapi: install
	$(BIN)/flagatlas openapi > docs/openapi.json

clean:
	rm -rf $(VENV) node_modules static/vendor
