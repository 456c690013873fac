"""Siamese models: one shared `SentenceEncoder` inside every SBERT objective.

Each model takes the *same* encoder instance for every input sentence, so
the weights are shared by construction, and exposes it as `.encoder`. With
the encoder's preprocessor attached, `fit`/`evaluate`/`predict` take raw
strings: a tuple `(a, b)` / `(anchor, positive, negative)` of string arrays
or a `tf.data.Dataset` yielding such tuples (or dicts keyed by role).
`compile()` with no arguments uses the objective's loss and Adam(2e-5).
`fit` is checked (`fit_checks.CheckedTraining`): labels outside the loss's
`label_range()` or inputs of different lengths are refused, and a step
with a NaN or infinite loss is not applied and stops `fit`, naming the batch.
"""

import keras
import keras_hub
from keras import ops

from sbert_keras.encoder import CompileStateMixin
from sbert_keras.losses.in_batch import InBatchNegativesLoss
from sbert_keras.losses.matryoshka import MatryoshkaLoss
from sbert_keras.losses.matryoshka import MatryoshkaPrefixes
from sbert_keras.losses.pair_scores import AnglELoss
from sbert_keras.losses.pair_scores import CoSENTLoss
from sbert_keras.losses.pair_scores import OnlineContrastiveLoss
from sbert_keras.losses.replicas import ReplicaGather
from sbert_keras.losses.triplet import TripletLoss
from sbert_keras.losses.triplet import triplet_settings
from sbert_keras.model.similarity import CosineSimilarity
from sbert_keras.model.similarity import PairFeatures
from sbert_keras.model.similarity import SimilarityMatrix
from sbert_keras.model.similarity import TripletDistances
from sbert_keras.training.fit_checks import CheckedTraining
from sbert_keras.training.fit_checks import LabelRange
from sbert_keras.training.fit_checks import inner_loss
from sbert_keras.training.siamese_preprocessor import SiamesePreprocessor  # noqa: F401 (public here too)
from sbert_keras.utils.defaults import CONCATENATION
from sbert_keras.utils.defaults import IN_BATCH_SCALE
from sbert_keras.utils.defaults import NLI_NUM_CLASSES
from sbert_keras.utils.defaults import PAPER_LEARNING_RATE  # also re-exported: `siamese.PAPER_LEARNING_RATE`


