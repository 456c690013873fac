"""Evaluators of the SBERT paper (STS, triplets, NLI, SentEval transfer).

Each evaluator returns a `dict[str, float]`, prints nothing and writes no
files. Correlations come from `scipy.stats`, the transfer classifier and the
confusion matrix from scikit-learn; only the row-wise similarities, the
de-duplicated encoding and the Keras callback are written here. Distances are
computed in float64 NumPy; norms are clamped at `1e-12`, so zero vectors give
finite values, and an undefined correlation (constant input) is `0.0`.

`EvaluationCallback` runs an evaluator at the end of training epochs and adds
its figures, prefixed, to the epoch logs, so they land in the `History`
returned by `fit` (e.g. `history.history["dev_spearman_cosine"]`); with
`verbose` it prints one line of them.

The evaluators encode without a progress bar (`encode_quietly`): a bar
drawn during `fit` would land inside Keras' epoch line.
"""

import functools
import inspect
import time

import keras
import numpy as np
from scipy import stats
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import confusion_matrix
from sklearn.model_selection import StratifiedKFold
from sklearn.model_selection import cross_val_score

from sbert_keras.utils import backends
from sbert_keras.utils.arrays import l2_normalize
from sbert_keras.utils.defaults import ENCODE_BATCH_SIZE

# The figure reported in the SBERT paper for each task.
PRIMARY_METRIC = {
    "sts": "spearman_cosine",
    "triplet": "triplet_accuracy",
    "nli": "nli_accuracy",
}


# === Helpers ===


def _columns(*columns):
    """Lists of equal, non-zero length (raises a `ValueError` otherwise)."""
    columns = [list(c) for c in columns]
    lengths = {len(c) for c in columns}
    if len(lengths) != 1:
        raise ValueError(f"All inputs must have the same length. Received lengths {[len(c) for c in columns]}.")
    if not columns[0]:
        raise ValueError("The evaluation needs at least one example; received none.")
    return columns


def encode_quietly(encoder, texts, batch_size):
    """`encoder.encode(texts, batch_size=...)`, with `show_progress=False` where `encode` takes it."""
    try:
        takes_it = "show_progress" in inspect.signature(encoder.encode).parameters
    except (TypeError, ValueError):  # a callable without a signature
        takes_it = False
    quiet = {"show_progress": False} if takes_it else {}
    return encoder.encode(texts, batch_size=batch_size, **quiet)


def _encode_unique(encoder, columns, batch_size):
    """Encodes every distinct text of `columns` once; one float64 array per column."""
    unique = list(dict.fromkeys(text for column in columns for text in column))
    vectors = np.asarray(encode_quietly(encoder, unique, batch_size), dtype="float64")
    vectors = vectors.reshape(len(unique), -1)
    position = {text: i for i, text in enumerate(unique)}
    return [vectors[[position[text] for text in column]] for column in columns]


def _cosine(u, v):
    return np.sum(l2_normalize(u, dtype=np.float64) * l2_normalize(v, dtype=np.float64), axis=-1)


def _euclidean(u, v):
    return np.linalg.norm(u - v, axis=-1)


def _manhattan(u, v):
    return np.sum(np.abs(u - v), axis=-1)


def _correlation(function, x, y):
    """`function(x, y).statistic`, or `0.0` where it is undefined."""
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0
    value = float(function(x, y).statistic)
    return value if np.isfinite(value) else 0.0


# === Evaluators ===


