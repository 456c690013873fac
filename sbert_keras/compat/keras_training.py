"""The private parts of Keras' `Model.fit` machinery that training reads or writes.

Why this exists: a few things that training needs have no public Keras API.
Resuming a run must tell the next `fit` which epoch to start from (Keras'
own `BackupAndRestore` writes `Trainer._initial_epoch`); one-replica-per-worker
training must forget the strategy a model was built under
(keras-team/keras#20329); a custom `train_step` updates the running "loss"
of `fit`'s logs (`Trainer._loss_tracker`) and computes the loss through
`Trainer._compute_loss`, as Keras' own TensorFlow `train_step` does, and
unscales it as Keras does under a distribution strategy. Keras' TensorFlow
`fit` builds the optimizer and the compiled metrics before the first trace
only under a strategy (`Trainer._symbolic_build`); without one the first
trace creates them, and `tf.function` then traces the step a second time. A subclass of
`keras.callbacks.BackupAndRestore` reuses its step counting
(`_should_save_on_batch`, `_last_batch_seen`). Each function below
does one of these and was checked against **Keras 3.15.1**
(`CHECKED_KERAS_VERSION`). When an upgrade removes an attribute, it raises
an `AttributeError` naming it and that version, and the tests of training
(`tests/training/test_trainer.py`, `tests/training/test_cached_siamese.py`, `tests/training/test_distributed.py`)
fail, instead of a write that Keras no longer reads passing silently.

Example:
```python
set_initial_epoch(model, 3)  # the next `fit` starts at epoch 3
set_initial_epoch(model, None)  # and the one after at its own `initial_epoch`
```
"""

import keras
from keras.src.losses.loss import unscale_loss_for_distribution as _unscale_loss_for_distribution

from sbert_keras.utils.backends import tensorflow as tf

CHECKED_KERAS_VERSION = "3.15.1"


def _require(model, name):
    """Raises an `AttributeError` naming `name` and the checked version when `model` lacks it."""
    if not hasattr(model, name):
        raise AttributeError(
            f"{type(model).__name__} has no attribute `{name}`: Keras {keras.__version__} changed a private "
            f"part of `Model.fit` that sbert_keras uses (checked against Keras {CHECKED_KERAS_VERSION})."
        )


def set_initial_epoch(model, epoch):
    """Sets the epoch that `model`'s next `fit` starts from, as Keras' `BackupAndRestore` does.

    Writes Keras' private `Trainer._initial_epoch`, which `fit` reads in
    place of its `initial_epoch` argument (checked against Keras 3.15.1).

    Args:
        model: keras.Model. The model being trained.
        epoch: int or None. The epoch to resume at; None: `fit`'s own `initial_epoch` again.
    """
    _require(model, "_initial_epoch")
    model._initial_epoch = epoch


def forget_distribute_strategy(model):
    """Makes `model`'s `fit` take its strategy from the scope it runs in (keras-team/keras#20329).

    Writes Keras' private TensorFlow `Trainer._distribute_strategy` (the
    strategy the model was built under) to None, as for a model built
    outside any scope (checked against Keras 3.15.1).

    Args:
        model: keras.Model. A model built under a multi-worker strategy's scope.
    """
    _require(model, "_distribute_strategy")
    model._distribute_strategy = None


