"""Checked training for the siamese models: bad inputs refused, a bad step never applied.

Keras trains on whatever it is given. NaN labels turn every weight into NaN
(`keras.callbacks.TerminateOnNaN` stops one step too late and names no
batch), raw 0-5 STS scores train a cosine towards values it cannot reach,
and an unbatched dataset or labels of the wrong length fail deep inside the
graph. `CheckedTraining`, a mixin of every `siamese.SiameseModel`, adds:

- `fit` checks its arrays before Keras sees them (`check_fit_inputs`): one row count for every text column,
  the labels and weights, a batched `tf.data.Dataset`, labels inside `label_range()` (the first bad one named);
- each train step applies its gradients only when the loss is finite, the gradients are finite (left to
  `LossScaleOptimizer` under mixed precision, which skips such steps and lowers its scale) and the labels are
  in range; otherwise the weights and optimizer state stay as they were and `fit` raises `NonFiniteLossError`
  or `LabelRangeError` naming the epoch and batch. The check costs one `isfinite` reduction per gradient.

A skipped step also logs a NaN loss: with `steps_per_execution > 1` a bad step is still caught.

Example:
```python
model = RegressionSiamese(encoder)
model.compile()
model.fit((a, b), scores)  # LabelRangeError: ... `sbert_keras.data.examples.scale_sts_score` ...
```
"""

import dataclasses
import functools
import math

import keras
import numpy as np
from keras import ops

from sbert_keras.compat import keras_training
from sbert_keras.training import train_steps
from sbert_keras.training.fit_inputs import array_batches
from sbert_keras.training.fit_inputs import check_batched
from sbert_keras.training.fit_inputs import check_label_array
from sbert_keras.training.fit_inputs import check_text_columns
from sbert_keras.training.fit_inputs import on_host
from sbert_keras.training.fit_inputs import rows
from sbert_keras.training.train_steps import BAD_LABELS
from sbert_keras.training.train_steps import NON_FINITE_GRADIENTS
from sbert_keras.training.train_steps import NON_FINITE_LOSS
from sbert_keras.training.train_steps import OK
from sbert_keras.utils import backends
from sbert_keras.utils.backends import tensorflow as tf


def is_dataset(x):
    """Whether `x` is a `tf.data.Dataset` (never imports TensorFlow)."""
    return backends.tensorflow_loaded() and isinstance(x, tf.data.Dataset)


# Logs of a train step read and removed by the checked train function.
STEP_LOGS = ("step_check", "step_loss", "step_label_min", "step_label_max")


class NonFiniteLossError(FloatingPointError):
    """A train step's loss or gradients were NaN or infinite; the step was not applied."""


def check_finite_weights(model, probe, step):
    """Raises `NonFiniteLossError` naming `step` when a weight, or the encoder's output on `probe`, is not finite.

    The train step refuses a step whose loss or gradients are not finite,
    but the step that makes the weights unusable (too large for a forward
    pass) has a finite loss; `train_objective` runs this check before each
    backup save and at the end of a run.

    Args:
        model: the siamese model being trained (its `encoder` runs on `probe`).
        probe: the encoder's input features for a few texts (`encoder.preprocessor(texts)`).
        step: int. The training steps done, for the message.
    """
    bad = next((v.path for v in model.trainable_variables if not np.all(np.isfinite(v.numpy()))), None)
    what = f"the weight {bad} is" if bad else None
    output = None if bad else ops.convert_to_numpy(ops.cast(model.encoder(probe, training=False), "float32"))
    if output is not None and not np.all(np.isfinite(output)):
        what = "the encoder's output on two training texts is"
    if what:
        raise NonFiniteLossError(
            f"Training stopped after step {step}: {what} not finite (NaN or infinite), so the model is not "
            "saved from this state and any backup keeps the last good one; lower the learning rate."
        )


class LabelRangeError(ValueError):
    """Labels outside the range the model's loss is meant for."""


@dataclasses.dataclass(frozen=True)
class LabelRange:
    """The labels a loss accepts: finite, in `[low, high]`, integers if `integer`.

    Args:
        what: str. The labels in words, e.g. "cosine targets in [-1, 1]".
        low: float. Smallest allowed label.
        high: float. Largest allowed label.
        integer: bool. Labels must be whole numbers (class ids).
        hint: str. How to fix labels out of range.
    """

    what: str
    low: float = -math.inf
    high: float = math.inf
    integer: bool = False
    hint: str = ""

    @property
    def safe(self):
        """An allowed label (`low`, or 0 when unbounded)."""
        return self.low if math.isfinite(self.low) else 0.0

    def ok(self, labels):
        """Elementwise: which of `labels` (array or tensor) are allowed."""
        y = ops.cast(labels, "float32")
        fits = ops.isfinite(y) & (y >= self.low) & (y <= self.high)
        return fits & (ops.round(y) == y) if self.integer else fits


