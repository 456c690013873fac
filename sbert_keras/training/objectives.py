"""The objective table of `train_objective`: which data, model and loss each name means.

One place maps an objective name (`defaults.OBJECTIVES`) to the examples it
trains on (`objective_inputs`, which checks them first and names the first
bad item), the model wrapping the shared encoder (`build_model`) and its
loss. `sbert_keras.training.trainer` runs the loop around them. The models and
losses are the package's own (`siamese`, `cached_siamese`,
`single_text_models`, `sbert_keras.losses`); this module only chooses.

| objective | examples | model | loss |
|---|---|---|---|
| regression | STS pairs (0-5) | `RegressionSiamese` | MSE on scaled scores |
| triplet | `Triplets` (or NLI) | `TripletSiamese` | `TripletLoss` |
| classification | NLI pairs | `ClassificationSiamese` | cross-entropy |
| contrastive | pairs, `Triplets` (or NLI) | `ContrastiveSiamese` or `CachedContrastiveSiamese` | in-batch negatives |
| cosent, angle | scored pairs | `RegressionSiamese` | `CoSENTLoss`, `AnglELoss` |
| online-contrastive | pairs labelled 0/1 | `RegressionSiamese` | `OnlineContrastiveLoss` |
| batch-hard | `LabelledSentences` | `BatchHardTripletModel` | `BatchHardTripletLoss` |
| distill | `Sentences` + a teacher | `DistillationModel` | MSE to the teacher's vectors |

Example:
```python
columns, labels, extra = objective_inputs("contrastive", triplets, hard_negatives=True)
model = build_model("contrastive", encoder, {**extra, "mini_batch_size": 32})  # GradCache
```
"""

import hashlib
import warnings

import numpy as np

from sbert_keras.data.examples import STS_SCORE_MAX
from sbert_keras.data.examples import LabelledSentences
from sbert_keras.data.examples import NLIPairs
from sbert_keras.data.examples import SentencePairs
from sbert_keras.data.examples import Sentences
from sbert_keras.data.examples import Triplets
from sbert_keras.data.examples import nli_to_pairs
from sbert_keras.data.examples import nli_to_triplets
from sbert_keras.data.examples import scale_sts_score
from sbert_keras.losses.pair_scores import CoSENTLoss
from sbert_keras.losses.pair_scores import OnlineContrastiveLoss
from sbert_keras.training import fit_checks
from sbert_keras.training import fit_inputs
from sbert_keras.training import siamese
from sbert_keras.training.cached_siamese import CachedContrastiveSiamese
from sbert_keras.training.cached_siamese import check_mini_batch_size
from sbert_keras.training.single_text_models import BatchHardTripletModel
from sbert_keras.training.single_text_models import DistillationModel
from sbert_keras.utils.defaults import OBJECTIVES
from sbert_keras.utils.defaults import SCORED_PAIR_OBJECTIVES

MODEL_CLASSES = {
    "regression": siamese.RegressionSiamese,
    "triplet": siamese.TripletSiamese,
    "classification": siamese.ClassificationSiamese,
    "contrastive": siamese.ContrastiveSiamese,
    "cosent": siamese.RegressionSiamese,
    "angle": siamese.RegressionSiamese,
    "online-contrastive": siamese.RegressionSiamese,
    "batch-hard": BatchHardTripletModel,
    "distill": DistillationModel,
}
# Per objective: extra model arguments, a loss other than the model's
# default, and the dtype of the labels (float32 otherwise).
# angle: the pair's embeddings, for the model's default AnglELoss.
OBJECTIVE_MODEL_KWARGS = {"angle": {"pair_output": "embeddings"}}
OBJECTIVE_LOSSES = {"cosent": CoSENTLoss, "online-contrastive": OnlineContrastiveLoss}
LABEL_DTYPES = {"classification": "int32", "batch-hard": "int32"}
# The examples each objective takes, for the error when they do not fit.
EXPECTED_EXAMPLES = {
    "regression": (SentencePairs, "sentence pairs"),
    "classification": (SentencePairs, "sentence pairs"),
    "cosent": (SentencePairs, "scored sentence pairs"),
    "angle": (SentencePairs, "scored sentence pairs"),
    "online-contrastive": (SentencePairs, "sentence pairs labelled 0 or 1"),
    "triplet": (Triplets, "triplets"),
    "contrastive": (Triplets, "triplets"),
    "batch-hard": (LabelledSentences, "labelled sentences (text,label)"),
    "distill": (Sentences, "sentences"),
}