def sts_evaluation(encoder, sentences_a, sentences_b, scores, batch_size=ENCODE_BATCH_SIZE):
    """Spearman and Pearson correlations of pair similarities with gold scores.

    Each distinct sentence is encoded once. Similarities are the cosine, the
    negative euclidean and manhattan distances and the dot product; the
    primary figure (the SBERT paper's) is `spearman_cosine`. Scores may be
    raw (0..5) or rescaled: correlations do not depend on the scale.

    Args:
        encoder: `SentenceEncoder`. Anything with `encode(texts, batch_size)`.
        sentences_a: list of str. First sentence of each pair.
        sentences_b: list of str. Second sentence of each pair.
        scores: array-like of float. Gold similarity of each pair.
        batch_size: int. Texts per forward pass.

    Returns:
        dict of float with keys `spearman_{metric}` and `pearson_{metric}`
        for `metric` in `cosine`, `euclidean`, `manhattan`, `dot`.
    """
    sentences_a, sentences_b, scores = _columns(sentences_a, sentences_b, scores)
    scores = np.asarray(scores, dtype="float64")
    u, v = _encode_unique(encoder, [sentences_a, sentences_b], batch_size)
    similarities = {
        "cosine": _cosine(u, v),
        "euclidean": -_euclidean(u, v),
        "manhattan": -_manhattan(u, v),
        "dot": np.sum(u * v, axis=-1),
    }
    results = {}
    for name, similarity in similarities.items():
        results[f"spearman_{name}"] = _correlation(stats.spearmanr, similarity, scores)
        results[f"pearson_{name}"] = _correlation(stats.pearsonr, similarity, scores)
    return results


def triplet_evaluation(encoder, anchors, positives, negatives, batch_size=ENCODE_BATCH_SIZE):
    """Fraction of triplets whose positive is closer to the anchor.

    A triplet counts when `d(anchor, positive) < d(anchor, negative)`
    strictly (a tie does not count). The SBERT paper reports the euclidean
    accuracy, `triplet_accuracy`.

    Args:
        encoder: `SentenceEncoder`. Anything with `encode(texts, batch_size)`.
        anchors: list of str. The anchor sentences.
        positives: list of str. A sentence close to each anchor.
        negatives: list of str. A sentence farther from each anchor.
        batch_size: int. Texts per forward pass.

    Returns:
        dict of float: `triplet_accuracy` (euclidean),
        `triplet_accuracy_cosine` and `triplet_accuracy_manhattan`.
    """
    columns = _columns(anchors, positives, negatives)
    a, p, n = _encode_unique(encoder, columns, batch_size)
    distances = {
        "": _euclidean,
        "_cosine": lambda x, y: 1.0 - _cosine(x, y),
        "_manhattan": _manhattan,
    }
    return {f"triplet_accuracy{suffix}": float(np.mean(d(a, p) < d(a, n))) for suffix, d in distances.items()}


def _host_logits(model, columns, batch_size):
    """JAX and PyTorch: `model`'s outputs on text columns, one per role, each batch tokenised on the host."""
    preprocessor, roles = model.encoder.preprocessor, model.preprocessor.roles
    outputs = []
    for start in range(0, len(columns[0]), batch_size):
        features = {}
        for role, column in zip(roles, columns, strict=True):
            for name, value in preprocessor.host_inputs(list(column[start : start + batch_size])).items():
                features[f"{role}_{name}"] = value
        outputs.append(keras.ops.convert_to_numpy(model(features, training=False)))
    return np.concatenate(outputs)


def _nli_predictions(model, sentences_a, sentences_b, labels, batch_size):
    sentences_a, sentences_b, labels = _columns(sentences_a, sentences_b, labels)
    if backends.uses_tensorflow():
        logits = model.predict((np.array(sentences_a), np.array(sentences_b)), batch_size=batch_size, verbose=0)
    else:  # KerasHub's `predict` batches strings with tf.data (or Grain): tokenise on the host instead
        logits = _host_logits(model, (sentences_a, sentences_b), batch_size)
    logits = np.asarray(logits)
    return np.asarray(labels).astype("int64").reshape(-1), logits.argmax(-1), logits.shape[-1]


def nli_evaluation(model, sentences_a, sentences_b, labels, batch_size=ENCODE_BATCH_SIZE):
    """Accuracy of a `ClassificationSiamese` on labelled sentence pairs.

    Args:
        model: `ClassificationSiamese`. Outputs logits for `(a, b)` pairs.
        sentences_a: list of str. Premises.
        sentences_b: list of str. Hypotheses.
        labels: array-like of int. Gold class of each pair.
        batch_size: int. Pairs per forward pass.

    Returns:
        dict of float: `{"nli_accuracy": ...}`.
    """
    labels, predictions, _ = _nli_predictions(model, sentences_a, sentences_b, labels, batch_size)
    return {"nli_accuracy": float(np.mean(predictions == labels))}


