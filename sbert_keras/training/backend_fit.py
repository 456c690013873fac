"""What a training run does differently off TensorFlow: `fit` on host batches, and no `tf.distribute`.

On TensorFlow, `train_objective` fits the tf.data pipeline through the
model's own `fit` (KerasHub's `Task.fit` with the checks of
`fit_checks.CheckedTraining`) and may run under a multi-worker strategy. On
JAX and PyTorch the batches are `host_pipelines.HostBatches`, already
token ids, which KerasHub's `Task.fit` would wrap in a tf.data (or grain)
pipeline: they go to Keras' `fit` itself. Multi-worker training stays a
TensorFlow feature (`tf.distribute`): a strategy on another backend is
refused in one line.
"""

import functools

import keras

from sbert_keras.training.fit_checks import FitPosition
from sbert_keras.utils import backends
from sbert_keras.utils.backends import tensorflow as tf


def has_strategy():
    """Whether a `tf.distribute` strategy is in scope (never on JAX or PyTorch: multi-worker runs on TensorFlow)."""
    return backends.uses_tensorflow() and tf.distribute.has_strategy()


def fit_batches(model, batches, callbacks=(), **kwargs):
    """`model.fit(batches, shuffle=False)`: a tf.data dataset on TensorFlow, `host_pipelines.HostBatches` else.

    KerasHub's `Task.fit` builds a tf.data (or grain) pipeline around what
    it is given; the host batches are already token ids, so on JAX and
    PyTorch they go to Keras' `fit` itself, with the position callback the
    checked train step names a refused step by.

    Args:
        model: the compiled siamese (or single-text) model.
        batches: what `pipelines.siamese_dataset` returned (or a part of it).
        callbacks: Keras callbacks.
        **kwargs: `fit`'s other arguments (`epochs`, `steps_per_epoch`, ...).

    Example:
    ```python
    history = fit_batches(model, siamese_dataset(...), epochs=1, verbose=0)
    ```
    """
    if backends.uses_tensorflow():
        return model.fit(batches, callbacks=list(callbacks), shuffle=False, **kwargs)
    model._fit_position = FitPosition()
    return keras.Model.fit(model, batches, callbacks=[model._fit_position, *callbacks], shuffle=False, **kwargs)


def refuse_strategy_off_tensorflow(train_fn):
    """Decorator: a `strategy=` other than None needs Keras' TensorFlow backend (a one-line `TensorFlowRequired`).

    Args:
        train_fn: a function taking `strategy=` (`distributed.under_strategy`'s).
    """

    @functools.wraps(train_fn)
    def wrapped(*args, strategy=None, **kwargs):
        if strategy is not None:
            backends.require_tensorflow("multi-worker training (`strategy=`)")
        return train_fn(*args, strategy=strategy, **kwargs)

    return wrapped
