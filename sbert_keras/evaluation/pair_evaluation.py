"""Pair evaluation: binary pair classification and paraphrase mining.

sentence-transformers' `BinaryClassificationEvaluator` (cosine) and
`ParaphraseMiningEvaluator`, with their metric names and definitions
(checked against them in the tests). Like `retrieval_evaluation`'s, each
returns a `dict` with a `"primary"` entry naming its main metric.

Reused: paraphrase mining is `search.paraphrase_mining`, the de-duplicated
encoding and the cosine `evaluation`'s; average precision, Matthews
correlation and accuracy/precision/recall/F1 at a threshold are
scikit-learn's (`average_precision_score`, `matthews_corrcoef`,
`accuracy_score`, `precision_recall_fscore_support`). Written here: the
search for the best threshold, one sorted pass over the scores. scikit-learn
has no best-threshold search, and its curves do not serve: `roc_curve` is
undefined without both classes (a mined list may hold only paraphrases) and
`precision_recall_curve` loses the false-positive count where precision is 0.
"""

import numpy as np
from sklearn.metrics import accuracy_score
from sklearn.metrics import average_precision_score
from sklearn.metrics import matthews_corrcoef
from sklearn.metrics import precision_recall_fscore_support

from sbert_keras.evaluation.evaluators import _cosine
from sbert_keras.evaluation.evaluators import _encode_unique
from sbert_keras.evaluation.retrieval_evaluation import PRIMARY
from sbert_keras.evaluation.retrieval_evaluation import _text_map
from sbert_keras.evaluation.retrieval_evaluation import _texts
from sbert_keras.retrieval.semantic_search import paraphrase_mining
from sbert_keras.utils.checks import check_positive_int
from sbert_keras.utils.defaults import ENCODE_BATCH_SIZE


def _same_length(**columns):
    lengths = {name: len(column) for name, column in columns.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"The inputs must have the same length. Received lengths {lengths}.")
    if not next(iter(lengths.values())):
        raise ValueError(f"The evaluation needs at least one example; {', '.join(lengths)} are empty.")


# === Thresholds ===


def _threshold_sweep(scores, labels):
    """True/false positives when predicting `score >= t`, for every cut.

    Scores are sorted descending; cut `i` predicts the `i` highest distinct
    scores positive (cut 0 predicts none). Returns `(tp, fp, thresholds)`,
    where a threshold is the midpoint between the last score taken and the
    next one (ST's choice; the score itself at the last cut or where the
    midpoint rounds onto the next score).
    """
    order = np.argsort(-scores, kind="stable")
    scores, labels = scores[order], labels[order]
    ends = np.flatnonzero(np.append(scores[1:] != scores[:-1], True))  # last index of each score
    tp = np.concatenate([[0], np.cumsum(labels)[ends]])
    fp = np.concatenate([[0], ends + 1]) - tp
    taken = scores[ends]
    following = np.append(scores[ends[:-1] + 1], taken[-1])
    middle = (taken + following) / 2
    middle = np.where(middle == following, taken, middle)
    above_all = np.nextafter(scores[0], np.inf)
    return tp, fp, np.concatenate([[above_all], middle])


def _at_threshold(scores, labels, threshold, extra_positives=0):
    """scikit-learn's accuracy, precision, recall, F1 predicting `score >= threshold`.

    `extra_positives` gold positives are never predicted (pairs that were
    not mined), so they lower the recall.
    """
    y_true = np.concatenate([labels, np.ones(extra_positives, dtype=labels.dtype)])
    y_pred = np.concatenate([scores >= threshold, np.zeros(extra_positives, dtype=bool)]).astype(labels.dtype)
    precision, recall, f1, _ = precision_recall_fscore_support(y_true, y_pred, average="binary", zero_division=0.0)
    return float(accuracy_score(y_true, y_pred)), float(precision), float(recall), float(f1), y_pred


def _best_f1(scores, labels, total_positives):
    """Index of the first cut with the best F1 (None if none finds a positive)."""
    tp, fp, thresholds = _threshold_sweep(scores, labels)
    f1 = 2 * tp / np.maximum(tp + fp + total_positives, 1)
    return (int(np.argmax(f1)), thresholds) if tp.max() > 0 else (None, thresholds)


# === Pair classification ===


