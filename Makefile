# Two entry points that work on a fresh machine: `make demo` and `make test`.
# Each creates .venv when it is missing and installs what it needs with pip.
PYTHON ?= $(shell command -v python3.11 >/dev/null 2>&1 && echo python3.11 || echo python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-core

.PHONY: demo test lint typecheck unit clean venv

venv: $(STAMP)

$(STAMP): pyproject.toml
	@command -v bwrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && (apt-get install -y -q bubblewrap || (apt-get update -q && apt-get install -y -q bubblewrap)); } \
	  || echo "bubblewrap is missing: sandboxed trials need it (apt-get install bubblewrap)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,tools,models,train]'
	touch $@

demo: $(STAMP)
	$(VENV)/bin/bureau demo --out runs/demo

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench

typecheck: $(STAMP)
	$(VENV)/bin/mypy
	cd src/bureau/worlds/oracles && ../../../../$(VENV)/bin/mypy --config-file ../../../../pyproject.toml --no-namespace-packages $$(ls *.py)

unit: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadfile -q

test: lint typecheck unit

clean:
	rm -rf runs .pytest_cache .mypy_cache .ruff_cache .venv-harbor