def nli_confusion_matrix(model, sentences_a, sentences_b, labels, batch_size=ENCODE_BATCH_SIZE):
    """Confusion matrix of a `ClassificationSiamese` (rows: gold labels).

    Args:
        model: `ClassificationSiamese`. Outputs logits for `(a, b)` pairs.
        sentences_a: list of str. Premises.
        sentences_b: list of str. Hypotheses.
        labels: array-like of int. Gold class of each pair.
        batch_size: int. Pairs per forward pass.

    Returns:
        `np.ndarray` of int, `(num_classes, num_classes)` (3x3 for NLI):
        entry `[i, j]` counts pairs of class `i` predicted as `j`.
    """
    labels, predictions, num_classes = _nli_predictions(model, sentences_a, sentences_b, labels, batch_size)
    return confusion_matrix(labels, predictions, labels=np.arange(num_classes))


def transfer_evaluation(encoder, texts, labels, folds=10, batch_size=ENCODE_BATCH_SIZE, random_state=0):
    """SentEval-style transfer: logistic regression on frozen embeddings.

    The embeddings are scored by a scikit-learn `LogisticRegression`
    (`max_iter=1000`) under stratified `folds`-fold cross-validation.

    Args:
        encoder: `SentenceEncoder`. Anything with `encode(texts, batch_size)`.
        texts: list of str. The sentences to classify.
        labels: array-like. Class of each sentence (at least two classes).
        folds: int. Number of cross-validation folds (at least 2 and at most
            the size of the smallest class).
        batch_size: int. Texts per forward pass.
        random_state: int. Seed of the fold shuffling.

    Returns:
        dict of float: `transfer_accuracy` (mean over folds) and
        `transfer_accuracy_std`.

    Raises:
        ValueError: fewer than two classes, `folds < 2`, or `folds` larger
            than the smallest class count.
    """
    texts, labels = _columns(texts, labels)
    labels = np.asarray(labels)
    classes, counts = np.unique(labels, return_counts=True)
    if len(classes) < 2:
        raise ValueError(f"Transfer evaluation needs at least 2 classes; received {len(classes)}.")
    if folds < 2:
        raise ValueError(f"`folds` must be >= 2. Received {folds}.")
    if folds > counts.min():
        raise ValueError(
            f"`folds={folds}` is larger than the smallest class count: class "
            f"{classes[counts.argmin()]!r} has {counts.min()} example(s). Use "
            f"`folds <= {counts.min()}` or add examples."
        )
    features = np.asarray(encode_quietly(encoder, texts, batch_size), dtype="float64")
    scores = cross_val_score(
        LogisticRegression(max_iter=1000),
        features.reshape(len(texts), -1),
        labels,
        cv=StratifiedKFold(folds, shuffle=True, random_state=random_state),
        scoring="accuracy",
    )
    return {
        "transfer_accuracy": float(np.mean(scores)),
        "transfer_accuracy_std": float(np.std(scores)),
    }


# === Callback ===


