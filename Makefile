# joulehouse: `make demo` runs the whole loop on the embedded default, `make test` runs the tests
# (all of them: CI runs it), `make test-fast` the unit and property tests (about a minute).
# Both create .venv and install the project first (idempotent).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)
APT_PACKAGES := prometheus openipmi ipmitool libopenipmi-dev chromium gcc
DEMO_ARGS ?=

.PHONY: demo test test-fast bench system-packages venv clean

# PYTHONWARNINGS: setuptools warns at every editable install of a package-dir layout that a folder
# named like the package may shadow it; ours is the package (joulehouse/), so the warning says nothing.
$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	PYTHONWARNINGS='ignore:Editable installation' $(PY) -m pip install --quiet -c constraints.txt -e '.[test]'
	rm -f $(VENV)/.installed-*; touch $(STAMP)

venv: $(STAMP)

# The tests start real servers (Prometheus, an OpenIPMI BMC, headless Chromium): install them
# when missing. Needs root (CI and the dev machines run as root); says so otherwise.
system-packages:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "missing system packages:$$missing (run: sudo apt-get install$$missing)"; exit 1; fi; \
	  echo "installing system packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

demo: $(STAMP)
	$(VENV)/bin/joulehouse demo $(DEMO_ARGS)

test: $(STAMP) system-packages
	$(PY) -m pytest -q

# The edit-test loop, about a minute: no real servers, no full DAG runs, no simulated fleets (markers
# in pyproject.toml); property tests that build a warehouse per example draw a quarter (tests/lanes.py).
test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow and not integration"

bench: $(STAMP) system-packages
	$(PY) -m bench

clean:
	rm -rf var .pytest_cache .hypothesis