def check_labels(labels, ok, needs, where):
    """Raises a `LabelRangeError` naming the first item whose label fails `ok`.

    Args:
        labels: array-like of labels.
        ok: callable, float64 array -> bool array of the allowed labels.
        needs: str. The allowed labels in words.
        where: str. Who needs them, e.g. "The regression objective".
    """
    labels = np.asarray(labels, dtype="float64")
    bad = np.flatnonzero(~np.asarray(ok(labels)).reshape(-1))
    if bad.size:
        i = int(bad[0])
        value = labels.reshape(-1)[i]
        raise LabelRangeError(
            f"{where} needs {needs}; item {i} (0-based) has label {value:g} ({bad.size} such item(s))."
        )


def check_fit_inputs(model, x, y=None, sample_weight=None, validation_data=None):
    """Checks what `fit` received against `model`, naming the bad argument.

    Args:
        model: a `CheckedTraining` model (its `active_roles`, `label_range()`).
        x: text columns (tuple/list in role order or dict) or a dataset.
        y: labels or None.
        sample_weight: per-row weights or None.
        validation_data: a dataset or a tuple `(x, y[, sample_weight])`, or None.

    Raises:
        ValueError: an unbatched dataset, arrays of different lengths, the
            wrong number of text columns, an empty column, a `None` text,
            labels not of shape `(n,)` (`fit_inputs`).
        TypeError: labels or texts of the wrong type.
        LabelRangeError: a label (of `y` or `validation_data`) outside
            `model.label_range()`.
    """
    if is_dataset(validation_data):
        check_batched(validation_data, "validation_data")
    elif isinstance(validation_data, (tuple, list)):
        vx, vy, vsw = keras.utils.unpack_x_y_sample_weight(tuple(validation_data))
        _check_arrays(model, vx, vy, vsw, ("validation_data[0]", "validation_data[1]", "validation_data[2]"))
    if is_dataset(x):
        check_batched(x, "x")
        return
    _check_arrays(model, x, y, sample_weight, ("x", "y", "sample_weight"))


def _check_arrays(model, x, y, sample_weight, names):
    """The checks of `check_fit_inputs` on one `(x, y, sample_weight)`, named by `names`."""
    spec = model.label_range()
    columns = check_text_columns(x, model.active_roles, names[0])
    if y is not None:
        check_label_array(y, names[1], one_per_row=spec is not None)
    columns.update({names[1]: y, names[2]: sample_weight})
    counts = {name: rows(value) for name, value in columns.items() if value is not None}
    counts = {name: count for name, count in counts.items() if count is not None}
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"`{name}` has {count}" for name, count in counts.items())
        raise ValueError(f"`fit` needs one row per example in every input; {listed} rows.")
    if y is not None and spec is not None:
        where = f"{type(model).__name__} (loss {loss_name(model.loss)})"
        try:
            check_labels(y, lambda labels: spec.ok(labels), spec.what, f"`{names[1]}`: {where}")
        except LabelRangeError as error:
            raise LabelRangeError(f"{error} {spec.hint}".strip()) from None


def inner_loss(loss):
    """The loss a wrapper (`MatryoshkaLoss`, `ReplicaScaledLoss`: `.loss`) applies; a name resolved by Keras."""
    loss = keras.losses.get(loss) if isinstance(loss, str) else loss
    while isinstance(loss, keras.losses.Loss) and callable(getattr(loss, "loss", None)):
        loss = loss.loss
    return loss


def loss_name(loss):
    """A loss's name for messages."""
    return loss if isinstance(loss, str) else getattr(loss, "name", getattr(loss, "__name__", type(loss).__name__))


class FitPosition(keras.callbacks.Callback):
    """Records the epoch and batch `fit` is at, for the checked train function's errors."""

    def __init__(self):
        super().__init__()
        self.async_safe = True  # begin hooks only: Keras calls them in order
        self.epoch = self.batch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        self.batch = batch

    def describe(self, steps):
        """'batch index B (0-based) of epoch E' (E as Keras' progress bar counts, from 1)."""
        batches = (
            f"batch index {self.batch}" if steps == 1 else f"one of batch indices {self.batch}-{self.batch + steps - 1}"
        )
        return f"{batches} (0-based, within the epoch) of epoch {self.epoch + 1} (Keras' 'Epoch {self.epoch + 1}/...')"


