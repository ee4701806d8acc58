# make demo : create .venv if missing, install realify, run the built-in workloads
# make test : same bootstrap, then the test suite
VENV ?= .venv
PY := $(VENV)/bin/python
WHEELS := $(wildcard /opt/wheels)
PIP_FLAGS := $(if $(WHEELS),--find-links $(WHEELS),)
TORCH_PIN := torch==2.13.0

.PHONY: demo test test-all bench coverage clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q $(PIP_FLAGS) $(TORCH_PIN)
	$(PY) -m pip install -q $(PIP_FLAGS) -e '.[test,bench]' $(TORCH_PIN)
	touch $@

demo: $(VENV)/.installed
	$(PY) -m realify demo

test: $(VENV)/.installed
	$(PY) -m pytest -q -n 2 tests

test-all: $(VENV)/.installed
	$(PY) -m pytest -q -n 2 -m "not fuzz_long" tests

bench: $(VENV)/.installed
	$(PY) -m realify bench

coverage: $(VENV)/.installed
	$(PY) -m realify coverage

clean:
	rm -rf $(VENV) build *.egg-info
