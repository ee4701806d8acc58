# make demo : create .venv if missing, install realify, run the built-in workloads
# make test : same bootstrap, then the test suite
# make docs : same bootstrap, then the gallery's scripts and the documentation site (site/)
#
# The default torch is the newest release realify supports (what `pip install realify` gets);
# every other supported release has a venv of its own and a compatibility run:
#   make test-compat TORCH=2.13.0     (.venv-torch-2.13.0)
# The supported range is pyproject.toml's; SUPPORTED_TORCH lists the release tested for each
# minor version (the CI runs them all: .ci/run).
DEFAULT_TORCH := 2.15.0
SUPPORTED_TORCH := 2.13.0 2.14.1 2.15.0
# supported releases whose compatibility run does not pass yet: left out of .ci/run until it
# does (make test-compat TORCH=<release> runs it)
CI_PENDING_TORCH :=
TORCH ?= $(DEFAULT_TORCH)
VENV ?= $(if $(filter $(DEFAULT_TORCH),$(TORCH)),.venv,.venv-torch-$(TORCH))
PY := $(VENV)/bin/python
# torch's CPU build, where the machine keeps one on disk (pip prefers 2.13.0+cpu to 2.13.0)
WHEELS := $(wildcard /opt/wheels)
PIP_FLAGS := $(if $(WHEELS),--find-links $(WHEELS),)
# A machine-wide pip constraint file may cap torch below the release asked for here; the venv
# takes exactly the pinned release instead (an empty constraint set).
PIP := PIP_CONSTRAINT=/dev/null $(PY) -m pip
# compatibility run: the OpInfo table's first sample per op and the modules that run every
# front end and Inductor integration on small programs (tests/conftest.py, COMPAT_RUN_MODULES;
# every sixth parametrization of their tables, the OpInfo ops in every second front end), the bounded fuzzer with a quarter of its programs (what differs between releases is tracing
# and Inductor, which the first programs already reach)
COMPAT_ENV := REALIFY_COMPAT_RUN=1 REALIFY_FUZZ_EXAMPLES=50 REALIFY_FUZZ_INDUCTOR_EXAMPLES=4
# the slowest tests, printed by every run: where the CI's time goes
DURATIONS := --durations=15
OUT ?= out

.PHONY: install demo test test-all test-compat lint docs compat-table bench coverage clean

# the default release's venv also gets the third-party models the benchmarks and their tests
# run (the "models" extra) and the documentation toolchain (the "docs" extra); the
# compatibility runs use neither
comma := ,
EXTRAS := $(if $(filter $(DEFAULT_TORCH),$(TORCH)),test$(comma)bench$(comma)models$(comma)lint$(comma)docs,test$(comma)bench)

$(VENV)/.installed-torch-$(TORCH): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q $(PIP_FLAGS) torch==$(TORCH)
	$(PIP) install -q $(PIP_FLAGS) -e '.[$(EXTRAS)]' torch==$(TORCH)
	rm -f $(VENV)/.installed-torch-*
	touch $@

install: $(VENV)/.installed-torch-$(TORCH)

demo: $(VENV)/.installed-torch-$(TORCH)
	$(PY) -m realify demo

# REPORT=<file.json>: outcomes per front end, for README's compatibility table
test: $(VENV)/.installed-torch-$(TORCH)
	REALIFY_FRONT_END_REPORT=$(REPORT) $(PY) -m pytest -q -n 2 $(DURATIONS) tests

# ruff (pyproject's [tool.ruff]) on the package, the tests, the gallery and the docs tools; mypy on
# the public front ends
lint: $(VENV)/.installed-torch-$(TORCH)
	$(PY) -m ruff check realify tests examples docs/_tools
	$(PY) -m mypy

# the gallery's scripts run first and make its pages (docs/_tools/gallery.py); then a strict
# build: a broken link or anchor, a page outside the navigation or an API entry naming a
# missing object fails. NO_MKDOCS_2_WARNING: the theme's notice about its own future, not
# about these docs.
docs: $(VENV)/.installed-torch-$(TORCH)
	$(PY) docs/_tools/gallery.py
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet

test-all: $(VENV)/.installed-torch-$(TORCH)
	$(PY) -m pytest -q -n 2 -m "not fuzz_long" tests

test-compat: $(VENV)/.installed-torch-$(TORCH)
	REALIFY_FRONT_END_REPORT=$(REPORT) $(COMPAT_ENV) $(PY) -m pytest -q -n 2 $(DURATIONS) tests

# README's compatibility table from the front-end reports of a CI run (.ci/run writes them)
compat-table:
	python3 .ci/compat_table.py --write README.md $(OUT)/front-ends-torch-*.json

bench: $(VENV)/.installed-torch-$(TORCH)
	$(PY) -m realify bench

coverage: $(VENV)/.installed-torch-$(TORCH)
	$(PY) -m realify coverage --readme README.md

clean:
	rm -rf .venv .venv-torch-* build *.egg-info site docs/gallery

print-other-torch:
	@echo $(filter-out $(DEFAULT_TORCH) $(CI_PENDING_TORCH),$(SUPPORTED_TORCH))

print-pending-torch:
	@echo $(CI_PENDING_TORCH)
