"""`.keras` files written by an earlier layout of the package still load.

`tests/saved_models/` holds one tiny file of each saved type, written before
the modules moved into subpackages (`write_saved_models.py`). Each must load
with the current code, after a plain `import sbert_keras`, and give the
vectors it gave when it was written; in a fresh process too, with
`keras.saving.load_model` and nothing else touched, whichever of `keras`
and `sbert_keras` is imported first.
"""

import json
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

import sbert_keras
from conftest import large
from tests.harness import cli_env

HERE = pathlib.Path(__file__).resolve().parents[1] / "saved_models"
TEXTS = ["a man is playing guitar", "the dog runs in the park", "a red car"]
NAMES = sorted(path.name for path in HERE.glob("*.keras"))
# The vectors were written on an AVX-512 CPU; float32 sums in another order (AVX2 kernels) differ by up to 1.3e-5.
ATOL = 5e-5


def test_every_saved_type_is_present():
    assert len(NAMES) == 10


@pytest.mark.parametrize("name", NAMES)
def test_saved_file_loads_with_the_same_vectors(name):
    model = keras.saving.load_model(HERE / name)
    encoder = model if isinstance(model, sbert_keras.SentenceEncoder) else model.encoder
    assert isinstance(encoder, sbert_keras.SentenceEncoder)
    expected = np.load(HERE / "vectors.npz")[name]
    np.testing.assert_allclose(encoder.predict(np.array(TEXTS), verbose=0), expected, atol=ATOL)
    np.testing.assert_allclose(encoder.encode(TEXTS, compute="float32"), expected, atol=ATOL)


# Loads every saved file in a fresh process after the given imports only, and
# prints per file the loaded class and the largest difference to its vectors.
_FRESH_LOAD = """
import json, pathlib, sys
import numpy as np
{imports}
here = pathlib.Path(sys.argv[1])
expected = np.load(here / "vectors.npz")
texts = np.array(json.loads(sys.argv[2]))
report = {{}}
for path in sorted(here.glob("*.keras")):
    model = keras.saving.load_model(path)
    encoder = getattr(model, "encoder", model)
    delta = float(np.abs(encoder.predict(texts, verbose=0) - expected[path.name]).max())
    report[path.name] = [type(model).__name__, delta]
print(json.dumps(report))
"""
IMPORT_ORDERS = {
    "sbert_keras first": "import sbert_keras\nimport keras",
    "keras first": "import keras\nimport sbert_keras",
}


@pytest.fixture(scope="module")
def fresh_loads():
    """`{order: {file: [class name, max |Δ|]}}`, one fresh process per import order, run when first asked."""

    class Reports(dict):
        def __missing__(self, order):
            code = _FRESH_LOAD.format(imports=IMPORT_ORDERS[order])
            done = subprocess.run(
                [sys.executable, "-c", code, str(HERE), json.dumps(TEXTS)],
                capture_output=True,
                text=True,
                env=cli_env(),
                timeout=600,
            )
            assert done.returncode == 0, done.stderr[-3000:]
            self[order] = json.loads(done.stdout.strip().splitlines()[-1])
            return self[order]

    return Reports()


# A plain `import sbert_keras` first in every `make test`; Keras imported first in the large tier.
@pytest.mark.parametrize("order", [o if o == "sbert_keras first" else large(o) for o in sorted(IMPORT_ORDERS)])
@pytest.mark.parametrize("name", NAMES)
def test_load_model_in_a_fresh_process_after_a_plain_import(fresh_loads, order, name):
    class_name, delta = fresh_loads[order][name]
    assert class_name == type(keras.saving.load_model(HERE / name)).__name__
    assert delta <= ATOL