def binary_classification_evaluation(encoder, sentences_a, sentences_b, labels, batch_size=ENCODE_BATCH_SIZE):
    """Accuracy, F1 and average precision of cosine similarity as a 0/1 classifier.

    sentence-transformers' `BinaryClassificationEvaluator` for cosine: pairs
    scoring `>= threshold` are predicted similar; the accuracy and the F1
    are each taken at the threshold that maximises them (the first, from the
    top, on a tie), and precision, recall and Matthews correlation at the
    F1 threshold. Average precision needs no threshold.

    Args:
        encoder: `SentenceEncoder`. Anything with `encode(texts, batch_size)`.
        sentences_a: list of str. First sentence of each pair.
        sentences_b: list of str. Second sentence of each pair.
        labels: array-like of 0/1 (or bool). 1 for similar (duplicate) pairs;
            both classes must occur.
        batch_size: int. Texts per forward pass.

    Returns:
        dict: `"primary"` (`"cosine_ap"`) and the floats `cosine_accuracy`,
        `cosine_accuracy_threshold`, `cosine_f1`, `cosine_f1_threshold`,
        `cosine_precision`, `cosine_recall`, `cosine_ap`, `cosine_mcc`.

    Example:
    ```python
    out = binary_classification_evaluation(encoder, ["a dog"] * 2, ["the dog", "a car"], [1, 0])
    out["cosine_ap"]
    ```
    """
    batch_size = check_positive_int(batch_size, "batch_size")
    sentences_a, sentences_b = _texts(sentences_a, "sentences_a"), _texts(sentences_b, "sentences_b")
    labels = np.asarray(labels).reshape(-1)
    _same_length(sentences_a=sentences_a, sentences_b=sentences_b, labels=labels)
    bad = [i for i, value in enumerate(labels.tolist()) if value not in (0, 1)]
    if bad:
        raise ValueError(f"`labels` must be 0 or 1; item {bad[0]} is {labels.tolist()[bad[0]]!r}.")
    labels = labels.astype("int64")
    if labels.min() == labels.max():
        raise ValueError(f"`labels` holds only class {labels[0]}; pair classification needs both 0 and 1.")
    u, v = _encode_unique(encoder, [sentences_a, sentences_b], batch_size)
    scores = _cosine(u, v)
    tp, fp, thresholds = _threshold_sweep(scores, labels)
    accuracy_threshold = float(thresholds[np.argmax(tp + (labels == 0).sum() - fp)])
    cut, _ = _best_f1(scores, labels, labels.sum())
    f1_threshold = float(thresholds[cut])
    _, precision, recall, f1, predicted = _at_threshold(scores, labels, f1_threshold)
    return {
        PRIMARY: "cosine_ap",
        "cosine_accuracy": _at_threshold(scores, labels, accuracy_threshold)[0],
        "cosine_accuracy_threshold": accuracy_threshold,
        "cosine_f1": f1,
        "cosine_f1_threshold": f1_threshold,
        "cosine_precision": precision,
        "cosine_recall": recall,
        "cosine_ap": float(average_precision_score(labels, scores)),
        "cosine_mcc": float(matthews_corrcoef(labels, predicted)),
    }


# === Paraphrase mining ===


def _gold_pairs(gold_pairs, ids):
    """The gold pairs as a set of sorted row-index pairs, naming a bad pair."""
    row = {sid: i for i, sid in enumerate(ids)}
    pairs = set()
    for n, pair in enumerate(gold_pairs):
        pair = tuple(pair)
        if len(pair) != 2:
            raise ValueError(f"`gold_pairs` item {n} must be a pair of ids. Received {pair!r}.")
        for sid in pair:
            if sid not in row:
                raise ValueError(f"`gold_pairs` item {n} names id {sid!r}, which is not in `sentences`.")
        if pair[0] == pair[1]:
            raise ValueError(f"`gold_pairs` item {n} pairs id {pair[0]!r} with itself.")
        pairs.add(tuple(sorted((row[pair[0]], row[pair[1]]))))
    if not pairs:
        raise ValueError("`gold_pairs` is empty: paraphrase mining evaluation needs at least one gold pair.")
    return pairs


def paraphrase_mining_evaluation(
    encoder, sentences, gold_pairs, batch_size=ENCODE_BATCH_SIZE, top_k=100, max_pairs=500_000
):
    """Mines paraphrase pairs, then scores them against gold pairs.

    sentence-transformers' `ParaphraseMiningEvaluator`: the pairs that
    `search.paraphrase_mining` returns (each sentence's `top_k` neighbours,
    the best `max_pairs` pairs) are taken, by descending cosine, as the
    predicted paraphrases; gold pairs that were not mined count as missed.
    The precision, recall and F1 are at the threshold with the best F1;
    the average precision is ST's: sklearn's over the mined pairs, times
    the share of gold pairs mined.

    Args:
        encoder: `SentenceEncoder`. Anything with `encode(texts, batch_size)`.
        sentences: dict id -> text, or a list of str (ids 0..n-1).
        gold_pairs: iterable of `(id, id)`. The true paraphrase pairs (order
            within a pair does not matter; no transitive closure is added).
        batch_size: int. Texts per forward pass.
        top_k: int. Neighbours mined per sentence.
        max_pairs: int. The most pairs mined.

    Returns:
        dict: `"primary"` (`"average_precision"`) and the floats
        `average_precision`, `f1`, `precision`, `recall`, `threshold`.

    Example:
    ```python
    out = paraphrase_mining_evaluation(encoder, ["a dog runs", "the dog runs", "a red car"], [(0, 1)])
    out["average_precision"]
    ```
    """
    batch_size = check_positive_int(batch_size, "batch_size")
    sentences = _text_map(sentences, "sentences")
    if len(sentences) < 2:
        raise ValueError(f"`sentences` must hold at least 2 sentences. Received {len(sentences)}.")
    ids = list(sentences)
    gold = _gold_pairs(gold_pairs, ids)
    (vectors,) = _encode_unique(encoder, [[sentences[i] for i in ids]], batch_size)
    mined = paraphrase_mining(vectors, top_k=top_k, max_pairs=max_pairs)
    scores = np.asarray([s for s, _, _ in mined], dtype="float64")
    labels = np.asarray([(i, j) in gold for _, i, j in mined], dtype="int64")
    found = int(labels.sum())
    out = {PRIMARY: "average_precision", "average_precision": 0.0, "f1": 0.0, "precision": 0.0, "recall": 0.0}
    out["threshold"] = 0.0
    if found == 0:
        return out
    cut, thresholds = _best_f1(scores, labels, len(gold))
    threshold = float(thresholds[cut])
    _, precision, recall, f1, _ = _at_threshold(scores, labels, threshold, extra_positives=len(gold) - found)
    ap = float(average_precision_score(labels, scores)) if found < len(labels) else 1.0
    out.update(average_precision=ap * found / len(gold), f1=f1, precision=precision, recall=recall)
    out["threshold"] = threshold
    return out
