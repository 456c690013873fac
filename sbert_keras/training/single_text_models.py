"""Single-text models: the encoder's own embeddings, trained with a loss on them.

Batch-hard triplet training (labelled sentences) and MSE distillation to a
teacher's vectors put the loss directly on each sentence's embedding; there
is no pair or triplet of inputs and no head. Keras could `fit` the
`SentenceEncoder` itself on raw strings, but then it pads every text to
`sequence_length` and cannot use `pipelines.siamese_dataset`'s length
buckets, the objective table of `train_objective`, its backups or dev
metrics. These models are `SiameseModel`s with one role, `"sentence"`,
whose output is the float32 embedding: the same preprocessor, dataset,
`compile()` defaults and `.keras` round trip as every other objective.

Matryoshka: the loss takes whole embeddings, so `matryoshka_dims` wraps it in
`MatryoshkaLoss(loss, dims=...)`, which truncates and re-normalises the
student's embeddings and cuts a teacher's vectors to the same prefix (the
siamese models' prefix heads would leave the teacher uncut).

Example:
```python
model = BatchHardTripletModel(encoder, margin=5.0)
model.compile()  # BatchHardTripletLoss(margin=5), Adam(2e-5)
model.fit(texts, class_ids, batch_size=32)
```
"""

import keras
from keras import ops

from sbert_keras.losses.distillation import MSEDistillationLoss
from sbert_keras.losses.matryoshka import MatryoshkaLoss
from sbert_keras.losses.matryoshka import _check_dims
from sbert_keras.losses.matryoshka import _check_fits
from sbert_keras.losses.triplet import BATCH_HARD_MARGIN
from sbert_keras.losses.triplet import BatchHardTripletLoss
from sbert_keras.training.siamese import SiameseModel


class EmbeddingModel(SiameseModel):
    """Base: one text in, its float32 embedding out (role `"sentence"`).

    Args:
        encoder: the `SentenceEncoder` to train.
        matryoshka_dims: tuple of int or None. Also train these prefixes:
            `compile()` wraps the loss in `MatryoshkaLoss(loss, dims=...)`.
        **kwargs: `SiameseModel` arguments (a saved `roles` entry is ignored).
    """

    roles = ("sentence",)

    def __init__(self, encoder, matryoshka_dims=None, **kwargs):
        # === Config === (before the build: `Task.__init__` compiles)
        self.loss_dims = None if matryoshka_dims is None else _check_dims(matryoshka_dims, "matryoshka_dims")
        if self.loss_dims is not None:
            _check_fits(self.loss_dims, encoder.embedding_dim)
        kwargs.pop("roles", None)
        super().__init__(encoder, **kwargs)

    def head(self, embeddings):
        return ops.cast(embeddings["sentence"], "float32")

    def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
        """`SiameseModel.compile`; with `matryoshka_dims`, the loss on every prefix."""
        if loss == "auto":
            loss = self.default_loss()
        if self.loss_dims and loss is not None and not isinstance(loss, MatryoshkaLoss):
            loss = MatryoshkaLoss(loss, dims=self.loss_dims)
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def get_config(self):
        config = super().get_config()
        if self.loss_dims is not None:
            config["matryoshka_dims"] = list(self.loss_dims)
        return config


@keras.saving.register_keras_serializable(package="sbert_keras")
class BatchHardTripletModel(EmbeddingModel):
    """Labelled sentences, `BatchHardTripletLoss` within each batch.

    Inputs: texts; targets: int class ids. Each anchor's farthest same-class
    sentence of the batch is pulled in, its nearest other-class one pushed
    out; a batch should hold several sentences of a class.

    Args:
        encoder: the `SentenceEncoder` to train.
        margin: float. 5, as in sentence-transformers (for unnormalised
            Euclidean distances; normalised embeddings are within 2).
        metric: str. `"euclidean"` or `"cosine"`.
        **kwargs: `EmbeddingModel` arguments (`matryoshka_dims`).

    Example:
    ```python
    model = BatchHardTripletModel(encoder)
    model.compile()
    model.fit(["a cat", "a kitten", "a car"], np.array([0, 0, 1]))
    ```
    """

    def __init__(self, encoder, margin=BATCH_HARD_MARGIN, metric="euclidean", **kwargs):
        # === Config ===
        self.margin = margin
        self.metric = metric
        super().__init__(encoder, **kwargs)

    def default_loss(self):
        return BatchHardTripletLoss(margin=self.margin, metric=self.metric)

    def get_config(self):
        return {**super().get_config(), "margin": self.margin, "metric": self.metric}


@keras.saving.register_keras_serializable(package="sbert_keras")
class DistillationModel(EmbeddingModel):
    """The student's embeddings fitted to a teacher's with MSE (`MSEDistillationLoss`).

    Inputs: texts; targets: the teacher's float32 `(batch, dim)` vectors of
    the same texts, of the student's width.

    Args:
        encoder: the student `SentenceEncoder`.
        **kwargs: `EmbeddingModel` arguments (`matryoshka_dims`).

    Example:
    ```python
    model = DistillationModel(student)
    model.compile()  # MSE, Adam(2e-5)
    model.fit(texts, teacher.encode(texts))
    ```
    """

    def default_loss(self):
        return MSEDistillationLoss()
