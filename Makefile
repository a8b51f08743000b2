# The two set-up commands of the README. Each installs what it needs on a fresh machine:
# a virtualenv, PyTorch (CPU build) before anything that depends on it, the package, KaTeX
# (from npm, served by the platform itself) and, for the tests, Debian's Chromium.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: demo test test-heavy gpu-suite serve install assets chromium asymptote lock

demo: install assets
	$(VENV)/bin/stepwise demo --host $(HOST) --port $(PORT)

# Two processes, a test file to each in turn (its module fixtures made once); the slowest
# tests are listed at the end, to see where the time goes.
TEST_WORKERS ?= 2
test: install assets chromium
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=25

test-heavy: install assets chromium
	$(PY) -m pytest -m heavy

# On a machine with a GPU: the 100M PRM, throughput with a 0.5B backbone and the paper-protocol
# experiment, each against its goal (bench/gpu_suite.py), sized for one 10-minute device call.
# Where PyPI is reachable, torch==2.13.0 below is its CUDA build.
gpu-suite: install
	$(PY) bench/gpu_suite.py

install: $(VENV)/.installed

# torch first, pinned: the machine carries a local CPU wheel for 2.13.0; letting pip resolve
# "torch" through transformers would pull gigabytes of CUDA packages instead.
$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev,hf,track]'
	touch $@

# Pins every dependency but torch (pinned above, and by the Dockerfile for its CPU or CUDA index)
# to what a fresh install resolves today: run it to upgrade them, then `make test`. Constraints,
# not requirements: the image, which installs no extras, takes only the pins it needs. torch's
# own dependencies (sympy, networkx, ...) are pinned as its CPU build resolved them; its CUDA
# build of the same release asks for the same ones.
LOCK_VENV := /tmp/stepwise-lock-$(shell id -u)
lock:
	rm -rf $(LOCK_VENV) && $(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LOCK_VENV)/bin/python -m pip install --quiet torch==2.13.0
	$(LOCK_VENV)/bin/python -m pip install --quiet '.[dev,hf,track]'
	{ echo "# Every dependency of Stepwise and its extras but torch, as 'make lock' resolved them on"; \
	  echo "# Python $$($(LOCK_VENV)/bin/python -c 'import platform; print(platform.python_version())'). Installed with pip's -c (Makefile, Dockerfile)."; \
	  $(LOCK_VENV)/bin/python -m pip freeze --exclude torch --exclude stepwise; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	rm -rf $(LOCK_VENV) build

assets: install
	$(PY) -m labeler_ui.vendor_assets

# apt waits for no lock but dpkg's: while another apt holds the package lists (a second install,
# unattended upgrades) it fails at once, so it is tried again a few times.
chromium:
	@command -v chromium >/dev/null 2>&1 || for try in 1 2 3 4 5 6; do \
	  { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq -o DPkg::Lock::Timeout=300 chromium; } && break; \
	  [ $$try = 6 ] && exit 1; echo "apt is busy; trying again in 20 s" >&2; sleep 20; done

# Optional: draws the [asy] figures of MATH problems (about 750 MB with the TeX it runs); without it
# the pages show each figure's source, collapsed.
asymptote:
	@command -v asy >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq asymptote; }