def check_labels(objective, labels, ok, expected):
    """Raises naming the first item whose label fails `ok` (`fit_checks.check_labels`)."""
    fit_checks.check_labels(labels, ok, expected, f"The {objective} objective")


def _from_nli(objective, examples, hard_negatives):
    """NLI pairs as the triplet/contrastive objectives take them."""
    if objective == "contrastive" and not hard_negatives:
        return nli_to_pairs(examples)
    examples = nli_to_triplets(examples)
    if not len(examples):
        raise ValueError(
            f"The {objective} objective found no premise with both an "
            f"entailment and a contradiction hypothesis in the NLI data."
        )
    return examples


def _contrastive_inputs(examples, hard_negatives):
    """(anchor, positive[, negative]) columns; the negatives only with `hard_negatives`."""
    if not hard_negatives:
        if examples.negative is not None:
            warnings.warn(
                "The contrastive objective trains on (anchor, positive) pairs and leaves the triplets' "
                "negatives unused; pass hard_negatives=True (`--hard-negatives`) to use them.",
                stacklevel=3,
            )
        return [examples.anchor, examples.positive], None, {"hard_negatives": False}
    if examples.negative is None:
        raise ValueError(
            "`hard_negatives=True` needs a third column of negatives (an anchor,positive,negative CSV as "
            "written by `mine-negatives`, or NLI data); these examples are (anchor, positive) pairs."
        )
    return [examples.anchor, examples.positive, examples.negative], None, {"hard_negatives": True}


