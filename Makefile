# The suite's entry points. `make run`: set up this machine and run every check on it;
# `make test`: the project's tests. Everything else is a step of those two.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
VENV_STAMP := $(VENV)/.installed
# The system: local (this machine) or a paper's (on such a machine; here: make dry-run).
SYSTEM ?= local
REFRAME := $(BIN)/reframe -C site-configs/$(SYSTEM).py --system $(SYSTEM) -c reframe-checks
# Extra ReFrame options, e.g. make run RFM_OPTS='-n StreamCheck'
RFM_OPTS ?=
# quick: HPL and HPCC at 1/25 of the memory (minutes); full: at 80 % of it (hours here).
MODE ?= quick
# Sweeps and node screening are runs of their own (make tune, make screen).
MODE_OPTS_quick := -S sizing=tuning -T '^(sweep|screen)$$'
MODE_OPTS_full := -T '^(sweep|screen)$$'
MODE_OPTS = $(or $(MODE_OPTS_$(MODE)),$(error MODE must be quick or full, not '$(MODE)'))
# Slow-node screening: flag nodes this many percent below the median.
SCREEN_THRESHOLD ?= 5

.PHONY: run test bootstrap install setup spack baseline dry-run references tune screen clean

# Without a Spack (none found, none clonable), `setup` prepares the registry-only path
# and the run measures HPCC from Debian; the checks that need Spack say so and skip.
run: $(VENV_STAMP)
	$(BIN)/hpcbench setup
	$(REFRAME) $(MODE_OPTS) -r --performance-report $(RFM_OPTS); status=$$?; \
	$(BIN)/hpcbench compare-stacks; \
	echo "Results: perflogs in var/perflogs/, ReFrame's results database var/results.db," \
	     "run reports in var/reports/ (newest: $$(ls -t var/reports/*.json 2>/dev/null | head -1))"; \
	exit $$status

test: $(VENV_STAMP)
	$(BIN)/hpcbench setup --registry-only
	$(BIN)/python -m pytest

# HPL tuning sweep at 1/25 of the memory (T2K 4.4), then the table of the best values.
tune: $(VENV_STAMP)
	$(BIN)/hpcbench setup
	$(REFRAME) -t '^sweep$$' -r $(RFM_OPTS)
	$(BIN)/hpcbench hpl-tuning

# Single-node HPL on every node of each partition (T2K 4.2), then the slow nodes.
screen: $(VENV_STAMP)
	$(BIN)/hpcbench setup
	$(REFRAME) -t '^screen$$' --distribute=all -r $(RFM_OPTS)
	$(BIN)/hpcbench screen-nodes --threshold $(SCREEN_THRESHOLD)

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
	$(REFRAME) $(MODE_OPTS) --dry-run $(RFM_OPTS)

# Reference figures per system and benchmark (references/*.yaml).
references: $(VENV_STAMP)
	$(BIN)/hpcbench references

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
