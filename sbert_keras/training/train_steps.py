"""One checked train step per Keras backend: a batch's gradients, the step's check, the update if it passes.

Keras' `Trainer` has one `train_step` per backend
(`keras/src/backend/{tensorflow,jax,torch}/trainer.py`): TensorFlow tapes
the forward pass, PyTorch calls `.backward()` on the loss, and JAX is
stateless, `train_step(state, data) -> (logs, state)` with
`jax.value_and_grad` over `stateless_call`. The checked step of
`fit_checks.CheckedTraining` needs its own gradients (to refuse a step whose
loss, gradients or labels are bad before the optimizer sees them), so it
follows the same three shapes here, behind one interface:

- `batch_gradients(model, x, y, sample_weight)` on TensorFlow and PyTorch:
  `(loss, y_pred, gradients)` of the trainable weights, as Keras' step
  computes them (the loss scaled by `optimizer.scale_loss`);
- `stateless_gradients(model, state, x, y, sample_weight)` on JAX: the same
  from the variables' values, with the updated non-trainable and metrics
  variables;
- `step_check` (in `keras.ops`, all-reduced under a `tf.distribute`
  strategy) and `apply_if`/`stateless_apply_if`, which apply the step only
  when it passed.

Everything private of Keras that these read (`Trainer._compute_loss`,
`_loss_tracker`) goes through `compat.keras_training`. A model overrides
`batch_gradients`/`stateless_batch_gradients` to compute its gradients
another way (`cached_siamese`: GradCache).

Example:
```python
loss, y_pred, gradients = batch_gradients(model, x, y, None)  # TensorFlow or PyTorch
ok, logs = step_check(loss, gradients, y, None, check_gradients=True)
apply_if(ok, model.optimizer, gradients, model.trainable_weights)
```
"""

import keras
from keras import ops

from sbert_keras.compat import keras_training
from sbert_keras.utils import backends
from sbert_keras.utils.backends import tensorflow as tf

OK, BAD_LABELS, NON_FINITE_LOSS, NON_FINITE_GRADIENTS = 0, 1, 2, 3


def _has_strategy():
    """Whether a `tf.distribute` strategy is in scope (never on JAX or PyTorch)."""
    return backends.uses_tensorflow() and tf.distribute.has_strategy()


def batch_size(x):
    """The rows of a batch: the first axis of its first input."""
    return ops.shape(next(v for v in keras.tree.flatten(x) if v is not None))[0]


def batch_gradients(model, x, y, sample_weight):
    """`(loss, y_pred, gradients)` of a batch on TensorFlow or PyTorch, as Keras' own `train_step` gets them.

    Args:
        model: a compiled Keras model.
        x, y, sample_weight: the batch.

    Returns:
        The unscaled loss, the outputs and one gradient of the scaled loss
        per `model.trainable_weights` (None or `IndexedSlices` on TensorFlow,
        zeros for an unused weight on PyTorch).
    """
    if keras.backend.backend() == "torch":
        y_pred = model(x, training=True)
        model.zero_grad()
        loss = keras_training.compute_loss(model, x, y, y_pred, sample_weight, training=True)
        scaled = loss if model.optimizer is None else model.optimizer.scale_loss(loss)
        scaled.backward()
        return loss, y_pred, [v.value.grad for v in model.trainable_weights]
    with tf.GradientTape() as tape:
        y_pred = model(x, training=True)
        loss = keras_training.compute_loss(model, x, y, y_pred, sample_weight, training=True)
        scaled = loss if model.optimizer is None else model.optimizer.scale_loss(loss)
    return loss, y_pred, tape.gradient(scaled, model.trainable_weights)


def stateless_gradients(model, state, x, y, sample_weight):
    """JAX: `(loss, y_pred, gradients, non_trainable, metrics)` from `state`'s values, by `jax.value_and_grad`.

    Args:
        model: a compiled Keras model on JAX.
        state: `(trainable, non_trainable, optimizer, metrics)` variable values, as Keras' JAX `train_step` gets it.
        x, y, sample_weight: the batch.
    """
    import jax

    trainable, non_trainable, optimizer_variables, metrics = state
    grad_fn = jax.value_and_grad(model.compute_loss_and_updates, has_aux=True)
    (_, aux), gradients = grad_fn(
        trainable, non_trainable, metrics, x, y, sample_weight, training=True, optimizer_variables=optimizer_variables
    )
    loss, y_pred, non_trainable, metrics = aux
    return loss, y_pred, gradients, non_trainable, metrics


