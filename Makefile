# The suite's entry points. `make run`: set up this machine and run every check on it;
# `make test`: the project's tests. Everything else is a step of those two.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
VENV_STAMP := $(VENV)/.installed
REFRAME := $(BIN)/reframe -C site-configs/local.py -c reframe-checks
# Extra ReFrame options, e.g. make run RFM_OPTS='-n StreamCheck'
RFM_OPTS ?=

.PHONY: run test bootstrap install spack baseline dry-run clean

run: install
	$(REFRAME) -r --performance-report $(RFM_OPTS); status=$$?; \
	echo "Results: perflogs in var/perflogs/, ReFrame's results database var/results.db," \
	     "run reports in var/reports/ (newest: $$(ls -t var/reports/*.json 2>/dev/null | head -1))"; \
	exit $$status

test: $(VENV_STAMP)
	$(BIN)/python -m pytest

# Fails fast, before anything is installed, when no Spack can be found or cloned.
spack:
	@PYTHONPATH=src $(PYTHON) -m hpcbench.spack locate >/dev/null

bootstrap: spack $(VENV_STAMP)
	$(BIN)/hpcbench bootstrap

install: spack $(VENV_STAMP)
	$(BIN)/hpcbench install

# Record the newest stored results of this machine as its baseline (references/local.yaml).
baseline: $(VENV_STAMP)
	$(BIN)/hpcbench baseline

dry-run: $(VENV_STAMP)
	$(REFRAME) --dry-run $(RFM_OPTS)

$(VENV_STAMP): requirements.txt pyproject.toml
	@if ! $(PYTHON) -m venv $(VENV) 2>/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q >/dev/null && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv >/dev/null && \
	    $(PYTHON) -m venv $(VENV); \
	  else echo "error: cannot create a venv; as root run: apt-get install python3-venv" >&2; \
	    exit 1; fi; fi
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.txt -e .
	touch $@

clean:
	rm -rf var $(VENV)
