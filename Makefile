# Two commands on a fresh machine:  make playbook   and   make test
# Both set up what they need first (idempotent; silent when there is nothing to do).
PYTHON ?= python3
VENV   ?= .venv
MODE   ?= smoke
OUT    ?= playbook-output/$(MODE)
PY     := $(VENV)/bin/python

.PHONY: setup playbook test clean

$(PY):
	$(PYTHON) -m venv --system-site-packages $(VENV)

# --system-site-packages keeps a torch the machine already has (e.g. the NGC container's).
setup: $(PY)
	@$(PY) -m playbook_utils.setup_env

playbook: setup
	$(PY) -m playbook_utils.run_notebooks --mode $(MODE) --output $(OUT)

test: setup
	$(PY) -m pytest

clean:
	rm -rf $(VENV) playbook-output .pytest_cache
