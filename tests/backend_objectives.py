"""Trains every objective for 3 steps on token ids under the process's Keras backend; writes the numbers to .npz.

Run once per backend (the backend is per process), TensorFlow first:
`KERAS_BACKEND=jax python tests/backend_objectives.py OUT.npz WEIGHTS_DIR [objective ...]`. Every model
is built from the same tiny RoBERTa encoder (hidden size 8, no dropout), and the regression objective from each
family fixture that `make fixtures` generated (MPNet, DistilBERT with its Dense head, XLM-R; dropout off); the
first run saves each model's weights to `WEIGHTS_DIR/<objective>.weights.h5` and later runs load them, so every
backend starts from the same numbers and `tests/training/test_train_steps.py` compares the per-step losses and the
final vectors.
"""

import os
import pathlib
import sys

import keras
import keras_hub
import numpy as np

from sbert_keras.compat.keras import flatten_layers
from sbert_keras.encoder import SentenceEncoder
from sbert_keras.losses.distillation import MSEDistillationLoss
from sbert_keras.losses.in_batch import SymmetricInBatchNegativesLoss
from sbert_keras.losses.pair_scores import AnglELoss
from sbert_keras.losses.pair_scores import CoSENTLoss
from sbert_keras.losses.pair_scores import OnlineContrastiveLoss
from sbert_keras.training import siamese
from sbert_keras.training.cached_siamese import CachedContrastiveSiamese
from sbert_keras.training.fit_checks import NonFiniteLossError
from sbert_keras.training.schedules import paper_optimizer
from sbert_keras.training.single_text_models import BatchHardTripletModel
from sbert_keras.training.single_text_models import DistillationModel
from sbert_keras.training.step_log import StepLog
from sbert_keras.training.step_log import read_rows

VOCABULARY, LENGTH, BATCH, STEPS = 40, 7, 6, 3
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
FAMILIES = ("mpnet", "distilbert-dense", "xlm-roberta")
ROWS = BATCH * STEPS


def token_ids(seed, rows=ROWS):
    """`(token_ids, padding_mask)`: int32 `(rows, LENGTH)`, 3 to 7 real tokens per row, padded with id 1."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, VOCABULARY, size=(rows, LENGTH)).astype("int32")
    lengths = rng.integers(3, LENGTH + 1, size=rows)
    mask = (np.arange(LENGTH)[None, :] < lengths[:, None]).astype("int32")
    return np.where(mask == 1, ids, 1).astype("int32"), mask


def features(*roles, seed=0):
    """`{f"{role}_token_ids", f"{role}_padding_mask"}` for each role, as `SiamesePreprocessor` passes them on."""
    out = {}
    for i, role in enumerate(roles):
        ids, mask = token_ids(seed + i)
        out.update({f"{role}_token_ids": ids, f"{role}_padding_mask": mask})
    return out


def encoder(weights_dir=None):
    """The tiny RoBERTa encoder; with `weights_dir`, its weights saved there once and loaded after."""
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.RobertaBackbone(
        vocabulary_size=VOCABULARY,
        num_layers=2,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=LENGTH + 2,
        dropout=0.0,
    )
    model = SentenceEncoder(backbone, None, pooling="mean")
    path = weights_dir and os.path.join(weights_dir, "encoder.weights.h5")
    if path and os.path.exists(path):
        model.load_weights(path)
    elif path:
        model.save_weights(path)
    return model


def family_encoder(family):
    """A family fixture's encoder (`tests/fixtures/<family>/model`), dropout off: every backend draws its own."""
    encoder = SentenceEncoder.from_preset(FIXTURES / family / "model", sequence_length=LENGTH + 2)
    for layer in flatten_layers(encoder):
        if isinstance(layer, keras.layers.Dropout):
            layer.rate = 0.0
    return encoder


LABELS = np.random.default_rng(9)
SCORES = LABELS.uniform(-0.9, 0.9, ROWS).astype("float32")
BINARY = (np.arange(ROWS) % 2).astype("float32")
CLASSES = (np.arange(ROWS) % 3).astype("int32")
GROUPS = (np.arange(ROWS) % 2).astype("int32")
TEACHER = LABELS.normal(size=(ROWS, 8)).astype("float32")
# Tracing and XLA compiles cost more than these tiny steps (the graphs are tested elsewhere).
JIT = os.environ.get("SBERT_KERAS_TEST_JIT", "0") == "1"
EAGER = keras.backend.backend() == "tensorflow" and not JIT
PAIR, TRIPLE = ("sentence_a", "sentence_b"), ("anchor", "positive", "negative")


