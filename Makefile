# Two commands on a fresh machine:  make playbook   and   make test
# Both set up what they need first (idempotent; silent when there is nothing to do).
PYTHON ?= python3
VENV   ?= .venv
MODE   ?= smoke
OUT    ?= playbook-output/$(MODE)
# make playbook PARAMS="WORKLOAD=sequential MAX_FILES=50" VIDEO_DIR=~/videos   (a value without spaces each)
PARAMS ?=
VIDEO_DIR ?=
PY     := $(VENV)/bin/python

.PHONY: setup playbook test nightly clean

$(PY):
	$(PYTHON) -m venv --system-site-packages $(VENV)

# --system-site-packages keeps a torch the machine already has (e.g. the NGC container's).
setup: $(PY)
	@$(PY) -m playbook_utils.setup_env

playbook: setup
	$(PY) -m playbook_utils.run_notebooks --mode $(MODE) --output $(OUT) \
		$(if $(VIDEO_DIR),--video-dir $(VIDEO_DIR)) $(foreach p,$(PARAMS),--param $(p))

test: setup
	$(PY) -m pytest

# Nightly validation: every notebook in full mode into nightly/<date>/, then compared with results/h200/
# (exit 0 passed, 1 a notebook failed, 2 a regression, 3 a usage error; see docker/README.md). make turns
# every failure into its own status 2: a scheduler that acts on the code calls the module directly.
# e.g. make nightly NIGHTLY_ARGS="--device cuda"   or   NIGHTLY_ARGS="--compare-only nightly/2026-12-01"
NIGHTLY_ARGS ?=
nightly: setup
	$(PY) -m playbook_utils.nightly $(NIGHTLY_ARGS)

clean:
	rm -rf $(VENV) playbook-output .pytest_cache