def build_before_first_trace(model, train_function):
    """`train_function`, building `model`'s optimizer, compiled loss and metrics on its first call (TensorFlow).

    Keras' TensorFlow `fit` calls its private `Trainer._symbolic_build` only
    when the model has a distribution strategy
    (`_maybe_symbolic_build`, checked against Keras 3.15.1): otherwise the
    first trace of the train function creates those variables, and
    `tf.function` traces the whole step once more without them. Building
    them first from the batch's `element_spec`, as Keras does under a
    strategy, leaves one trace. Under a strategy (the model's, or the scope
    `fit` runs in: its batches are per-replica) nothing changes, and on other
    backends (Keras builds them before the step) `train_function` is
    returned as it is.

    Args:
        model: keras.Model. A compiled model in `fit`.
        train_function: what Keras' `make_train_function` made; on
            TensorFlow, called with the `tf.data` iterator (`fit`), or with
            a generator of one batch (`train_on_batch`), which has no
            `element_spec`: there Keras' first trace builds them.
    """
    if keras.backend.backend() != "tensorflow":
        return train_function
    _require(model, "_distribute_strategy")
    _require(model, "_symbolic_build")
    pending = True

    def built_first(iterator, *args):
        nonlocal pending
        spec = getattr(iterator, "element_spec", None)
        if pending and spec is not None and model._distribute_strategy is None and not tf.distribute.has_strategy():
            model._symbolic_build(data_batch=spec)
        pending = False
        return train_function(iterator, *args)

    return built_first


def loss_tracker(model):
    """The `keras.metrics.Mean` behind the "loss" of `fit`'s logs (None before `compile`).

    Keras' private `Trainer._loss_tracker` (checked against Keras 3.15.1).

    Args:
        model: keras.Model. A Keras model.
    """
    _require(model, "_loss_tracker")
    return model._loss_tracker


def compute_loss(model, x, y, y_pred, sample_weight=None, training=True):
    """`model.compute_loss(...)` as Keras' own `train_step` calls it.

    Keras' private `Trainer._compute_loss`, which also serves a
    `compute_loss` override without the `training` argument (checked
    against Keras 3.15.1).

    Args:
        model: keras.Model. A compiled model.
        x: the inputs of the batch.
        y: the targets, or None.
        y_pred: the model's outputs.
        sample_weight: the sample weights, or None.
        training: bool. Whether the loss is for a training step.
    """
    _require(model, "_compute_loss")
    return model._compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=training)


def backup_saves_after_batch(callback, batch):
    """Whether a `keras.callbacks.BackupAndRestore` saves after `batch`, counting it as seen.

    Keras' private `BackupAndRestore._should_save_on_batch`, which counts
    the batches since the last save against `save_freq` (checked against
    Keras 3.15.1).

    Args:
        callback: keras.callbacks.BackupAndRestore. The backup callback.
        batch: int. The index of the batch just done, in its epoch.
    """
    _require(callback, "_should_save_on_batch")
    return callback._should_save_on_batch(batch)


def restart_backup_batch_count(callback):
    """Tells a `keras.callbacks.BackupAndRestore` that a new epoch starts at batch 0.

    Writes Keras' private `BackupAndRestore._last_batch_seen` (checked
    against Keras 3.15.1).

    Args:
        callback: keras.callbacks.BackupAndRestore. The backup callback.
    """
    _require(callback, "_last_batch_seen")
    callback._last_batch_seen = 0


def unscale_loss_for_distribution(loss):
    """`loss` multiplied back by the number of replicas, as Keras logs it under a strategy.

    Keras' private `keras.src.losses.loss.unscale_loss_for_distribution`
    (checked against Keras 3.15.1).

    Args:
        loss: a scalar tensor. A loss that Keras scaled by `1 / num_replicas`.
    """
    return _unscale_loss_for_distribution(loss)


def set_jax_state(model, state):
    """Makes Keras' JAX `fit` write `state` back to `model`'s variables when it ends, also on an error.

    Writes Keras' private JAX `Trainer._jax_state` (the step's output that
    `fit`'s `finally` assigns to the variables) and `_jax_state_synced`
    (checked against Keras 3.15.1).

    Args:
        model: keras.Model. A model in a JAX `fit`.
        state: `(trainable, non_trainable, optimizer, metrics)` variable values.
    """
    _require(model, "_jax_state")
    names = ("trainable_variables", "non_trainable_variables", "optimizer_variables", "metrics_variables")
    model._jax_state = dict(zip(names, state, strict=True))
    model._jax_state_synced = False