class SiameseModel(CompileStateMixin, CheckedTraining, keras_hub.models.Task):
    """Base class: builds role inputs and runs the shared encoder on each.

    A subclass creates its head layers in `__init__` *before* calling this
    constructor (KerasHub's order: layers, then the functional model), and
    implements `head(embeddings)`, which only calls those layers on a dict
    role -> embedding, and `default_loss()`; `label_range()` where the
    loss needs labels in a known range.

    Args:
        encoder: the shared `SentenceEncoder`.
        roles: tuple of str or None. The input sentences in order; `None`
            takes the class's `roles`.
        matryoshka_dims: tuple of int or None. Also train these prefixes of
            the embeddings (Matryoshka): the head runs on each re-normalised
            prefix and the outputs are stacked on axis 1, `(batch,
            len(dims), ...)`; `compile()` wraps the loss in `MatryoshkaLoss`
            (and drops the default metrics).
        **kwargs: standard `keras_hub.models.Task` arguments (`name`, ...).
    """

    roles = ()
    dummy_labels = False

    def __init__(self, encoder, roles=None, matryoshka_dims=None, **kwargs):
        roles = tuple(roles or self.roles)
        # === Config === (before the build: `Task.__init__` compiles)
        self.matryoshka_dims = None if matryoshka_dims is None else tuple(matryoshka_dims)
        # === Layers ===
        self.encoder = encoder
        self.prefixes = (
            None if matryoshka_dims is None else MatryoshkaPrefixes(matryoshka_dims, name="matryoshka_prefixes")
        )
        self.preprocessor = (
            SiamesePreprocessor(encoder.preprocessor, roles, self.dummy_labels)
            if encoder.preprocessor is not None
            else None
        )
        # === Functional Model ===
        names = list(encoder.input)
        inputs = {
            f"{role}_{name}": keras.Input(shape=(None,), dtype="int32", name=f"{role}_{name}")
            for role in roles
            for name in names
        }
        embeddings = {role: encoder({name: inputs[f"{role}_{name}"] for name in names}) for role in roles}
        if self.prefixes is None:
            outputs = self.head(embeddings)
        else:
            prefixes = {role: self.prefixes(embedding) for role, embedding in embeddings.items()}
            heads = [self.head({role: p[i] for role, p in prefixes.items()}) for i in range(len(self.matryoshka_dims))]
            outputs = ops.stack(heads, axis=1)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        # === Config ===
        self.active_roles = roles

    def head(self, embeddings):
        """Calls the head layers (made in `__init__`) on `{role: embedding}`."""
        raise NotImplementedError

    def default_loss(self):
        raise NotImplementedError

    def default_metrics(self):
        return None

    def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
        """`compile()` with the objective's defaults: its loss, Adam(2e-5)."""
        if optimizer == "auto":
            optimizer = keras.optimizers.Adam(PAPER_LEARNING_RATE)
        if loss == "auto":
            loss = self.default_loss()
        if metrics == "auto":
            metrics = None if self.matryoshka_dims else self.default_metrics()
        if self.matryoshka_dims and loss is not None and not isinstance(loss, MatryoshkaLoss):
            loss = MatryoshkaLoss(loss)
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def get_config(self):
        config = super().get_config()
        # `Task` serialises a backbone (None here) and the preprocessor; both
        # are rebuilt from the encoder, which is serialised once instead.
        config.pop("backbone", None)
        config.pop("preprocessor", None)
        config.update({"encoder": keras.layers.serialize(self.encoder), "roles": list(self.active_roles)})
        if self.matryoshka_dims is not None:
            config["matryoshka_dims"] = list(self.matryoshka_dims)
        return config

    @classmethod
    def from_config(cls, config):
        config = {**config, "encoder": keras.layers.deserialize(config["encoder"])}
        return super().from_config(config)


@keras.saving.register_keras_serializable(package="sbert_keras")
class RegressionSiamese(SiameseModel):
    """cos(u, v) per pair, trained with MSE against a similarity score.

    Inputs: `(sentence_a, sentence_b)`. Output: `(batch,)` cosines in
    float32. Scale STS scores to the cosine's range first (see
    `sbert_keras.data.readers`). Also the model of `CoSENTLoss` and
    `OnlineContrastiveLoss`.

    Args:
        encoder: the shared `SentenceEncoder`.
        pair_output: str. `"cosine"` (default, MSE) or `"embeddings"`: the pair's
            two embeddings `(batch, 2, dim)`, for `AnglELoss` (the default
            loss then); with Matryoshka use `MatryoshkaLoss(AnglELoss(),
            dims=...)` on this output instead of `matryoshka_dims`.
        **kwargs: `SiameseModel` arguments.

    Example:
    ```python
    model = RegressionSiamese(encoder)
    model.compile()  # MSE, Adam(2e-5)
    model.fit((sentences_a, sentences_b), scores, batch_size=16)
    ```
    """

    roles = ("sentence_a", "sentence_b")

    def __init__(self, encoder, pair_output="cosine", **kwargs):
        if pair_output not in ("cosine", "embeddings"):
            raise ValueError(f"`pair_output` must be 'cosine' or 'embeddings'. Received {pair_output!r}.")
        if pair_output == "embeddings" and kwargs.get("matryoshka_dims"):
            raise ValueError(
                "RegressionSiamese(pair_output='embeddings') takes no `matryoshka_dims`: "
                "compile it with `MatryoshkaLoss(AnglELoss(), dims=...)`, which truncates the embeddings itself."
            )
        # === Config ===
        self.pair_output = pair_output
        # === Layers ===
        self.similarity = CosineSimilarity(name="cosine_similarity")
        super().__init__(encoder, **kwargs)

    def head(self, embeddings):
        if self.pair_output == "embeddings":
            pair = [ops.cast(embeddings[r], "float32") for r in ("sentence_a", "sentence_b")]
            return ops.stack(pair, axis=1)
        return self.similarity(embeddings["sentence_a"], embeddings["sentence_b"])

    def default_loss(self):
        return AnglELoss() if self.pair_output == "embeddings" else keras.losses.MeanSquaredError()

    def label_range(self):
        """Cosine targets in [-1, 1] for MSE, 0/1 for `OnlineContrastiveLoss`, finite scores for CoSENT/AnglE."""
        loss = inner_loss(self.loss)
        if isinstance(loss, OnlineContrastiveLoss):
            return LabelRange("labels 0 (dissimilar) or 1 (similar)", 0, 1, integer=True)
        if isinstance(loss, (CoSENTLoss, AnglELoss)):
            return LabelRange("finite similarity scores")
        if getattr(loss, "fn", loss) is keras.losses.mean_squared_error and self.pair_output == "cosine":
            hint = "Scale 0-5 STS scores first: `sbert_keras.data.examples.scale_sts_score(scores)`."
            return LabelRange("cosine targets in [-1, 1]", -1, 1, hint=hint)
        return None

    def get_config(self):
        return {**super().get_config(), "pair_output": self.pair_output}


