"""The examples SBERT trains and evaluates on, and conversions between them.

Small dataclasses of string lists and a NumPy label array (`SentencePairs`,
`NLIPairs`, `Triplets`, `LabelledSentences`, `Sentences`), the
`DataFormatError` the readers of `sbert_keras.data.readers` raise, the STS score
scaling, and the NLI conversions (`nli_to_triplets`, `nli_to_pairs`).
Plain Python/NumPy: nothing here imports Keras or TensorFlow. Everything is
importable from `sbert_keras.data.readers` too.

STS score scaling: the regression objective fits the cosine similarity of
the two embeddings to the 0..5 gold score mapped linearly (`scale_sts_score`):

    mapping="unit" (default):  target = score / 5          (0 -> 0, 5 -> 1)
    mapping="keras-io":        target = score / 2.5 - 1    (0 -> -1, 5 -> 1)

"unit" is the sentence-transformers convention (CosineSimilarityLoss). On
all-MiniLM-L6-v2, whose cosines are rarely negative, "keras-io" asks
unrelated pairs for cosine -1 and lowered STS-B dev Spearman from 0.867 to
0.793 after one epoch (benchmarks/sts_finetune.py --label-scale keras-io).

Example:
```python
pairs = SentencePairs(["A man plays."], ["Someone plays."], np.array([4.2], "float32"))
scale_sts_score(pairs.labels)  # array([0.84], dtype=float32)
```
"""

import collections
import dataclasses
import os

import numpy as np

STS_SCORE_MAX = 5.0
NLI_LABELS = ("entailment", "neutral", "contradiction")


class DataFormatError(ValueError):
    """A malformed record in a data file.

    Args:
        path: str or path-like. The file being read.
        line_number: int. The 1-based line of the bad record.
        reason: str. What was wrong; the message is `"{path}, line {n}: {reason}"`.
    """

    def __init__(self, path, line_number, reason):
        self.path, self.line_number, self.reason = os.fspath(path), line_number, reason
        super().__init__(f"{self.path}, line {line_number}: {reason}")


@dataclasses.dataclass
class SentencePairs:
    """Sentence pairs with one float32 score each (STS: raw 0..5 scores).

    Args:
        sentence_a: list of str. The first sentences.
        sentence_b: list of str. The second sentences.
        labels: np.ndarray. float32 `(n,)` gold scores; pass them through
            `scale_sts_score` for a cosine-regression target.
    """

    sentence_a: list
    sentence_b: list
    labels: np.ndarray

    def __len__(self):
        return len(self.sentence_a)

    def as_tuple(self):
        """`(sentence_a, sentence_b)`, the `x` of a pair model's `fit`."""
        return self.sentence_a, self.sentence_b


@dataclasses.dataclass
class NLIPairs(SentencePairs):
    """Premise/hypothesis pairs with int32 labels indexing `NLI_LABELS`.

    Args:
        sentence_a: list of str. The premises (`sentence1`).
        sentence_b: list of str. The hypotheses (`sentence2`).
        labels: np.ndarray. int32 `(n,)`: 0 entailment, 1 neutral,
            2 contradiction, -1 unlabeled (only with `skip_unlabeled=False`).
        num_skipped: int. Unlabeled (`gold_label == "-"`) lines skipped.
    """

    num_skipped: int = 0


@dataclasses.dataclass
class Triplets:
    """Anchor/positive(/negative) sentences for triplet or in-batch objectives.

    Args:
        anchor: list of str. The anchors.
        positive: list of str. A sentence close to each anchor.
        negative: list of str or None. A sentence farther from each anchor;
            `None` for (anchor, positive) pairs (see `nli_to_pairs`).
    """

    anchor: list
    positive: list
    negative: list = None

    def __len__(self):
        return len(self.anchor)

    def as_tuple(self):
        """`(anchor, positive, negative)`, or `(anchor, positive)` without negatives."""
        if self.negative is None:
            return self.anchor, self.positive
        return self.anchor, self.positive, self.negative


@dataclasses.dataclass
class LabelledSentences:
    """Sentences with a class each, for batch-hard triplet training.

    Args:
        texts: list of str. The sentences.
        labels: np.ndarray. int32 `(n,)` class ids indexing `classes`.
        classes: list of str. The class names in id order (first appearance).
    """

    texts: list
    labels: np.ndarray
    classes: list = dataclasses.field(default_factory=list)

    def __len__(self):
        return len(self.texts)


@dataclasses.dataclass
class Sentences:
    """Plain sentences, e.g. the training texts of distillation.

    Args:
        texts: list of str. The sentences.
    """

    texts: list

    def __len__(self):
        return len(self.texts)


STS_MAPPINGS = ("unit", "keras-io")