def objectives():
    """`{name: (build(encoder) -> compiled model, x, y)}`: every objective, with SGD unless named otherwise."""
    sgd = lambda: keras.optimizers.SGD(0.1)  # noqa: E731

    def compiled(model, loss="auto", optimizer=None):
        model.compile(optimizer=optimizer or sgd(), loss=loss, jit_compile=JIT, run_eagerly=EAGER)
        return model

    def dense(encoder):
        # TensorFlow hands Adam the token embedding's gradient as `IndexedSlices`, and Keras' Adam squares each
        # occurrence's row before summing them; JAX and PyTorch give it dense. Frozen, every gradient is dense.
        encoder.backbone.token_embedding.trainable = False
        return encoder

    pair = (features(*PAIR), SCORES)

    def adamw():
        optimizer = paper_optimizer(STEPS, learning_rate=1e-2)
        # Adam divides by sqrt(v) + epsilon: with a large epsilon float round-off on the near-zero gradients
        # (an attention key bias, which the softmax ignores) is not magnified into whole steps.
        optimizer.epsilon = 1.0
        return optimizer

    # The regression objective on each family fixture that `make fixtures` generated (the encoder passed in is not
    # used); `tests/training/test_train_steps.py` skips a missing one by name.
    families = {
        f"regression_{family}": (
            lambda _, family=family: compiled(siamese.RegressionSiamese(family_encoder(family))),
            features(*PAIR),
            SCORES,
        )
        for family in FAMILIES
        if (FIXTURES / family / "meta.json").is_file()
    }
    return families | {
        "regression": (lambda e: compiled(siamese.RegressionSiamese(e)), features(*PAIR), SCORES),
        "regression_adamw": (lambda e: compiled(siamese.RegressionSiamese(dense(e)), optimizer=adamw()), *pair),
        "cosent": (lambda e: compiled(siamese.RegressionSiamese(e), CoSENTLoss()), features(*PAIR), SCORES),
        "angle": (
            lambda e: compiled(siamese.RegressionSiamese(e, pair_output="embeddings"), AnglELoss()),
            features(*PAIR),
            SCORES,
        ),
        "online_contrastive": (
            lambda e: compiled(siamese.RegressionSiamese(e), OnlineContrastiveLoss()),
            features(*PAIR),
            BINARY,
        ),
        "triplet": (lambda e: compiled(siamese.TripletSiamese(e)), features(*TRIPLE), None),
        "classification": (
            lambda e: compiled(siamese.ClassificationSiamese(e, num_classes=3)),
            features(*PAIR),
            CLASSES,
        ),
        "in_batch": (lambda e: compiled(siamese.ContrastiveSiamese(e)), features("anchor", "positive"), None),
        "in_batch_hard": (
            lambda e: compiled(siamese.ContrastiveSiamese(e, hard_negatives=True)),
            features(*TRIPLE),
            None,
        ),
        "symmetric": (
            lambda e: compiled(siamese.ContrastiveSiamese(e), SymmetricInBatchNegativesLoss()),
            features("anchor", "positive"),
            None,
        ),
        "matryoshka": (
            lambda e: compiled(siamese.ContrastiveSiamese(e, matryoshka_dims=(8, 4))),
            features("anchor", "positive"),
            None,
        ),
        "batch_hard_triplet": (lambda e: compiled(BatchHardTripletModel(e)), features("sentence"), GROUPS),
        "distillation": (
            lambda e: compiled(DistillationModel(e), MSEDistillationLoss()),
            features("sentence"),
            TEACHER,
        ),
        "cached_in_batch": (
            lambda e: compiled(CachedContrastiveSiamese(e, mini_batch_size=4)),
            features("anchor", "positive"),
            None,
        ),
        "cached_symmetric_hard": (
            lambda e: compiled(CachedContrastiveSiamese(e, mini_batch_size=4, symmetric=True, hard_negatives=True)),
            features(*TRIPLE),
            None,
        ),
    }


CHECKED_INFERENCE = ("regression", "triplet", "classification", "in_batch", "batch_hard_triplet")