@keras.saving.register_keras_serializable(package="sbert_keras")
class TripletSiamese(SiameseModel):
    """Stacked `[d(a, p), d(a, n)]`, trained with `TripletLoss(margin)`.

    Args:
        encoder: the shared `SentenceEncoder`.
        distance: str or None. `"euclidean"` (the paper's), `"cosine"` or
            `"manhattan"`; `None`: cosine when the encoder L2-normalises its
            outputs, else euclidean (`losses.triplet_settings`).
        margin: float or None. `TripletLoss`'s margin; `None`: 0.1 for the
            cosine distance (`defaults.TRIPLET_COSINE_MARGIN`), else 1.
        **kwargs: `SiameseModel` arguments.

    The resolved values are in the config. Inputs: `(anchor, positive,
    negative)`; no labels needed.

    Example:
    ```python
    model = TripletSiamese(encoder)  # normalising encoder: cosine, margin 0.1
    model = TripletSiamese(encoder, distance="euclidean", margin=1.0)  # the paper's
    model.compile()  # TripletLoss(margin=model.margin), Adam(2e-5)
    model.fit((anchors, positives, negatives), batch_size=16)
    ```
    """

    roles = ("anchor", "positive", "negative")
    dummy_labels = True

    def __init__(self, encoder, distance=None, margin=None, **kwargs):
        # === Config === (before the build: `Task.__init__` compiles with `default_loss()`)
        self.distance, self.margin = triplet_settings(encoder.normalize, distance, margin)
        # === Layers ===
        self.distances = TripletDistances(self.distance, name="triplet_distances")
        super().__init__(encoder, **kwargs)

    def head(self, embeddings):
        return self.distances(embeddings["anchor"], embeddings["positive"], embeddings["negative"])

    def default_loss(self):
        return TripletLoss(margin=self.margin)

    def get_config(self):
        return {**super().get_config(), "distance": self.distance, "margin": self.margin}