def raise_on_bad_step(model, logs, position):
    """Removes `STEP_LOGS` from a train function's `logs` and returns them; raises if the step was refused."""
    values = {key: float(ops.convert_to_numpy(logs.pop(key)).reshape(-1)[0]) for key in STEP_LOGS if key in logs}
    loss = logs.get("loss")
    if int(values.get("step_check", OK)) == OK and (loss is None or np.all(np.isfinite(np.asarray(loss)))):
        return values
    code = int(values.get("step_check", OK))
    where = position.describe(int(getattr(model, "steps_per_execution", 1) or 1))
    kept = "The step was not applied: the weights are those from before this batch."
    if code == BAD_LABELS:
        spec = model.label_range()
        span = f"[{values['step_label_min']:g}, {values['step_label_max']:g}]"
        raise LabelRangeError(
            f"Training stopped at {where}: {type(model).__name__} (loss {loss_name(model.loss)}) needs labels that "
            f"are {spec.what}; this batch's labels span {span}. {spec.hint} {kept}".replace("  ", " ")
        )
    cause = {
        NON_FINITE_GRADIENTS: f"the gradients are not finite (the loss is {values.get('step_loss', math.nan):g})",
        NON_FINITE_LOSS: f"the loss is not finite ({values.get('step_loss', math.nan):g})",
    }.get(code, "a loss or label check failed")
    raise NonFiniteLossError(
        f"Training stopped at {where}: {cause}. {kept} Look for NaN or infinite labels, inputs or sample "
        "weights in this batch, or lower the learning rate."
    )


