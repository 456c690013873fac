"""What each replica computes under a `tf.distribute` strategy: gathered negatives and weighted losses.

Keras runs `fit` on every replica and sums the gradients; these pieces make
a replica's step add up to the one-process step on the global batch:

- `ReplicaGather` / `gather_across_replicas`: the candidates of in-batch
  negatives gathered from every replica, so each anchor scores against the
  global batch (sentence-transformers' `gather_across_devices`). Keras has
  no cross-replica layer; `tf.distribute.ReplicaContext.all_gather` does the
  work and its gradient sends each slice's gradient, summed over replicas,
  back to the replica that computed it.
- `ReplicaScaledLoss` / `replica_batch_weight`: a loss scaled as Keras
  scales per-example losses, with each replica's rows weighted so that a
  global batch that splits unevenly still trains on the one-process mean.

Without a strategy every piece is the identity. `sbert_keras.training.distributed`
builds the strategy and runs `fit` under it.
"""

import keras
from keras import ops

from sbert_keras.losses.base import ImpliedTargetLoss
from sbert_keras.utils import backends
from sbert_keras.utils.backends import tensorflow as tf


def _replica_context():
    """The `tf.distribute` replica context, or None: JAX and PyTorch train one replica per process here."""
    if not backends.uses_tensorflow():
        return None
    return tf.distribute.get_replica_context()


def gather_across_replicas(x):
    """`x` (rows on axis 0) from every replica, this replica's rows first.

    Without a strategy, or outside a replica context, returns `x`. Local
    batches may differ in size (the last one of an epoch). The gradient of
    the gathered rows flows back, summed over replicas, to the replica that
    computed them.
    """
    context = _replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return x
    gathered = context.all_gather(x, axis=0)
    sizes = context.all_gather(tf.shape(x)[:1], axis=0)
    offset = tf.reduce_sum(sizes[: context.replica_id_in_sync_group])
    return tf.roll(gathered, shift=-offset, axis=0)


def replica_batch_weight(rows):
    """`rows * replicas / global rows`: the weight that makes replicas' mean losses one global mean.

    Keras averages a loss over each replica's rows, scales it by
    `1 / replicas` and sums the gradients, which weighs every replica
    alike. When a global batch does not split evenly (a batch closed short:
    the last of a length bucket, or a no-duplicates batch), rows on the
    smaller slice would weigh more than in one process. Multiplying the
    gradient of each replica's per-row losses by this weight gives the
    gradient of `sum(all rows) / global rows`, the one-process mean. 1
    without a strategy or outside a replica context; 0 for a replica with
    no rows (no NaN).

    Args:
        rows: int scalar tensor, this replica's batch size.
    """
    context = _replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return ops.convert_to_tensor(1.0, "float32")
    rows = tf.cast(rows, "float32")
    total = context.all_reduce(tf.distribute.ReduceOp.SUM, rows)
    return tf.math.divide_no_nan(rows * float(context.num_replicas_in_sync), total)


@keras.saving.register_keras_serializable(package="sbert_keras")
class ReplicaGather(keras.layers.Layer):
    """Gathers its input's rows from every replica, local rows first.

    Under a `tf.distribute` strategy each replica sees `(global_batch, ...)`
    with its own `(local_batch, ...)` rows at the top; elsewhere it is the
    identity. Used by `ContrastiveSiamese(gather_across_replicas=True)` on
    the candidates, so row `i`'s positive stays column `i`.

    Example:
    ```python
    candidates = ReplicaGather()(positives)  # (global_batch, dim) in fit
    ```
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        if not backends.uses_tensorflow():
            raise NotImplementedError(
                "gather_across_replicas gathers rows across tf.distribute replicas and needs Keras' TensorFlow "
                f"backend; it is {backends.keras_backend()!r}, where one process sees the whole batch: "
                "pass gather_across_replicas=False."
            )

    def call(self, x):
        return gather_across_replicas(x)

    def compute_output_shape(self, input_shape):
        return (None, *input_shape[1:])

    def compute_output_spec(self, x):
        return keras.KerasTensor((None, *x.shape[1:]), dtype=x.dtype)


@keras.saving.register_keras_serializable(package="sbert_keras")
class ReplicaScaledLoss(ImpliedTargetLoss):
    """A loss Keras divides by the replica count even when it is one number per batch.

    Under a `tf.distribute` strategy Keras scales each replica's loss by
    `1 / replicas` (the gradients are then summed), but only when the loss
    returns one value per example: a loss that returns one value per batch
    (`MeanSquaredError` on `RegressionSiamese`'s `(batch,)` cosines,
    `CoSENTLoss`, `AnglELoss`) is left unscaled, so its gradient is
    `replicas` times too large (Keras 3.15). This wrapper spreads such a
    value over the batch's rows, so Keras scales it like any other. The
    gradient of every row is then weighted by `replica_batch_weight`, so a
    global batch that splits unevenly across replicas still trains on the
    one-process mean. The value itself is not weighted: `prepare_model`
    logs it summed over every replica's rows. Without a strategy it equals
    the wrapped loss. Like the in-batch losses, it takes `y_true=None`.

    Args:
        loss: a Keras loss (object, name or config) whose `call` returns
            per-example values or one unreduced value per batch; not a
            `MatryoshkaLoss` (wrap the loss inside it instead).

    Example:
    ```python
    model.compile(loss=ReplicaScaledLoss(keras.losses.MeanSquaredError()))
    ```
    """

    def __init__(self, loss, name=None, reduction="sum_over_batch_size", dtype=None):
        inner = keras.losses.get(loss)
        if inner is None or type(inner).__name__ == "MatryoshkaLoss":
            raise ValueError(
                f"`loss` must be a Keras loss other than MatryoshkaLoss (wrap the loss inside it). Received {loss!r}."
            )
        super().__init__(name=name or f"replica_scaled_{inner.name}", reduction=reduction, dtype=dtype)
        self.loss = inner

    def call(self, y_true, y_pred):
        values = ops.cast(self.loss.call(y_true, y_pred), "float32")
        if len(values.shape) == 0:
            values = ops.broadcast_to(values, ops.shape(y_pred)[:1])
        weight = replica_batch_weight(ops.shape(values)[0])
        # Weighted gradient, unweighted value (logged over all rows by `prepare_model`).
        return values * weight + ops.stop_gradient(values * (1.0 - weight))

    def get_config(self):
        return {**super().get_config(), "loss": keras.losses.serialize(self.loss)}

    @classmethod
    def from_config(cls, config):
        return cls(**{**config, "loss": keras.losses.deserialize(config["loss"])})