@keras.saving.register_keras_serializable(package="sbert_keras")
class ClassificationSiamese(SiameseModel):
    """softmax(W·[u, v, |u−v|]) over pair labels (NLI: 3 classes).

    Args:
        encoder: the shared `SentenceEncoder`.
        num_classes: int. 3 for NLI (entailment, neutral, contradiction).
        concatenation: tuple of `"u"`, `"v"`, `"|u-v|"`, `"u*v"` (the
            paper's ablation, Table 6). Default `("u", "v", "|u-v|")`.
        **kwargs: `SiameseModel` arguments.

    The model outputs logits (float32); `compile()` uses sparse categorical
    cross-entropy `from_logits=True` and accuracy. The head is part of the
    model and is saved with it.

    Example:
    ```python
    model = ClassificationSiamese(encoder, num_classes=3)
    model.compile()  # cross-entropy on logits, accuracy, Adam(2e-5)
    model.fit((premises, hypotheses), labels, batch_size=16)
    ```
    """

    roles = ("sentence_a", "sentence_b")

    def __init__(self, encoder, num_classes=NLI_NUM_CLASSES, concatenation=CONCATENATION, **kwargs):
        # === Config ===
        self.num_classes = num_classes
        self.concatenation = tuple(concatenation)
        # === Layers ===
        self.features = PairFeatures(self.concatenation, name="pair_features")
        self.classifier = keras.layers.Dense(num_classes, dtype="float32", name="classifier")
        super().__init__(encoder, **kwargs)

    def head(self, embeddings):
        return self.classifier(self.features(embeddings["sentence_a"], embeddings["sentence_b"]))

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        return ["accuracy"]

    def label_range(self):
        """Class ids 0..num_classes-1 for the sparse cross-entropy (the default loss)."""
        if getattr(inner_loss(self.loss), "fn", None) is keras.losses.sparse_categorical_crossentropy:
            return LabelRange(f"class ids 0..{self.num_classes - 1} (integers)", 0, self.num_classes - 1, integer=True)
        return None

    def get_config(self):
        return {
            **super().get_config(),
            "num_classes": self.num_classes,
            "concatenation": list(self.concatenation),
        }


@keras.saving.register_keras_serializable(package="sbert_keras")
class ContrastiveSiamese(SiameseModel):
    """In-batch negatives: each anchor must pick its own positive.

    Outputs the `(batch, batch * k)` cosine matrix of anchors against all
    positives (and hard negatives), trained with `InBatchNegativesLoss`.

    Args:
        encoder: the shared `SentenceEncoder`.
        hard_negatives: bool. Take a third input of hard negatives.
        scale: float. Inverse temperature of the softmax (20).
        gather_across_replicas: bool. Under a `tf.distribute` strategy, score
            each anchor against every replica's candidates (the global batch).
        **kwargs: `SiameseModel` arguments; `roles` follow from
            `hard_negatives` (a saved config's `roles` is ignored).

    Inputs: `(anchor, positive)` or `(anchor, positive, negative)`.

    Example:
    ```python
    model = ContrastiveSiamese(encoder, hard_negatives=False, scale=20.0)
    model.compile()  # InBatchNegativesLoss(scale=20), Adam(2e-5)
    model.fit((anchors, positives), batch_size=16)
    ```
    """

    dummy_labels = True

    def __init__(self, encoder, hard_negatives=False, scale=IN_BATCH_SCALE, gather_across_replicas=False, **kwargs):
        # === Config === (before the build: `Task.__init__` compiles with `default_loss()`)
        self.hard_negatives, self.scale, self.gather_across_replicas = hard_negatives, scale, gather_across_replicas
        # === Layers ===
        self.similarities = SimilarityMatrix(name="similarity_matrix")
        self.gather = ReplicaGather(name="replica_gather") if gather_across_replicas else None
        kwargs.pop("roles", None)
        roles = ("anchor", "positive", "negative") if hard_negatives else ("anchor", "positive")
        super().__init__(encoder, roles=roles, **kwargs)

    def head(self, embeddings):
        gather = self.gather or (lambda c: c)  # `ReplicaGather`: local rows first, row i's positive is column i
        candidates = [gather(embeddings[r]) for r in ("positive", "negative") if r in embeddings]
        return self.similarities(embeddings["anchor"], *candidates)

    def default_loss(self):
        return InBatchNegativesLoss(scale=self.scale)

    def get_config(self):
        config = {"hard_negatives": self.hard_negatives, "scale": self.scale}
        return {**super().get_config(), **config, "gather_across_replicas": self.gather_across_replicas}