def scale_sts_score(score, mapping="unit"):
    """Maps an STS score 0..5 to a cosine-similarity target.

    Args:
        score: float or np.ndarray. Gold STS scores in [0, `STS_SCORE_MAX`];
            a scalar gives a float, an array a float32 array.
        mapping: str. `"unit"` (default): `score / 5` in [0, 1], the
            sentence-transformers convention; `"keras-io"`: `score / 2.5 - 1`
            in [-1, 1], as in the keras-io example.
    """
    if mapping not in STS_MAPPINGS:
        raise ValueError(f"`mapping` must be one of {STS_MAPPINGS}. Received {mapping!r}.")
    score = np.asarray(score, dtype="float64")
    scaled = score / STS_SCORE_MAX if mapping == "unit" else score / (STS_SCORE_MAX / 2) - 1.0
    return float(scaled) if scaled.ndim == 0 else scaled.astype("float32")


def unscale_sts_score(target, mapping="unit"):
    """Inverse of `scale_sts_score`: a cosine target back to 0..5.

    Args:
        target: float or np.ndarray. Targets made with `mapping`; a scalar
            gives a float, an array a float32 array.
        mapping: str. `"unit"` or `"keras-io"`, as in `scale_sts_score`.
    """
    if mapping not in STS_MAPPINGS:
        raise ValueError(f"`mapping` must be one of {STS_MAPPINGS}. Received {mapping!r}.")
    target = np.asarray(target, dtype="float64")
    score = target * STS_SCORE_MAX if mapping == "unit" else (target + 1.0) * (STS_SCORE_MAX / 2)
    return float(score) if score.ndim == 0 else score.astype("float32")


def nli_to_triplets(nli_pairs, seed=None):
    """Builds (premise, entailment, contradiction) triplets from NLI pairs.

    Pairs are grouped by premise (`sentence_a`). A premise with at least one
    entailment and one contradiction hypothesis gives one triplet per
    entailment hypothesis; the i-th entailment (in file order) is paired
    with contradiction `i % n_contradictions`. Premises appear in order of
    first occurrence; neutral and unlabeled pairs are ignored.

    Args:
        nli_pairs: `NLIPairs`. E.g. the output of `read_nli`.
        seed: int or None. If given, shuffle the triplets with this seed.

    Returns:
        `Triplets` (anchor = premise, positive, negative).
    """
    entailment, contradiction = NLI_LABELS.index("entailment"), NLI_LABELS.index("contradiction")
    groups = collections.defaultdict(lambda: ([], []))
    for premise, hypothesis, label in zip(nli_pairs.sentence_a, nli_pairs.sentence_b, nli_pairs.labels):
        if label == entailment:
            groups[premise][0].append(hypothesis)
        elif label == contradiction:
            groups[premise][1].append(hypothesis)
    rows = []
    for premise, (positives, negatives) in groups.items():
        for i, hypothesis in enumerate(positives if negatives else []):
            rows.append((premise, hypothesis, negatives[i % len(negatives)]))
    if seed is not None:
        rows = [rows[i] for i in np.random.default_rng(seed).permutation(len(rows))]
    return Triplets(*([row[k] for row in rows] for k in range(3)))


def nli_to_pairs(nli_pairs):
    """(premise, entailment hypothesis) pairs for in-batch-negative training.

    Args:
        nli_pairs: `NLIPairs`. E.g. the output of `read_nli`.

    Returns:
        `Triplets` with `negative=None`, in file order: `as_tuple()` is the
        `(anchor, positive)` input of `ContrastiveSiamese`.
    """
    entailment = NLI_LABELS.index("entailment")
    keep = [i for i, label in enumerate(nli_pairs.labels) if label == entailment]
    return Triplets([nli_pairs.sentence_a[i] for i in keep], [nli_pairs.sentence_b[i] for i in keep])


def unique_sentences(examples):
    """Every distinct text of a training set, in order of first appearance.

    For distillation on the sentences of an STS, NLI or triplet file.

    Args:
        examples: `SentencePairs` (`NLIPairs`), `Triplets`,
            `LabelledSentences` or `Sentences`.

    Returns:
        `Sentences`.
    """
    if isinstance(examples, (Sentences, LabelledSentences)):
        columns = [examples.texts]
    elif isinstance(examples, SentencePairs):
        columns = [examples.sentence_a, examples.sentence_b]
    elif isinstance(examples, Triplets):
        columns = [c for c in (examples.anchor, examples.positive, examples.negative) if c is not None]
    else:
        raise TypeError(f"Cannot take the sentences of {type(examples).__name__}.")
    return Sentences(list(dict.fromkeys(text for column in columns for text in column)))
