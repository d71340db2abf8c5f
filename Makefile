# posvec: the two commands of the README.
#   make reproduce   set up from nothing and run the cpu reproduction (posvec reproduce --profile cpu)
#   make test        set up from nothing and run every test (what .ci/run calls)
PY      ?= python3.11
VENV    ?= .venv
BIN     := $(VENV)/bin
PROFILE ?= cpu
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1

.PHONY: setup reproduce test test-notebooks test-py clean-runs readme

$(BIN)/.posvec-installed: settings.ini setup.py
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[repro,dev]"
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

setup: $(BIN)/.posvec-installed

reproduce: setup
	$(BIN)/posvec reproduce --profile $(PROFILE)

test: setup test-notebooks test-py

test-notebooks: setup
	cd nbs && ../$(BIN)/nbdev_test --flags "slow" --n_workers 2

test-py: setup
	$(BIN)/python -m pytest -q tests

clean-runs:
	rm -rf runs figures/smoke

readme:
	$(BIN)/python tests/readme.py > README.md
