# make demo       : create .venv if missing, install realify (and torch) alone, run the built-in workloads
# make test       : the same venv with the test extras, then the test suite
# make test-quick : a representative subset of the suite, at most 5 minutes on 2 cores
# make lint       : the same venv with the linters, then ruff and mypy
# make docs       : the same venv with the documentation toolchain, then the gallery's scripts and
#                   the documentation site (site/)
# make artifact   : build the sdist and the wheel, check their metadata, install the wheel into a
#                   fresh venv under /tmp and run README's quickstart there, then each extra's check
#
# Each target installs the extras it needs into the one venv, on demand (EXTRAS_<target> below):
# `make demo` on a fresh clone gets torch and realify only, `make test` adds what the suite imports.
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

.PHONY: install demo test test-quick test-all test-compat lint docs artifact compat-table bench coverage clean
# one pip at a time in the venv (the stamps below install into the same one)
.NOTPARALLEL:

# The extras each target installs (pip install -e '.[<extras>]'); none for the demo, which runs
# realify's own workloads on torch alone. The default release's test venv also gets the
# third-party models the benchmarks and their tests run (the "models" extra); the
# compatibility runs do without. lint's extra has mypy, the export extra's packages it reads
# (realify.onnx), and the artifact check's build and twine.
comma := ,
DEFAULT_PIN := $(filter $(DEFAULT_TORCH),$(TORCH))
EXTRAS_demo :=
EXTRAS_test := test$(if $(DEFAULT_PIN),$(comma)models)
EXTRAS_quick := test
EXTRAS_lint := lint
EXTRAS_docs := docs
EXTRAS_bench := bench,models
EXTRAS_coverage := coverage
# A stamp per target kind, $(VENV)/.installed-torch-<release>-<kind>: made when that kind's
# install last ran, remade (the install again) when pyproject.toml is newer, so a target whose
# extras changed or never were installed installs them; installing is idempotent, so kinds that
# share extras cost a quick pip run. Stamps of another torch release in the same venv are
# removed: its install replaced that release.
STAMP = $(VENV)/.installed-torch-$(TORCH)-$(1)
.PRECIOUS: $(VENV)/.installed-torch-$(TORCH)-%

$(VENV)/.installed-torch-$(TORCH)-%: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	find $(VENV) -maxdepth 1 -name '.installed-torch-*' ! -name '.installed-torch-$(TORCH)-*' -delete
	$(PIP) install -q $(PIP_FLAGS) torch==$(TORCH)
	$(PIP) install -q $(PIP_FLAGS) -e '.$(if $(EXTRAS_$*),[$(EXTRAS_$*)])' torch==$(TORCH)
	touch $@

# the whole development set: the suite's extras, and on the default pin the linters and the docs'
install: $(call STAMP,test) $(if $(DEFAULT_PIN),$(call STAMP,lint) $(call STAMP,docs))

demo: $(call STAMP,demo)
	$(PY) -m realify demo

# REPORT=<file.json>: outcomes per front end, for README's compatibility table
test: $(call STAMP,test)
	REALIFY_FRONT_END_REPORT=$(REPORT) $(PY) -m pytest -q -n 2 $(DURATIONS) tests

# A representative subset of the suite, at most 5 minutes on 2 cores (docs/testing.md): the
# engine's core and the eager ComplexTensor, the compile backend (Inductor, autograd, mutation,
# layouts), export and ONNX Runtime, the errors, packaging, the command line, the API
# reference's docstrings and examples, and the differential fuzzer with a tenth of its programs. Left to make test: the slowest cases of those
# files (QUICK_SKIP: the recurrent layers' export, ONNX Runtime's special values, Inductor's
# on-disk caches and options, the table of writes to inputs of every layout) and the demo and
# third-party-model runs of the command line. make test runs everything here and more.
QUICK_TESTS := tests/test_core.py tests/test_backend.py tests/test_export.py tests/test_errors.py \
	tests/test_packaging.py tests/test_cli.py tests/test_docstrings.py tests/test_fuzz.py
QUICK_SKIP := real_recurrent_layers or onnx_special_values or second_compile_of_the_same_graph or \
	torch_compile_mode_and_options or writes_to_inputs_of_every_layout or demo_runs_every_example or \
	third_party_models or burgers
QUICK_ENV := REALIFY_FUZZ_EXAMPLES=20 REALIFY_FUZZ_INDUCTOR_EXAMPLES=2
test-quick: $(call STAMP,quick)
	$(QUICK_ENV) $(PY) -m pytest -q -n 2 $(DURATIONS) -k "not ($(QUICK_SKIP))" $(QUICK_TESTS)

# ruff (pyproject's [tool.ruff]) on the package, the tests, the gallery and the docs tools; mypy on
# the public front ends
lint: $(call STAMP,lint)
	$(PY) -m ruff check realify tests examples docs/_tools
	$(PY) -m mypy

# the gallery's scripts run first and make its pages (docs/_tools/gallery.py); then a strict
# build: a broken link or anchor, a page outside the navigation or an API entry naming a
# missing object fails. NO_MKDOCS_2_WARNING: the theme's notice about its own future, not
# about these docs.
docs: $(call STAMP,docs)
	$(PY) docs/_tools/gallery.py
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet

# the sdist and the wheel, built and checked (.ci/check_artifact.py: twine check --strict, the
# license and version metadata), the wheel installed into a fresh venv with torch==$(TORCH) only
# and README's quickstart run there, then the export, coverage and bench extras, each on its
# own. torch's files are linked from $(VENV) (the same pin) instead of downloaded again.
artifact: $(call STAMP,lint)
	$(PY) .ci/check_artifact.py --torch $(TORCH) --torch-from $(VENV) $(addprefix --find-links ,$(WHEELS))

test-all: $(call STAMP,test)
	$(PY) -m pytest -q -n 2 -m "not fuzz_long" tests

test-compat: $(call STAMP,test)
	REALIFY_FRONT_END_REPORT=$(REPORT) $(COMPAT_ENV) $(PY) -m pytest -q -n 2 $(DURATIONS) tests

# README's compatibility table from the front-end reports of a CI run (.ci/run writes them)
compat-table:
	python3 .ci/compat_table.py --write README.md $(OUT)/front-ends-torch-*.json

bench: $(call STAMP,bench)
	$(PY) -m realify bench

coverage: $(call STAMP,coverage)
	$(PY) -m realify coverage --readme README.md

clean:
	rm -rf .venv .venv-torch-* build dist *.egg-info site docs/gallery

print-other-torch:
	@echo $(filter-out $(DEFAULT_TORCH) $(CI_PENDING_TORCH),$(SUPPORTED_TORCH))

print-pending-torch:
	@echo $(CI_PENDING_TORCH)
