# Two commands on a fresh machine:  make playbook   and   make test
# Both set up what they need first (idempotent; silent when there is nothing to do).  make help lists the rest.
PYTHON ?= python3
VENV   ?= .venv
MODE   ?= smoke
OUT    ?= playbook-output/$(MODE)
# make playbook PARAMS="WORKLOAD=sequential MAX_FILES=50" VIDEO_DIR=~/videos   (a value without spaces each)
PARAMS ?=
VIDEO_DIR ?=
# make setup SETUP_ARGS="--no-constraints"   (python -m playbook_utils.tools.setup_env --help lists them)
SETUP_ARGS ?=
# make setup DECORD=decord2   the maintained fork of decord instead of decord 0.6 (the other goes beside, for notebook 11)
DECORD ?=
PY     := $(VENV)/bin/python

.PHONY: help setup playbook test test-fast lint nightly clean
.DEFAULT_GOAL := help

help:  ## this list
	@echo "make TARGET [VARIABLE=value ...]"
	@awk 'BEGIN {FS = ":[^#]*## "} /^[a-z-]+:.*## / {printf "  %-9s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "Variables:"
	@echo "  MODE=smoke|full          playbook: small media and short runs, or the full measurements (default smoke)"
	@echo "  OUT=DIR                  playbook: output folder (default playbook-output/MODE; an earlier run moves to DIR/previous/)"
	@echo "  VIDEO_DIR=DIR            playbook: measure your own videos instead of the generated media"
	@echo "  PARAMS=\"KEY=VALUE ...\"   playbook: notebook parameters, e.g. PARAMS=\"WORKLOAD=sequential MAX_FILES=50\""
	@echo "  NIGHTLY_ARGS=\"...\"       nightly: options of python -m playbook_utils.tools.nightly (--help lists them)"
	@echo "  SETUP_ARGS=\"...\"         setup: options of python -m playbook_utils.tools.setup_env, e.g. --no-constraints"
	@echo "  TORCH_SPEC=SPEC          setup: the torch to install where none is importable, e.g. torch==2.13.0"
	@echo "  DECORD=decord2           setup: decord2, the maintained fork, instead of decord 0.6"
	@echo "  PYTHON=python3 VENV=.venv  the interpreter that makes the virtual environment, and where it goes"

$(PY):
	$(PYTHON) -m venv --system-site-packages $(VENV)

# --system-site-packages keeps a torch the machine already has (e.g. the NGC container's).
setup: $(PY)  ## create .venv and install what is missing (silent when nothing is)
	@$(PY) -m playbook_utils.tools.setup_env $(SETUP_ARGS) $(if $(DECORD),--decord $(DECORD))

playbook: setup  ## run every notebook headlessly into OUT, with summary.md
	$(PY) -m playbook_utils.tools.run_notebooks --mode $(MODE) --output $(OUT) \
		$(if $(VIDEO_DIR),--video-dir $(VIDEO_DIR)) $(foreach p,$(PARAMS),--param $(p))

test: setup  ## the unit tests and every notebook in smoke mode
	$(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder  # the notebooks' file first: it takes half the time

test-fast: setup  ## the unit tests that need no video (under a minute)
	$(PY) -m pytest tests/unit -m "not media and not slow and not gpu and not notebook"

lint: setup  ## ruff check and ruff format --check (the version the test extra pins); names in the notebooks
	$(PY) -m ruff check playbook_utils modules tests benchmarks
	$(PY) -m ruff check --select F notebooks  # undefined or unused names, also in branches CI never runs (the GPU's)
	$(PY) -m ruff format --check playbook_utils modules tests benchmarks

# Nightly validation: every notebook in full mode into nightly/<date>/, then compared with this GPU's reference
# (results/<gpu>/, e.g. results/h100; the newest GPU reference where this machine has none)
# (exit 0 passed, 1 a notebook failed, 2 a regression, 3 a usage error; see docker/README.md). make turns
# every failure into its own status 2: a scheduler that acts on the code calls the module directly.
# e.g. make nightly NIGHTLY_ARGS="--device cuda"   or   NIGHTLY_ARGS="--compare-only nightly/2026-12-01"
NIGHTLY_ARGS ?=
nightly: setup  ## every notebook in full mode, compared with this GPU's reference (report.md)
	$(PY) -m playbook_utils.tools.nightly $(NIGHTLY_ARGS)

clean:  ## remove .venv, playbook-output and the pytest cache
	rm -rf $(VENV) playbook-output .pytest_cache