class EvaluationCallback(keras.callbacks.Callback):
    """Runs an evaluator during `fit` and records its figures in the logs.

    At the end of every `every_n_epochs`-th epoch, `evaluate_fn()` is called
    and each `key: value` of its dict is added to the epoch logs as
    `f"{prefix}{key}"`, so it appears in the `History` returned by `fit`
    whatever the callbacks' order. Epochs that are skipped add nothing, so
    those `History` lists are shorter than the number of epochs.

    Pass the encoder shared by the siamese model being trained: evaluating
    it during `fit` measures the model in training.

    With `verbose`, each evaluation prints one line (the primary figure, or
    all of them, and the seconds it took). Keras' `ProgbarLogger` writes an
    epoch's final line in its own `on_epoch_end`, and `fit` runs it after
    the callbacks it is given: to print below the epoch's line, and not
    inside it, pass a `keras.callbacks.ProgbarLogger()` before this callback
    (`train_objective` does).

    Args:
        evaluate_fn: callable. Takes no argument, returns a dict of floats
            (and optionally `"primary"`, the name of the main one, not logged).
        prefix: str. Prepended to every key in the logs.
        every_n_epochs: int. Evaluate after every n-th epoch.
        verbose: int or bool. Print one line per evaluation.
        primary: str or None. The figure the line shows (None: the
            evaluator's `"primary"` entry, else every figure).

    Attributes:
        results: list of dict. The (unprefixed) figures of each evaluation.
        epochs: list of int. The epochs (0-based) that were evaluated.

    Example:
    ```python
    model = RegressionSiamese(encoder)
    model.compile()
    callback = EvaluationCallback.sts(encoder, dev_a, dev_b, dev_scores)
    history = model.fit((a, b), scores, epochs=4, callbacks=[callback])
    history.history["dev_spearman_cosine"]
    ```
    """

    def __init__(self, evaluate_fn, prefix="dev_", every_n_epochs=1, verbose=0, primary=None):
        super().__init__()
        if not callable(evaluate_fn):
            raise TypeError(f"`evaluate_fn` must be callable. Received {evaluate_fn!r}.")
        if int(every_n_epochs) < 1:
            raise ValueError(f"`every_n_epochs` must be >= 1. Received {every_n_epochs}.")
        self.evaluate_fn = evaluate_fn
        self.prefix = prefix
        self.every_n_epochs = int(every_n_epochs)
        self.verbose = verbose
        self.primary = primary
        self.results = []
        self.epochs = []

    def on_epoch_end(self, epoch, logs=None):
        if (epoch + 1) % self.every_n_epochs:
            return
        start = time.perf_counter()
        figures = self.evaluate_fn()
        # A `"primary"` entry names the main metric (a str); it is not logged.
        result = {key: float(value) for key, value in figures.items() if key != "primary"}
        if self.verbose:
            epochs = (self.params or {}).get("epochs")
            where = f"Epoch {epoch + 1}/{epochs}" if epochs else f"Epoch {epoch + 1}"
            primary = self.primary or figures.get("primary")
            shown = {primary: result[primary]} if primary in result else result
            line = " - ".join(f"{self.prefix}{key}: {value:.4f}" for key, value in shown.items())
            print(f"{where} {self.prefix.rstrip('_') or 'evaluation'} ({time.perf_counter() - start:.1f}s) - {line}")
        self.results.append(result)
        self.epochs.append(epoch)
        entries = {f"{self.prefix}{key}": value for key, value in result.items()}
        if logs is not None:
            # Keras passes one logs dict to every callback; a `History` that
            # runs after this callback reads these entries from it.
            logs.update(entries)
        history = getattr(self.model, "history", None)
        if (
            isinstance(history, keras.callbacks.History)
            and getattr(history, "epoch", None)
            and history.epoch[-1] == epoch
        ):
            # That `History` ran before this callback and missed the entries.
            for key, value in entries.items():
                history.history.setdefault(key, []).append(value)

    # === Constructors ===

    @classmethod
    def of(cls, evaluator, *args, prefix="dev_", batch_size=ENCODE_BATCH_SIZE, every_n_epochs=1, **kwargs):
        """A callback running `evaluator(*args, batch_size=batch_size)`; `kwargs`: `verbose`, `primary`."""
        fn = functools.partial(evaluator, *args, batch_size=batch_size)
        return cls(fn, prefix=prefix, every_n_epochs=every_n_epochs, **kwargs)

    @classmethod
    def sts(cls, encoder, sentences_a, sentences_b, scores, **kwargs):
        """Logs `sts_evaluation` (e.g. `dev_spearman_cosine`); see there."""
        kwargs.setdefault("primary", PRIMARY_METRIC["sts"])
        return cls.of(sts_evaluation, encoder, sentences_a, sentences_b, scores, **kwargs)

    @classmethod
    def triplets(cls, encoder, anchors, positives, negatives, **kwargs):
        """Logs `triplet_evaluation` (e.g. `dev_triplet_accuracy`); see there."""
        kwargs.setdefault("primary", PRIMARY_METRIC["triplet"])
        return cls.of(triplet_evaluation, encoder, anchors, positives, negatives, **kwargs)

    @classmethod
    def nli(cls, model, sentences_a, sentences_b, labels, **kwargs):
        """Logs `nli_evaluation` (e.g. `dev_nli_accuracy`); see there."""
        kwargs.setdefault("primary", PRIMARY_METRIC["nli"])
        return cls.of(nli_evaluation, model, sentences_a, sentences_b, labels, **kwargs)