def step_check(loss, gradients, y, label_range, check_gradients):
    """`(ok, logs)`: whether a train step may be applied, and why not.

    Args:
        loss: the step's scalar loss (unscaled; under a strategy, the
            replica's loss as Keras logs it, not scaled by the replicas).
        gradients: list of gradients (tensors, `IndexedSlices` or None).
        y: the batch's labels or None.
        label_range: a `fit_checks.LabelRange` or None.
        check_gradients: bool. Also require finite gradients.

    Under a `tf.distribute` strategy the outcome is all-reduced, so every
    replica applies the step or none does (the label span logged is the
    replica's own).
    """
    label_ok = ops.convert_to_tensor(True)
    label_min = label_max = ops.convert_to_tensor(0.0, "float32")
    if label_range is not None and y is not None:
        labels = ops.cast(y, "float32")
        label_ok = ops.all(label_range.ok(labels))
        label_min, label_max = ops.min(labels), ops.max(labels)
    loss_ok = ops.all(ops.isfinite(loss))
    grads_ok = ops.convert_to_tensor(True)
    if check_gradients:
        values = [_values(g) for g in gradients if g is not None]
        grads_ok = ops.all(ops.stack([ops.all(ops.isfinite(v)) for v in values])) if values else grads_ok
    failures = ops.cast(ops.stack([~label_ok, ~loss_ok, ~grads_ok]), "float32")
    if _has_strategy():  # any replica's failure refuses the step everywhere
        failures = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, failures)
    code = ops.where(
        failures[0] > 0,
        BAD_LABELS,
        ops.where(failures[1] > 0, NON_FINITE_LOSS, ops.where(failures[2] > 0, NON_FINITE_GRADIENTS, OK)),
    )
    logs = {"step_check": code, "step_loss": ops.cast(loss, "float32")}
    logs.update({"step_label_min": label_min, "step_label_max": label_max})
    return ops.equal(code, OK), logs


def _values(gradient):
    """A gradient's values (an `IndexedSlices`' rows on TensorFlow)."""
    if backends.tensorflow_loaded() and isinstance(gradient, tf.IndexedSlices):
        return gradient.values
    return gradient


def apply_if(ok, optimizer, gradients, weights):
    """`optimizer.apply_gradients(zip(gradients, weights))` when `ok`, else nothing (TensorFlow, PyTorch).

    Under a strategy that merge-calls (`apply_gradients` does), the condition
    runs in cross-replica context, as in Keras' `LossScaleOptimizer`. On
    PyTorch the update runs without autograd, as in Keras' torch trainer.
    """

    def apply(grads):
        optimizer.apply_gradients(zip(grads, weights))

    if keras.backend.backend() == "torch":
        import torch

        with torch.no_grad():
            if bool(ok):
                apply(gradients)
    elif _has_strategy() and not tf.__internal__.distribute.strategy_supports_no_merge_call():

        def cross_replica(distribution, ok, grads):
            ok = distribution.experimental_local_results(ok)[0]
            ops.cond(ok, lambda: distribution.extended.call_for_each_replica(apply, args=(grads,)), lambda: None)

        tf.distribute.get_replica_context().merge_call(cross_replica, args=(ok, gradients))
    else:
        ops.cond(ok, lambda: apply(gradients), lambda: None)


def stateless_apply_if(ok, optimizer, optimizer_variables, gradients, trainable):
    """JAX: `(trainable, optimizer_variables)` after the optimizer's step when `ok`, else as they were."""
    new_trainable, new_optimizer = optimizer.stateless_apply(optimizer_variables, gradients, trainable)
    keep = lambda new, old: [ops.where(ok, n, o) for n, o in zip(new, old, strict=True)]  # noqa: E731
    return keep(new_trainable, trainable), keep(new_optimizer, optimizer_variables)


def stateless_metrics(model, metrics, tracked_loss, x, y, y_pred, sample_weight):
    """JAX: `(logs, metrics)`: the running loss and the compiled metrics updated from `metrics`' values."""
    mapping = list(zip(model.metrics_variables, metrics, strict=True))
    with keras.StatelessScope(state_mapping=mapping) as scope:
        keras_training.loss_tracker(model).update_state(tracked_loss, sample_weight=batch_size(x))
        logs = model.compute_metrics(x, y, y_pred, sample_weight)
    updated = [scope.get_current_value(v) for v in model.metrics_variables]
    return logs, [v.value if new is None else new for v, new in zip(model.metrics_variables, updated, strict=True)]