def objective_inputs(objective, examples, sts_mapping="unit", num_classes=3, hard_negatives=False):
    """The text columns and labels an objective trains on, after checking they fit.

    Args:
        objective: str. One of `OBJECTIVES`.
        examples: `SentencePairs` with 0-5 STS scores (regression;
            rescaled here with `scale_sts_score(mapping=sts_mapping)`),
            with any finite scores (cosent, angle: ranking losses on the
            raw scores, only their order counts), with 0/1 labels
            (online-contrastive), `NLIPairs` or pairs with class ids
            (classification), `Triplets` (triplet, contrastive; NLI
            pairs are turned into triplets, or into entailment pairs for
            contrastive without hard negatives), `LabelledSentences`
            (batch-hard) or `Sentences` (distill; the labels are the
            teacher's vectors, see `teacher_targets`).
        sts_mapping: str. See `scale_sts_score`.
        num_classes: int. Classes of the classification objective.
        hard_negatives: bool. Contrastive only: also train on the third
            column as hard negatives (else the pairs alone, with a warning
            if the examples had negatives).

    Returns:
        `(columns, labels, model_kwargs)`; `labels` is None where the batch
        implies them (triplet, contrastive, distill).

    Raises:
        TypeError: examples of the wrong kind (e.g. NLI pairs for regression),
            a text field given as one string, labels that are not numbers.
        ValueError: no examples, fields of different lengths, labels not of
            shape `(n,)`, or a label outside the objective's range, naming
            the first bad item (`fit_inputs.check_examples`).
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"`objective` must be one of {OBJECTIVES}. Received {objective!r}.")
    if hard_negatives and objective != "contrastive":
        raise ValueError(f"`hard_negatives` applies to the contrastive objective only, not {objective}.")
    if objective in SCORED_PAIR_OBJECTIVES + ("online-contrastive",) and isinstance(examples, NLIPairs):
        raise TypeError(
            f"The {objective} objective trains on STS scores (similarities, e.g. 0-5); received NLI pairs "
            "(labels 0/1/2 are classes, not similarities). Use the classification, "
            "triplet or contrastive objective for NLI data."
        )
    if objective in ("triplet", "contrastive") and isinstance(examples, NLIPairs):
        examples = _from_nli(objective, examples, hard_negatives)
    kind, what = EXPECTED_EXAMPLES[objective]
    if not isinstance(examples, kind):
        raise TypeError(f"The {objective} objective trains on {what}; received {type(examples).__name__}.")
    fit_inputs.check_examples(examples)
    if not len(examples):
        raise ValueError(f"The {objective} objective received no training examples.")
    pairs = [getattr(examples, "sentence_a", None), getattr(examples, "sentence_b", None)]
    if objective == "regression":
        check_labels(
            objective,
            examples.labels,
            lambda y: (y >= 0) & (y <= STS_SCORE_MAX),
            f"STS scores in [0, {STS_SCORE_MAX:g}]",
        )
        return pairs, scale_sts_score(examples.labels, mapping=sts_mapping), {}
    if objective in ("cosent", "angle"):
        check_labels(objective, examples.labels, np.isfinite, "finite similarity scores")
        return pairs, np.asarray(examples.labels, "float32"), {}
    if objective == "online-contrastive":
        check_labels(objective, examples.labels, lambda y: (y == 0) | (y == 1), "labels 0 (dissimilar) or 1 (similar)")
        return pairs, np.asarray(examples.labels, "float32"), {}
    if objective == "classification":
        check_labels(
            objective,
            examples.labels,
            lambda y: (y >= 0) & (y < num_classes) & (np.round(y) == y),
            f"class ids 0..{num_classes - 1} (NLI labels; STS scores need regression)",
        )
        return pairs, examples.labels, {}
    if objective == "triplet":
        if examples.negative is None:
            raise ValueError("The triplet objective needs negatives.")
        return [examples.anchor, examples.positive, examples.negative], None, {}
    if objective == "batch-hard":
        return [examples.texts], np.asarray(examples.labels, "int32"), {}
    if objective == "distill":
        return [examples.texts], None, {}
    return _contrastive_inputs(examples, hard_negatives)


def build_model(objective, encoder, model_kwargs):
    """The objective's model around `encoder`.

    Args:
        objective: str. One of `OBJECTIVES`.
        encoder: the shared `SentenceEncoder`.
        model_kwargs: dict. Model arguments, e.g. `matryoshka_dims`;
            `mini_batch_size` (contrastive only) trains with GradCache
            (`CachedContrastiveSiamese`).
    """
    model_kwargs = dict(model_kwargs)
    model_class = MODEL_CLASSES[objective]
    if "mini_batch_size" in model_kwargs:
        if objective != "contrastive":
            raise ValueError(
                f"`mini_batch_size` (cached in-batch negatives) applies to the contrastive objective only, "
                f"not {objective}."
            )
        check_mini_batch_size(model_kwargs["mini_batch_size"])
        model_class = CachedContrastiveSiamese
    return model_class(encoder, **OBJECTIVE_MODEL_KWARGS.get(objective, {}), **model_kwargs)


def objective_loss(objective):
    """The loss to compile the objective's model with (`"auto"`: the model's default)."""
    return OBJECTIVE_LOSSES[objective]() if objective in OBJECTIVE_LOSSES else "auto"


def teacher_targets(teacher, texts, student):
    """The teacher's float32 vectors of `texts`, the distill objective's labels.

    Args:
        teacher: a `SentenceEncoder` (its `encode`, at float32 precision,
            runs once here) or an array `(len(texts), dim)` of its vectors.
        texts: list of str. The training sentences.
        student: the `SentenceEncoder` being trained; its
            `embedding_dim` must equal the teacher's.

    Raises:
        ValueError: no teacher, an array of the wrong shape, or a teacher
            width other than the student's (both named).
    """
    if teacher is None:
        raise ValueError("The distill objective needs a `teacher` (an encoder or its embeddings of the texts).")
    if hasattr(teacher, "encode"):
        targets = teacher.encode(list(texts), normalize=None, show_progress=False, compute="float32")
    else:
        targets = np.asarray(teacher, "float32")
    if targets.ndim != 2 or len(targets) != len(texts):
        raise ValueError(
            f"The teacher's embeddings must have shape ({len(texts)}, dim), one row per sentence; "
            f"received shape {targets.shape}."
        )
    if targets.shape[1] != student.embedding_dim:
        raise ValueError(
            f"The teacher's embeddings have {targets.shape[1]} dimensions and the student's "
            f"{student.embedding_dim}; distillation with MSE needs the same dimension."
        )
    return np.asarray(targets, "float32")


def array_sha256(array):
    """A SHA-256 of an array's float32 bytes (the teacher's part of a run fingerprint)."""
    return hashlib.sha256(np.ascontiguousarray(array, dtype="float32").tobytes()).hexdigest()
