"""Cached in-batch negatives (GradCache): large contrastive batches in bounded memory.

In-batch negatives train better with larger batches (every other positive
of the batch is a negative), but a plain `train_step` keeps the activations
of the whole batch for back-propagation: at batch 512 that is the memory of
1,024 transformer passes at once. GradCache (Gao et al., 2021, "Scaling
Deep Contrastive Learning Batch Size under Memory Limited Setup";
sentence-transformers' `CachedMultipleNegativesRankingLoss`) splits the
step in three, with identical gradients:

1. embed every role (anchors, positives, hard negatives) in mini-batches of
   `mini_batch_size` rows, without a gradient tape;
2. compute the loss over the whole batch from those embeddings and its
   gradient with respect to the embeddings (one small tape: the
   `(batch, batch * k)` similarity matrix and the softmax);
3. re-run the encoder on each mini-batch under a tape and accumulate
   `tape.gradient(embeddings, weights, output_gradients=cached_slice)`,
   i.e. the chain rule with the cached `dLoss/dEmbeddings`; then apply the
   summed gradient once with the optimizer.

Peak memory is one mini-batch's activations, the `(batch, dim)` embeddings,
one gradient accumulator per weight and the loss's similarity matrix.

Why it is hand-written: Keras, KerasHub and TensorFlow have no gradient
caching (Keras' gradient accumulation, `gradient_accumulation_steps`, sums
gradients of *separate* losses, so each mini-batch would only see its own
negatives). The loss, the similarity matrix and the Matryoshka prefixes are
not re-implemented: this is `ContrastiveSiamese` with another `train_step`,
computing the very loss `compile()` set (`InBatchNegativesLoss`,
`SymmetricInBatchNegativesLoss`, or either wrapped in `MatryoshkaLoss`).

Dropout: pass 3 must see the same dropout masks as pass 1, or the cached
gradient belongs to a different function. Keras draws dropout masks from
`SeedGenerator` states, which are the encoder's non-trainable variables and
advance by one per call. The step snapshots every non-trainable variable of
the encoder before pass 1 and restores it before pass 3, which calls the
encoder on the same mini-batches in the same order: the masks are replayed
exactly (sentence-transformers' `RandContext` does the same for torch's RNG
state), dropout stays on as in the uncached model, and after the step the
seeds stand where pass 1 left them. (Turning dropout off in both passes
would be simpler but trains a different model than `ContrastiveSiamese`.)
The reference for the test is the same loss taped through the same
mini-batch passes with the same restored seeds. Pass 3 also compares its
embeddings with pass 1's: an encoder with randomness outside Keras' seed
generators would make them differ, and the step then fails with an error
naming the role instead of applying gradients of another function.

Optimizer: the accumulated gradients are dense. The uncached model hands
Keras the token embedding's gradient as `IndexedSlices`, on which Keras'
Adam squares each occurrence's row before summing (its second moment of a
repeated token is a sum of squares, not the square of the sum); with SGD
(with or without momentum) both give the same step, with Adam the cached
step is the dense one (as in PyTorch).

Mixed precision: under `mixed_float16`, `compile` wraps the optimizer in a
`LossScaleOptimizer`; pass 2 differentiates the *scaled* loss, so the cached
gradients flowing back through the float16 encoder in pass 3 are scaled
too, and `apply_gradients` unscales them and skips non-finite steps, as in
Keras' own `train_step`.

The mini-batch loops are `tf.while_loop`s (the batch size is only known at
run time) with `parallel_iterations=1`, so that one mini-batch is in memory
at a time. XLA needs static shapes, which the uneven last mini-batch does not
have: `compile` sets `jit_compile=False`.

Example:
```python
model = CachedContrastiveSiamese(encoder, mini_batch_size=32)
model.compile()  # InBatchNegativesLoss(scale=20), Adam(2e-5)
model.fit((anchors, positives), batch_size=512)
```
"""

import keras
from keras import ops

from sbert_keras.compat.keras_training import CHECKED_KERAS_VERSION  # noqa: F401 (public here too)
from sbert_keras.losses.in_batch import SymmetricInBatchNegativesLoss
from sbert_keras.training import cached_steps
from sbert_keras.training.cached_steps import REPLAY_TOLERANCE
from sbert_keras.training.siamese import ContrastiveSiamese
from sbert_keras.utils.backends import tensorflow as tf
from sbert_keras.utils.defaults import IN_BATCH_SCALE

DEFAULT_MINI_BATCH_SIZE = 32