class CheckedTraining:
    """Mixin for a Keras `Model`: checked `fit` inputs and train steps (see the module docstring).

    A model implements `label_range()` (None: no check) and calls
    `apply_checked_step` from its `train_step` instead of applying the
    gradients itself. After each train step, `last_step_loss` holds that
    step's own loss (Keras' logged `loss` is the epoch's running mean), for
    `step_log.StepLog`.
    """

    last_step_loss = None

    def label_range(self):
        """The `LabelRange` of the compiled loss, or None when unknown."""
        return None

    def fit(self, x=None, y=None, batch_size=None, sample_weight=None, validation_data=None, **kwargs):
        """Keras' `fit` (KerasHub's argument order), after `check_fit_inputs`, stopping at the first refused step."""
        check_fit_inputs(self, x, y, sample_weight, validation_data)
        host = self._host_preprocessor()
        if is_dataset(x) or isinstance(x, keras.utils.PyDataset):
            # A dataset comes batched and in its order: Keras' default `shuffle=True` would only warn.
            kwargs.setdefault("shuffle", False)
        elif x is not None and (host is not None or not self._on_keras_adapters()):
            # KerasHub batches arrays in their order (and Keras warns): shuffle them as Keras would.
            split = kwargs.pop("validation_split", None) if validation_data is None else None
            x, split_data = array_batches(x, y, sample_weight, batch_size, kwargs.pop("shuffle", True), split, host)
            y = sample_weight = batch_size = None
            validation_data = split_data if split_data is not None else validation_data
            kwargs["shuffle"] = False
        if host is not None and validation_data is not None:
            validation_data = on_host(host, *keras.utils.unpack_x_y_sample_weight(validation_data))
        self._fit_position = FitPosition()
        callbacks = kwargs.pop("callbacks", None)
        if isinstance(callbacks, keras.callbacks.CallbackList):
            callbacks.append(self._fit_position)
        else:
            callbacks = [self._fit_position, *(callbacks or [])]
        return self._keras_method("fit")(
            x,
            y,
            batch_size,
            sample_weight=sample_weight,
            validation_data=validation_data,
            callbacks=callbacks,
            **kwargs,
        )

    def evaluate(self, x=None, y=None, batch_size=None, **kwargs):
        """Keras' `evaluate`; on JAX and PyTorch texts are tokenised on the host, then Keras' own adapters run."""
        x, y, kwargs["sample_weight"] = on_host(self._host_preprocessor(), x, y, kwargs.get("sample_weight"))
        return self._keras_method("evaluate")(x, y, batch_size, **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        """Keras' `predict`; on JAX and PyTorch texts are tokenised on the host, then Keras' own adapters run."""
        return self._keras_method("predict")(on_host(self._host_preprocessor(), x)[0], batch_size, **kwargs)

    def _on_keras_adapters(self):
        """Whether `fit`, `evaluate` and `predict` take Keras' own data adapters: always off TensorFlow."""
        return not backends.uses_tensorflow()

    def _host_preprocessor(self):  # off TensorFlow, run on the host before Keras' adapters
        return None if backends.uses_tensorflow() else getattr(self, "preprocessor", None)

    def _keras_method(self, name):
        """KerasHub's `name` (it batches with `tf.data` or Grain), or Keras' own for token ids off TensorFlow."""
        return (
            functools.partial(getattr(keras.Model, name), self) if self._on_keras_adapters() else getattr(super(), name)
        )

    def make_train_function(self, force=False):
        if self.train_function is not None and not force:
            return self.train_function
        super().make_train_function(force)
        function = keras_training.build_before_first_trace(self, self.train_function)
        stateless = keras.backend.backend() == "jax"  # `(state, iterator) -> (logs, state)`

        def checked(*args):
            result = function(*args)
            logs = result[0] if stateless else result
            try:
                values = raise_on_bad_step(self, logs, getattr(self, "_fit_position", None) or FitPosition())
            except (LabelRangeError, NonFiniteLossError):
                if stateless:  # `fit` writes JAX's state back as it ends: the refused step's, not the one before
                    keras_training.set_jax_state(self, result[1])
                raise
            self.last_step_loss = values.get("step_loss")
            return result

        self.train_function = checked
        return checked

    def train_step(self, *args):
        """Keras' train step of the backend (`data`; on JAX `state, data`), applied only when its check passes."""
        *state, data = args
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        spec = self.label_range()
        # Labels out of range reach the loss as an allowed value (the step is refused anyway):
        # some kernels (sparse cross-entropy on CPU) raise on them before the check can name the batch.
        y_loss = y if spec is None or y is None else ops.where(spec.ok(y), y, ops.cast(spec.safe, y.dtype))
        if state:
            return self.stateless_checked_step(state[0], x, y, y_loss, sample_weight)
        loss, y_pred, gradients = self.batch_gradients(x, y_loss, sample_weight)
        tracked = self.tracked_loss(loss)
        return self.apply_checked_step(x, y, y_pred, sample_weight, loss, gradients, tracked)

    def batch_gradients(self, x, y, sample_weight):
        """TensorFlow and PyTorch: `(loss, y_pred, gradients)` of a batch (`train_steps.batch_gradients`)."""
        return train_steps.batch_gradients(self, x, y, sample_weight)

    def stateless_batch_gradients(self, state, x, y, sample_weight):
        """JAX: `(loss, y_pred, gradients, non_trainable, metrics)` (`train_steps.stateless_gradients`)."""
        return train_steps.stateless_gradients(self, state, x, y, sample_weight)

    def tracked_loss(self, loss):
        """The value of `loss` for Keras' running "loss" (unscaled by the replicas, as Keras logs it)."""
        return keras_training.unscale_loss_for_distribution(loss)

    def stateless_checked_step(self, state, x, y, y_loss, sample_weight):
        """JAX: the checked step on `state`'s values; returns `(logs, state)` as Keras' JAX `train_step` does."""
        trainable, _, optimizer_variables, _ = state
        loss, y_pred, gradients, non_trainable, metrics = self.stateless_batch_gradients(
            state, x, y_loss, sample_weight
        )
        tracked = self.tracked_loss(loss)
        check_gradients = not isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer)
        ok, step_logs = train_steps.step_check(tracked, gradients, y, self.label_range(), check_gradients)
        trainable, optimizer_variables = train_steps.stateless_apply_if(
            ok, self.optimizer, optimizer_variables, gradients, trainable
        )
        tracked = ops.where(ok, tracked, math.nan)
        logs, metrics = train_steps.stateless_metrics(self, metrics, tracked, x, y, y_pred, sample_weight)
        return {**logs, **step_logs}, (trainable, non_trainable, optimizer_variables, metrics)

    def apply_checked_step(self, x, y, y_pred, sample_weight, loss, gradients, tracked_loss):
        """Applies `gradients` if the step passes `step_check` (TensorFlow, PyTorch); returns the logs.

        Args:
            x, y, y_pred, sample_weight: the batch, its labels and outputs.
            loss: the unscaled loss; `gradients`: of the (scaled) loss, one
                per `trainable_weights`.
            tracked_loss: the value for Keras' running loss (NaN is logged
                instead when the step is refused).
        """
        check_gradients = not isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer)
        ok, step_logs = train_steps.step_check(tracked_loss, gradients, y, self.label_range(), check_gradients)
        train_steps.apply_if(ok, self.optimizer, gradients, self.trainable_weights)
        batch = train_steps.batch_size(x)
        keras_training.loss_tracker(self).update_state(ops.where(ok, tracked_loss, math.nan), sample_weight=batch)
        return {**self.compute_metrics(x, y, y_pred, sample_weight=sample_weight), **step_logs}
