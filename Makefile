# The suite's entry points. `make run`: set up this machine and run every check on it;
# `make test`: the project's tests. Everything else is a step of those two.
SHELL := /bin/bash
# Every variable given on the command line is taken as the text the user typed: make would
# otherwise expand a `$(shell ...)` in it (RFM_OPTS, NAME, BUNDLE, MODE, any name) when it
# passes the command line on to the recipes. Each becomes a simple variable holding its text,
# exported to the tools as that text (an override is exported only when told), so that
# `make run HPCBENCH_VAR=...` and `HPCBENCH_VAR=... make run` reach them alike, checked
# there the same way.
$(foreach v,$(.VARIABLES),$(if $(filter command line,$(origin $(v))),\
  $(eval override $(v) := $$(value $(v)))$(eval export $(v))))
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
VENV_STAMP := $(VENV)/.installed
# The system: local (this machine) or a paper's (on such a machine; here: make dry-run).
SYSTEM ?= local
# Where runs put their products (HPCBENCH_VAR, else var/: hpcbench.core.paths).
VAR := $(or $(value HPCBENCH_VAR),var)
# Values that reach the recipes' shell unquoted are checked before anything expands them, read
# with $(value) so that make never expands what a user typed: SYSTEM is one of the
# systems (site-configs/<name>.py), the results directory a path of plain characters (no
# spaces, quotes or shell syntax: its path also reaches job scripts and Spack), the
# screening threshold a number. BUNDLE is quoted where it is used.
SYSTEMS := $(sort $(basename $(notdir $(wildcard site-configs/*.py))))
_PLAIN := a b c d e f g h i j k l m n o p q r s t u v w x y z A B C D E F G H I J K L M N O P \
	Q R S T U V W X Y Z 0 1 2 3 4 5 6 7 8 9 _ . / - + @ : ~ =
# What is left of $(1) once every character of $(2) is taken out of it.
_left = $(if $(2),$(call _left,$(subst $(firstword $(2)),,$(1)),$(wordlist 2,$(words $(2)),$(2))),$(1))
$(if $(filter-out 1,$(words $(value SYSTEM)))$(filter-out $(SYSTEMS),$(value SYSTEM)),\
  $(error SYSTEM '$(value SYSTEM)' is not a system; the systems: $(SYSTEMS)))
$(if $(word 2,$(VAR))$(call _left,$(VAR),$(_PLAIN)),\
  $(error HPCBENCH_VAR '$(VAR)': a results directory's path has letters, digits and _ . / - + @ : ~ = only (no spaces or shell syntax); give the run another one))
# Absolute for the tools: ReFrame reads each site config from its own directory, where a
# relative one would be site-configs/var (hpcbench.core.paths.GIVEN_RELATIVE).
ifneq ($(value HPCBENCH_VAR),)
override HPCBENCH_VAR := $(abspath $(VAR))
export HPCBENCH_VAR
endif
_quoted = '$(subst ','\'',$(1))'
# ReFrame on the system: its command line where the acceptance takes its own
# (hpcbench.rfm.reframe_port.command_line).
REFRAME = $(shell $(BIN)/hpcbench reframe-command --system $(SYSTEM))
# Extra ReFrame options, e.g. make run RFM_OPTS='-n StreamCheck'. Recipes take its text as
# given, $(value RFM_OPTS): make would expand a regex's `$'` (as in -p 'openmpi$') to
# nothing and leave the shell an unbalanced quote.
RFM_OPTS ?=
# quick: HPL at 1/50 and HPCC at 1/100 of the memory (minutes); full: at 80 % of it (hours here),
# or as the paper sized it. The default is quick on this machine and the testbed, full on
# a paper's system (its paper's run: `make dry-run SYSTEM=t2k-tsukuba`).
# ReFrame execution modes (hpcbench.rfm.run_modes.MODES), given as their options so that the
# user's RFM_OPTS, after them, win (ReFrame's --mode would merge -p with its default);
# --ci-generate needs --mode itself, which it carries into every job.
MODE ?= $(shell $(BIN)/hpcbench default-mode --system $(SYSTEM))
MODE_NAME = $(or $(if $(filter 1,$(words $(MODE))),$(filter quick full,$(MODE))),\
  $(error MODE must be quick or full, not '$(MODE)'))
MODE_OPTS = $(shell $(BIN)/hpcbench mode-options $(MODE_NAME) --system $(SYSTEM))
# The system's own: one job at a time where its Slurm nodes share a host (the testbed).
EXEC_OPTS = $(shell $(BIN)/hpcbench exec-options --system $(SYSTEM))
# Slow-node screening: flag nodes this many percent below the median.
SCREEN_THRESHOLD ?= 5
$(if $(word 2,$(value SCREEN_THRESHOLD))$(call _left,$(value SCREEN_THRESHOLD),0 1 2 3 4 5 6 7 8 9 .),\
  $(error SCREEN_THRESHOLD '$(value SCREEN_THRESHOLD)' is not a number of percent (e.g. 5)))

# A shell function for a recipe whose shell runs a long tool among other commands: make
# passes a SIGTERM (and the terminal's Ctrl-C) on to the recipe's shell, which would die and
# leave the tool running with nobody to wait for it (ReFrame went on measuring and storing).
# `forwarding CMD...` runs CMD as the shell's child, passes TERM, INT and HUP on to it as
# TERM and HUP (ReFrame cancels its jobs on those; a background child ignores INT), waits
# until it has ended, and ends the recipe with the signal's status.
FORWARDING = forwarding() { \
	"$$@" & child=$$!; signalled=; \
	trap 'signalled=143; kill -TERM $$child 2>/dev/null' TERM; \
	trap 'signalled=130; kill -TERM $$child 2>/dev/null' INT; \
	trap 'signalled=129; kill -HUP $$child 2>/dev/null' HUP; \
	wait $$child; code=$$?; \
	while kill -0 $$child 2>/dev/null; do wait $$child; code=$$?; done; \
	trap - TERM INT HUP; \
	[ -z "$$signalled" ] || exit $$signalled; \
	return $$code; }

.PHONY: run report test docs lint venv bootstrap install setup spack baseline dry-run references tune screen new-system \
	accept watch contract-init \
	testbed-start testbed-stop buildcache bundle unpack-bundle ci-pipeline gitlab-ci-local test-clean-root clean

# Without a Spack (none found, none clonable), `setup` prepares the registry-only path
# and the run measures HPCC from Debian; the checks that need Spack say so and skip.
# On the testbed (SYSTEM=testbed) the Slurm cluster is started first; it keeps running.
# The session's provenance (project and Spack commits, spack.lock hash) goes into ReFrame's
# results database as session extras; the report is written whatever the checks' outcome.
# A ReFrame that stops before running (a bad option, a broken site config, another run in
# the same var/) stores no session: then nothing after it runs, and its error stands alone.
# A run whose session did not reach the results database (it stopped taking writes, the
# file system filled) fails there, saying why (hpcbench stored-run): nothing after it shows
# an older session as this run's; the summaries show this run's session by its UUID.
# No $(MAKE) in its recipe: make -n runs every recipe line that names it, so `make -n run`
# would run the benchmarks instead of printing what it would do.
# BUNDLE=<archive> (make bundle, on another machine): unpacked into the per-user cache first
# (unpack-bundle), so that a machine without internet makes the venv and installs the Spack
# stack from it.
run: $(VENV_STAMP) $(if $(filter testbed,$(SYSTEM)),testbed-start)
	$(BIN)/hpcbench setup --system $(SYSTEM)
	$(FORWARDING); before=$$(ls -t $(VAR)/reports/*.json 2>/dev/null | head -1); \
	forwarding $(REFRAME) $(EXEC_OPTS) $(MODE_OPTS) -r --performance-report \
	    --session-extras "$$($(BIN)/hpcbench provenance --system $(SYSTEM))" $(value RFM_OPTS); \
	status=$$?; \
	newest=$$(ls -t $(VAR)/reports/*.json 2>/dev/null | head -1); \
	if [ "$$newest" = "$$before" ]; then \
	    echo "make run: ReFrame stopped before running (exit $$status, see above): nothing" \
	         "was measured or stored" >&2; exit $$status; fi; \
	session=$$($(BIN)/hpcbench stored-run --system $(SYSTEM) --report "$$newest") || exit 1; \
	$(BIN)/hpcbench compare-stacks --system $(SYSTEM) --session "$$session"; \
	$(BIN)/hpcbench time-per-check --system $(SYSTEM) --session "$$session"; \
	echo "Results: perflogs in $(VAR)/perflogs/, ReFrame's results database" \
	     "$(VAR)/results.db, run reports in $(VAR)/reports/ (this run's: $$newest)," \
	     "logs in $(VAR)/logs/"; \
	$(REPORT) || status=1; \
	exit $$status

# HTML report + Markdown summary of the stored results (var/report/$(SYSTEM)/), opened in
# headless Chromium to check that every plot shows and every link leads somewhere.
# REPORT_OPTS: e.g. --session UUID --against UUID --threshold 10
REPORT_OPTS ?=
REPORT = $(BIN)/hpcbench report --system $(SYSTEM) --check $(REPORT_OPTS)
report: $(VENV_STAMP)
	$(REPORT)

# PYTEST_OPTS: more pytest options (the pipeline adds --junitxml). The documentation site
# is built first: a broken link in it fails the tests.
test: docs $(VENV_STAMP)
	$(BIN)/hpcbench setup --registry-only
	$(BIN)/python -m pytest $(PYTEST_OPTS)

# README's two commands (make test, then make run) in a clean Debian 12 root made with
# debootstrap, as on a fresh machine (as root; hpcbench.devtools.clean_root). CLEAN_ROOT_OPTS: e.g.
# --commit <sha>, --command 'make test', --timeout 1800.
CLEAN_ROOT_OPTS ?=
test-clean-root: $(VENV_STAMP)
	$(BIN)/python -m hpcbench.devtools.clean_root $(CLEAN_ROOT_OPTS)

# The documentation site (docs/, mkdocs.yml; Material theme) into site/, strictly: a link to
# a page or an anchor that does not exist, or a page left out of the nav, fails it. Material
# for MkDocs is maintained until 2027-05 (its banner says so on every build: silenced here).
docs: $(VENV_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Python errors (pyflakes) and reference files that do not load.
lint: $(VENV_STAMP)
	$(BIN)/pyflakes src reframe-checks site-configs tests
	$(BIN)/hpcbench references >/dev/null

venv: $(VENV_STAMP)

# HPL tuning sweep at 1/25 of the memory (T2K 4.4), then the table of the best values.
tune: $(VENV_STAMP)
	$(BIN)/hpcbench setup --system $(SYSTEM)
	$(REFRAME) $(EXEC_OPTS) -t '^sweep$$' -r $(value RFM_OPTS)
	$(BIN)/hpcbench hpl-tuning --system $(SYSTEM)

# Single-node HPL on every node of each partition (T2K 4.2), then the slow nodes. One rank
# sends no MPI message: each node is screened once, on the partition's first MPI stack. A
# node its controller says cannot run (down, drained...) skips, saying why
# (hpcbench.rfm.plugins.QuietNode); screen-nodes names it too.
screen: $(VENV_STAMP)
	$(BIN)/hpcbench setup --system $(SYSTEM)
	$(REFRAME) $(EXEC_OPTS) -t '^screen$$' --distribute=all -S HplNodeScreen.every_stack=false \
		-r $(value RFM_OPTS)
	$(BIN)/hpcbench screen-nodes --system $(SYSTEM) --threshold $(SCREEN_THRESHOLD)

# The system's acceptance against its contract (contracts/$(SYSTEM).yaml; hpcbench.acceptance):
# what the contract names and nothing else, node entries on every node in service in batches,
# node pairs paired and re-paired, into var/acceptance/$(SYSTEM)/ (run again: it resumes);
# then the verdicts (acceptance.html, verdicts.json, junit.xml, drain-list.sh) and a sha256
# manifest, signed where ACCEPT_OPTS='--key ~/.ssh/id_ed25519'. Exit 1 where the system fails
# its contract. ACCEPT_OPTS: e.g. --dry-run (every job written, nothing set up or run: a
# paper's system here), --output DIR, --batch-nodes 64; check one later with `hpcbench
# accept --verify DIR`.
ACCEPT_OPTS ?=
accept: $(VENV_STAMP) $(if $(filter testbed,$(SYSTEM)),testbed-start)
	$(if $(findstring --dry-run,$(value ACCEPT_OPTS)),,$(BIN)/hpcbench setup --system $(SYSTEM))
	$(FORWARDING); forwarding $(BIN)/hpcbench accept --system $(SYSTEM) $(value ACCEPT_OPTS)

# One cycle of the watch after the acceptance (hpcbench.acceptance.watch; docs/watch.md):
# the nodes due re-judged on the contract's watched entries (those with a `watch:` clause)
# against the contract, their own accepted figures in var/acceptance/$(SYSTEM) and their
# peers; the scontrol lines printed (WATCH_OPTS=--act runs them); a node the watch drained
# that the site marked repaired re-tested in a reservation; the cycle's record under
# var/watch/$(SYSTEM)/cycles/. Exit 1 where a node failed the cycle. WATCH_OPTS: e.g. --act
# --budget 100 --max-drain 0.05 --key KEY --pushgateway HOST:9091 --victoria-metrics URL
# --textfile-dir DIR; --history NODE shows a node's figures over the cycles.
WATCH_OPTS ?=
watch: $(VENV_STAMP) $(if $(filter testbed,$(SYSTEM)),testbed-start)
	$(BIN)/hpcbench setup --system $(SYSTEM)
	$(FORWARDING); forwarding $(BIN)/hpcbench watch $(SYSTEM) $(value WATCH_OPTS)

# A draft contract of $(SYSTEM) from what the suite knows (its paper's figures, or a stored
# session at 0.9 x its medians), every value with its source, for the site to edit.
# CONTRACT_OPTS: e.g. --checks HpccCheck --baseline UUID --factor 0.8 --force.
CONTRACT_OPTS ?=
contract-init: $(VENV_STAMP)
	$(BIN)/hpcbench contract init $(SYSTEM) $(value CONTRACT_OPTS)

# A site's own Slurm cluster, described from its controller on a login node (site-configs/
# NAME.yaml and .py, spack-envs/NAME, references/NAME.yaml, for review): make new-system
# NAME=mycluster NEW_SYSTEM_OPTS='--io-directory=/scratch/me/hpcbench'.
new-system: $(VENV_STAMP)
	$(BIN)/hpcbench new-system $(value NEW_SYSTEM_OPTS) -- $(call _quoted,$(value NAME))

# Fails fast, before anything is installed, when no Spack can be found or cloned.
spack:
	@PYTHONPATH=src $(PYTHON) -m hpcbench.stack.spack locate >/dev/null

bootstrap: spack $(VENV_STAMP)
	$(BIN)/hpcbench bootstrap

install: spack $(VENV_STAMP)
	$(BIN)/hpcbench install --system $(SYSTEM)

# One archive with all a machine without internet needs for $(SYSTEM)'s Spack stack
# (hpcbench.stack.bundle), in var/bundles/; there: make run BUNDLE=<archive>.
# BUNDLE_OPTS: e.g. --sources-only (no build cache), --output DIR.
BUNDLE_OPTS ?=
bundle: spack $(VENV_STAMP)
	$(BIN)/hpcbench setup --system $(SYSTEM)
	$(BIN)/hpcbench bundle --system $(SYSTEM) $(BUNDLE_OPTS)

# Push what spack-envs/$(SYSTEM) installed to the Spack build cache kept between pipelines.
buildcache: spack $(VENV_STAMP)
	$(BIN)/hpcbench buildcache --system $(SYSTEM)

# The Slurm testbed (ci/testbed/testbed; as root): start is a no-op when it runs.
# TESTBED_NODES: its CPU nodes (default 3), e.g. 32 for an acceptance at scale.
TESTBED_NODES ?=
$(if $(word 2,$(value TESTBED_NODES))$(call _left,$(value TESTBED_NODES),0 1 2 3 4 5 6 7 8 9),\
  $(error TESTBED_NODES '$(value TESTBED_NODES)' is not a number of nodes))
testbed-start: $(VENV_STAMP)
	ci/testbed/testbed start $(if $(TESTBED_NODES),--nodes $(TESTBED_NODES))
testbed-stop: $(VENV_STAMP)
	ci/testbed/testbed stop

# The GitLab child pipeline of every check on $(SYSTEM) (ReFrame's --ci-generate, one job
# per check, the mode carried into each), made runnable from the project.
ci-pipeline: $(VENV_STAMP)
	mkdir -p var/ci
	$(REFRAME) --mode=$(MODE_NAME) $(value RFM_OPTS) --ci-generate var/ci/reframe-pipeline.yml
	$(BIN)/hpcbench ci-pipeline var/ci/reframe-pipeline.yml var/ci/checks.yml

# Run .gitlab-ci.yml's jobs here with gitlab-ci-local's shell executor, after it has
# validated the file against GitLab's schema. PIPELINE_OPTS (not GCL_*, which gitlab-ci-local
# reads as its options): its options; default: the jobs a schedule runs, one at a time as on
# the runner. E.g. PIPELINE_OPTS='--job lint'.
PIPELINE_OPTS ?= --concurrency 1 --variable CI_PIPELINE_SOURCE=schedule
gitlab-ci-local: $(VENV_STAMP)
	$(BIN)/python -m hpcbench.devtools.gitlab_ci_local $(PIPELINE_OPTS)

# Record this machine's baseline (references/local.yaml) from the stored sessions of the
# last 30 days: each figure the median of its runs, bounded by their spread.
# BASELINE_OPTS: e.g. --last 5, --days 7, --session UUID, --margin 0.05
BASELINE_OPTS ?=
baseline: $(VENV_STAMP)
	$(BIN)/hpcbench baseline --system $(SYSTEM) $(BASELINE_OPTS)

dry-run: $(VENV_STAMP)
	$(REFRAME) $(MODE_OPTS) --dry-run $(value RFM_OPTS)

# Reference figures per system and benchmark (references/*.yaml).
references: $(VENV_STAMP)
	$(BIN)/hpcbench references

# With BUNDLE=, the bundle is unpacked (by python3 alone) before the venv is made, and the
# venv's packages come from its wheels with no index.
$(VENV_STAMP): requirements.txt pyproject.toml | $(if $(value BUNDLE),unpack-bundle)
	@if ! $(PYTHON) -m venv $(VENV) 2>/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q >/dev/null && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv >/dev/null && \
	    $(PYTHON) -m venv $(VENV); \
	  else echo "error: cannot create a venv; as root run: apt-get install python3-venv" >&2; \
	    exit 1; fi; fi
	$(BIN)/pip install -q --disable-pip-version-check $(if $(value BUNDLE),--no-index --find-links \
	    "$$(PYTHONPATH=src $(PYTHON) -m hpcbench.stack.bundle_unpack wheels)") -r requirements.txt -e .
	touch $@

# The offline bundle BUNDLE=<archive>, verified and unpacked into the per-user cache
# (hpcbench.stack.bundle_unpack; refused whole when damaged).
unpack-bundle:
	$(if $(value BUNDLE),,$(error unpack-bundle: give the archive, BUNDLE=<archive>))
	PYTHONPATH=src $(PYTHON) -m hpcbench.stack.bundle_unpack unpack $(call _quoted,$(value BUNDLE))

# Scratch only: stage directories, detected topologies, generated pipelines, the venv and the
# documentation site.
# Results (results.db, perflogs, reports, output, logs) are never deleted by a target, nor
# is a running testbed's state (var/testbed).
# A directory that is not the suite's (no .hpcbench-results in it, not the checkout's var/:
# hpcbench.core.paths.claim_var_dir) keeps its own stage/, topology/ and ci/: refused.
clean:
	@if [ -d $(VAR) ] && [ ! -f $(VAR)/.hpcbench-results ] && \
	    [ "$$(cd $(VAR) && pwd -P)" != "$$(cd var 2>/dev/null && pwd -P)" ]; then \
	  echo "make clean: $(VAR) is not the suite's results directory (no .hpcbench-results" \
	       "in it): nothing was removed" >&2; exit 1; fi
	rm -rf $(VAR)/stage $(VAR)/topology $(VAR)/ci $(VAR)/dry-run-report.json $(VENV) site
	@echo "make clean: kept the results in $(VAR)/ (results.db, perflogs, reports, output," \
	     "logs); remove them yourself if you mean to"