def check_mini_batch_size(value):
    """Raises a `ValueError` naming `mini_batch_size` unless it is an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`mini_batch_size` must be an integer >= 1; received {value!r}.")
    return value


def _dense(gradients, weights):
    """Dense float32 gradients: `IndexedSlices` (embedding lookups) densified, `None` as zeros."""
    return [
        tf.zeros(w.shape, "float32") if g is None else tf.cast(tf.convert_to_tensor(g), "float32")
        for g, w in zip(gradients, weights, strict=True)
    ]


def mini_batches(features, size):
    """`(count, mini_batch)`: the number of mini-batches and `i -> (features_i, (start, stop))`."""
    batch = tf.shape(next(iter(features.values())))[0]
    count = (batch + size - 1) // size

    def mini_batch(i):
        start = i * size
        stop = tf.minimum(start + size, batch)
        return {name: value[start:stop] for name, value in features.items()}, (start, stop)

    return count, mini_batch


def embed_in_mini_batches(encode, features, size):
    """Pass 1: `encode` on `size` rows at a time, without gradients.

    Args:
        encode: callable, tokenised features -> float32 `(rows, dim)`.
        features: dict of `(batch, length)` tensors.
        size: int. Rows per call.

    Returns:
        The float32 `(batch, dim)` embeddings (a constant for any tape).
    """
    count, mini_batch = mini_batches(features, size)
    parts = tf.TensorArray(tf.float32, size=count, infer_shape=False, element_shape=tf.TensorShape([None, None]))

    def body(i, parts):
        return i + 1, parts.write(i, encode(mini_batch(i)[0]))

    _, parts = tf.while_loop(lambda i, _: i < count, body, (tf.constant(0), parts), parallel_iterations=1)
    return tf.stop_gradient(parts.concat())


def backward_in_mini_batches(encode, features, size, cached_grad, weights, gradients, embeddings):
    """Pass 3: adds each mini-batch's `d(embeddings)/d(weights)ᵀ · cached_grad` to `gradients`.

    Args:
        encode: callable, tokenised features -> float32 embeddings; the same
            calls, in the same order, as in pass 1.
        features: dict of `(batch, length)` tensors.
        size: int. Rows per call.
        cached_grad: float32 `(batch, dim)`, dLoss/dEmbeddings from pass 2.
        weights: list of variables.
        gradients: list of float32 tensors, one per weight, to add to.
        embeddings: float32 `(batch, dim)`, pass 1's embeddings.

    Returns:
        `(gradients, replay_error)`: the sums, and the largest absolute
        difference between the recomputed embeddings and pass 1's.
    """
    count, mini_batch = mini_batches(features, size)

    def body(i, accumulated, replay_error):
        part, (start, stop) = mini_batch(i)
        with tf.GradientTape() as tape:
            recomputed = encode(part)
        grads = tape.gradient(recomputed, weights, output_gradients=cached_grad[start:stop])
        error = tf.maximum(replay_error, tf.reduce_max(tf.abs(recomputed - embeddings[start:stop])))
        return i + 1, [a + g for a, g in zip(accumulated, _dense(grads, weights), strict=True)], error

    loop_vars = (tf.constant(0), list(gradients), tf.constant(0.0))
    _, gradients, replay_error = tf.while_loop(lambda i, *_: i < count, body, loop_vars, parallel_iterations=1)
    return gradients, replay_error


@keras.saving.register_keras_serializable(package="sbert_keras")
class CachedContrastiveSiamese(ContrastiveSiamese):
    """`ContrastiveSiamese` trained with GradCache: big batches, small memory.

    Same inputs, outputs, loss and gradients as `ContrastiveSiamese`; only
    `train_step` differs (see the module docstring): the encoder runs on at
    most `mini_batch_size` rows of one role at a time, so the batch size is
    limited by the `(batch, batch * k)` similarity matrix, not by the
    encoder's activations. `predict` and `evaluate` run the plain graph.

    Args:
        encoder: the shared `SentenceEncoder`.
        mini_batch_size: int. Rows per encoder pass (32, as in
            sentence-transformers); any batch size works, the last
            mini-batch may be smaller.
        symmetric: bool. `compile()`'s default loss is
            `SymmetricInBatchNegativesLoss` (anchor -> positive and
            positive -> anchor) instead of `InBatchNegativesLoss`.
        hard_negatives: bool. Take a third input of hard negatives.
        scale: float. Inverse temperature of the softmax (20).
        **kwargs: `ContrastiveSiamese` arguments (e.g. `matryoshka_dims`).

    Example:
    ```python
    model = CachedContrastiveSiamese(encoder, mini_batch_size=32, symmetric=True)
    model.compile()  # SymmetricInBatchNegativesLoss(scale=20), Adam(2e-5)
    model.fit((anchors, positives), batch_size=512)
    ```
    """

    def __init__(
        self,
        encoder,
        mini_batch_size=DEFAULT_MINI_BATCH_SIZE,
        symmetric=False,
        hard_negatives=False,
        scale=IN_BATCH_SCALE,
        **kwargs,
    ):
        # === Config === (before the build: `Task.__init__` compiles with `default_loss()`)
        self.mini_batch_size = check_mini_batch_size(mini_batch_size)
        self.symmetric = bool(symmetric)
        super().__init__(encoder, hard_negatives=hard_negatives, scale=scale, **kwargs)

    def default_loss(self):
        if self.symmetric:
            return SymmetricInBatchNegativesLoss(scale=self.scale)
        return super().default_loss()

    def compile(self, optimizer="auto", loss="auto", metrics="auto", jit_compile=False, **kwargs):
        """`ContrastiveSiamese.compile`, without XLA (uneven mini-batches have dynamic shapes)."""
        if jit_compile not in (False, "auto"):
            raise ValueError(
                "CachedContrastiveSiamese cannot use `jit_compile=True`: its mini-batch loop slices "
                "the batch at run time, which XLA cannot compile. Pass `jit_compile=False`."
            )
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, jit_compile=False, **kwargs)

    # === Training ===

    def batch_gradients(self, x, y, sample_weight):
        """TensorFlow and PyTorch: the checked step's `(loss, y_pred, gradients)`, by GradCache."""
        return self.cached_gradients(x, y, sample_weight)

    def stateless_batch_gradients(self, state, x, y, sample_weight):
        """JAX: the checked step's gradients by GradCache, from `state`'s values (`cached_steps`)."""
        return cached_steps.jax_cached_gradients(self, state, x, y, sample_weight)

    def tracked_loss(self, loss):
        return loss

    def cached_gradients(self, x, y=None, sample_weight=None):
        """The loss and the gradients of every trainable weight, by GradCache.

        Args:
            x: dict `{f"{role}_{name}": tensor}`, the tokenised batch (the
                output of the model's preprocessor).
            y: the (ignored) targets, or None.
            sample_weight: optional `(batch,)` weights of the loss.

        Returns:
            `(loss, y_pred, gradients)`: the float32 loss (unscaled), the
            whole batch's outputs, and one gradient per
            `self.trainable_weights` (of the loss scaled by
            `optimizer.scale_loss`, as `apply_gradients` expects).
        """
        if keras.backend.backend() == "torch":
            return cached_steps.torch_cached_gradients(self, x, y, sample_weight)
        if keras.backend.backend() == "jax":
            state = [[v.value for v in variables] for variables in self._jax_state_variables()]
            return cached_steps.jax_cached_gradients(self, state, x, y, sample_weight)[:3]
        roles = self.active_roles
        names = list(self.encoder.input)
        features = {role: {name: x[f"{role}_{name}"] for name in names} for role in roles}
        # Pass 1 (no tape), after saving the dropout seeds it consumes.
        state = self.encoder.non_trainable_variables
        saved = [tf.identity(v.value) for v in state]
        embeddings = [embed_in_mini_batches(self._encode, features[role], self.mini_batch_size) for role in roles]
        # Pass 2: the loss of the whole batch and its gradient w.r.t. the embeddings.
        weights = self.trainable_weights
        with tf.GradientTape() as tape:
            tape.watch(embeddings)
            y_pred = self._outputs_from_embeddings(dict(zip(roles, embeddings, strict=True)))
            loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)
            scaled = loss if self.optimizer is None else self.optimizer.scale_loss(loss)
        # Also w.r.t. the weights: a regulariser or a head weight's direct part (usually zeros).
        grads = tape.gradient(scaled, embeddings + weights)
        cached, gradients = grads[: len(roles)], _dense(grads[len(roles) :], weights)
        # Pass 3: the same mini-batches with the same seeds, now under a tape.
        self._restore_state(state, saved)
        for role, embedding, cached_grad in zip(roles, embeddings, cached, strict=True):
            gradients, replay_error = backward_in_mini_batches(
                self._encode, features[role], self.mini_batch_size, cached_grad, weights, gradients, embedding
            )
            tf.debugging.assert_less_equal(
                replay_error,
                REPLAY_TOLERANCE * (tf.reduce_max(tf.abs(embedding)) + 1e-6),
                message=f"CachedContrastiveSiamese: the second pass over the {role!r} mini-batches gave other "
                "embeddings than the first, so the cached gradients do not apply. The encoder has randomness "
                "outside Keras `SeedGenerator`s (or state outside its non-trainable variables); "
                "train it with `ContrastiveSiamese` instead.",
            )
        return loss, y_pred, gradients

    def _restore_state(self, state, saved):
        """Puts the encoder's non-trainable variables (dropout seeds) back to `saved`."""
        for variable, value in zip(state, saved, strict=True):
            variable.assign(value)

    def _encode(self, features):
        return ops.cast(self.encoder(features, training=True), "float32")

    def _jax_state_variables(self):
        """The variables of Keras' JAX train state, in its order."""
        optimizer = [] if self.optimizer is None else self.optimizer.variables
        return self.trainable_variables, self.non_trainable_variables, optimizer, self.metrics_variables

    def _outputs_from_embeddings(self, embeddings):
        """The model's outputs from `{role: embedding}`, as its functional graph computes them."""
        if self.prefixes is None:
            return self.head(embeddings)
        prefixes = {role: self.prefixes(embedding) for role, embedding in embeddings.items()}
        heads = [self.head({role: p[i] for role, p in prefixes.items()}) for i in range(len(self.matryoshka_dims))]
        return ops.stack(heads, axis=1)

    # === Config ===

    def get_config(self):
        return {**super().get_config(), "mini_batch_size": self.mini_batch_size, "symmetric": self.symmetric}