class StepLosses(keras.callbacks.Callback):
    """Each step's own loss (`CheckedTraining.last_step_loss`)."""

    def __init__(self):
        super().__init__()
        self.losses = []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(self.model.last_step_loss))


def run(name, build, x, y, weights_dir, out):
    model = build(encoder())
    path = os.path.join(weights_dir, f"{name}.weights.h5")
    if os.path.exists(path):
        model.load_weights(path)
    else:
        model.save_weights(path)
    steps = StepLosses()
    log = os.path.join(weights_dir, f"{name}.{keras.backend.backend()}.csv")
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=[steps, StepLog(log)])
    logged = [float(row["loss"]) for row in read_rows(log)]
    assert np.allclose(logged, steps.losses, rtol=1e-6), (logged, steps.losses)
    first = sorted({k.rsplit("_token_ids", 1)[0] for k in x if k.endswith("_token_ids")})[0]
    probe = {name: x[f"{first}_{name}"] for name in ("token_ids", "padding_mask")}
    out[f"{name}/losses"] = np.asarray(steps.losses, "float64")
    out[f"{name}/vectors"] = ops_numpy(model.encoder(probe))
    if name in CHECKED_INFERENCE:
        out[f"{name}/predict"] = np.asarray(model.predict(x, batch_size=BATCH, verbose=0), "float32")
        out[f"{name}/evaluate"] = np.float64(model.evaluate(x, y, batch_size=BATCH, verbose=0))


def ops_numpy(value):
    return np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(value, "float32")))


def refused_step(weights_dir, out):
    """A learning rate that makes the second step's loss NaN: `fit` raises, the weights stay the first step's."""
    model = siamese.RegressionSiamese(encoder(weights_dir))
    model.compile(optimizer=keras.optimizers.SGD(1e30), jit_compile=JIT)
    before = [v.numpy().copy() for v in model.trainable_variables]
    try:
        model.fit(features(*PAIR), SCORES, batch_size=BATCH, shuffle=False, verbose=0)
        out["refused/message"] = np.array("")
    except NonFiniteLossError as error:
        out["refused/message"] = np.array(str(error))
    after = [v.numpy() for v in model.trainable_variables]
    out["refused/finite"] = np.bool_(all(np.all(np.isfinite(v)) for v in after))
    out["refused/moved"] = np.bool_(any(not np.array_equal(a, b) for a, b in zip(before, after, strict=True)))


def bfloat16_dtypes(weights_dir, out):
    """Under `mixed_bfloat16`: the dtypes of each loss and output, and one step's finite loss."""
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        table = objectives()
        for name in ("regression", "cosent", "triplet", "classification", "in_batch", "matryoshka", "distillation"):
            build, x, y = table[name]
            model = build(encoder(weights_dir))
            batch = {k: v[:BATCH] for k, v in x.items()}
            labels = None if y is None else y[:BATCH]
            y_pred = model(batch)
            loss = model.compute_loss(x=batch, y=labels, y_pred=y_pred)
            out[f"bfloat16/{name}/dtypes"] = np.array(
                [keras.backend.standardize_dtype(t.dtype) for t in (loss, y_pred)]
            )
            steps = StepLosses()
            model.fit(batch, labels, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=[steps])
            out[f"bfloat16/{name}/losses"] = np.asarray(steps.losses)
    finally:
        keras.config.set_dtype_policy("float32")


def main(argv):
    bfloat16 = "--mixed-bfloat16" in argv
    out_path, weights_dir, *names = [a for a in argv if a != "--mixed-bfloat16"]
    table = objectives()
    out = {}
    for name in names or table:
        run(name, *table[name], weights_dir, out)
    if keras.backend.backend() != "tensorflow":
        refused_step(weights_dir, out)
    if bfloat16:
        bfloat16_dtypes(weights_dir, out)
    ids, mask = token_ids(42, rows=5)
    out["encode/vectors"] = ops_numpy(encoder(weights_dir).predict({"token_ids": ids, "padding_mask": mask}, verbose=0))
    out["tensorflow_imported"] = np.bool_("tensorflow" in sys.modules and hasattr(sys.modules["tensorflow"], "Tensor"))
    np.savez(out_path, **out)


if __name__ == "__main__":
    main(sys.argv[1:])
