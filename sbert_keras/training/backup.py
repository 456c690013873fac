"""A training backup that is atomic, tied to its run, and keeps the history.

Keras's `BackupAndRestore` is the mechanism (restore in `on_train_begin`,
save every epoch or every `save_freq` steps); `RunBackup` subclasses it and
changes only what the SBERT runs need, because Keras's version:

- writes `latest.weights.h5` in place: a kill during the write leaves a
  corrupt file that fails every later run with an h5py error
  (`double_checkpoint` keeps a copy, but the copy is made in place too);
- restores into any model, so a different run with the same folder resumes
  the old run's weights after zero steps;
- records no history, so a resumed run reports only its own epochs;
- records the epoch of a mid-epoch save as 0 after a resume.

- holds only the weights and the optimizer: the dropout's `SeedGenerator`
  states and the epoch's running loss start again, so a resumed run
  differs from an uninterrupted one.

Here every save writes `weights-<n>.weights.h5` (weights and optimizer) and
then atomically replaces `state.json`: the epoch, the steps done in it, the
weights file, the run's fingerprint, the per-epoch history, every
`SeedGenerator` state (in the model's variable order) and the running sums
of the epoch's loss; the file a `state.json` names is always complete.
`restore` checks all of it against the run before training: epoch and
steps inside the run, one history entry per finished epoch, the optimizer's
step count in the weights file equal to the steps `state.json` claims. A
backup that fails any check (corrupt, edited, or weights of another step)
is reported with one warning and the run truly starts from step 0: every
variable back to its value before the restore, an empty history, no batch
skipped. Each save first checks that the weights fit on the disk
(`weights_bytes`), and runs the caller's `check` (the trainer's: finite
weights and outputs), so a bad state never replaces the last good backup;
a full disk stops the run with one `disk_space.DiskFullError` naming the
file and the bytes it needs.

Example:
```python
backup = RunBackup("out/backup", fingerprint={"epochs": 3}, save_freq=100)
state = backup.restore(model, epochs=3, steps_per_epoch=50)  # None: start at step 0
model.fit(dataset, epochs=3, initial_epoch=state["epoch"] if state else 0, callbacks=[backup])
```
"""

import json
import math
import os
import shutil
import warnings

import keras
import numpy as np

from sbert_keras.compat import keras_training
from sbert_keras.utils import atomic_io
from sbert_keras.utils import backends
from sbert_keras.utils import disk_space

STATE = "state.json"
SEED_STATE = "seed_generator_state"  # the variable name of a Keras `SeedGenerator`'s state
# HDF5's bytes per stored variable (header, attributes, links: about 1.5 KB
# measured on Keras weight files) and per file, rounded up.
H5_BYTES_PER_VARIABLE = 2048
H5_BYTES_PER_FILE = 65536


def weights_bytes(model, include_optimizer=True):
    """About the bytes a Keras save of `model`'s weights takes (never fewer).

    Args:
        model: a Keras model or layer.
        include_optimizer: bool. Count the optimizer's variables too, as
            `save_weights` and `Model.save` store them.
    """
    variables = list(model.variables)
    optimizer = getattr(model, "optimizer", None)
    if include_optimizer and optimizer is not None:
        variables += list(optimizer.variables)
    data = sum(math.prod(v.shape) * _item_bytes(v.dtype) for v in variables)
    return data + H5_BYTES_PER_VARIABLE * len(variables) + H5_BYTES_PER_FILE


def _item_bytes(dtype):
    """Bytes per element of a Keras dtype ("bfloat16": 2, "bool": 1)."""
    return max(1, int("0" + "".join(c for c in keras.backend.standardize_dtype(dtype) if c.isdigit())) // 8)


class StaleBackupError(ValueError):
    """A backup was written by a run with a different configuration or data.

    Args:
        backup_dir: str. The backup folder.
        differences: dict. `{field: (saved, current)}` for each field that differs.
    """

    def __init__(self, backup_dir, differences):
        self.backup_dir, self.differences = backup_dir, differences
        fields = "; ".join(f"{k}: backup {a!r}, now {b!r}" for k, (a, b) in sorted(differences.items()))
        super().__init__(
            f"The backup in {backup_dir} belongs to a different run ({fields}). Rerun the "
            f"original command to resume it, or pass --overwrite (overwrite=True) to discard it "
            f"and start fresh."
        )


def fingerprint_differences(saved, current):
    """`{field: (saved, current)}` for the fields whose values differ."""
    keys = set(saved) | set(current)
    return {k: (saved.get(k), current.get(k)) for k in keys if saved.get(k) != current.get(k)}


def seed_generator_variables(model):
    """The state variables of `model`'s `SeedGenerator`s (dropout), in its variable order."""
    return [v for v in model.variables if v.name == SEED_STATE]


def training_variables(model):
    """Every variable a training step reads or writes: the model's, the optimizer's, the running loss's."""
    variables = list(model.variables)
    if getattr(model, "optimizer", None) is not None:
        variables += list(model.optimizer.variables)
    tracker = keras_training.loss_tracker(model)
    return variables + (list(tracker.variables) if tracker is not None else [])


def _is_int(value, low, high):
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def check_state(state, epochs=None, steps_per_epoch=None, seed_generators=None):
    """Raises a `ValueError` naming the first field of a `state.json` that cannot belong to the run.

    Args:
        state: dict. A parsed `state.json`.
        epochs, steps_per_epoch, seed_generators: int or None (not checked).
            The run's epochs, batches per epoch, and `SeedGenerator`s.
    """
    epoch, steps = state.get("epoch"), state.get("steps_done")
    if not _is_int(epoch, 0, math.inf if epochs is None else epochs):
        raise ValueError(f"`epoch` is {epoch!r}, not an epoch of a {epochs}-epoch run")
    last = math.inf if steps_per_epoch is None else steps_per_epoch - 1
    if not _is_int(steps, 0, 0 if epoch == epochs else last):
        raise ValueError(f"`steps_done` is {steps!r}, not a step of epoch {epoch} (of {steps_per_epoch} steps)")
    history = state.get("history")
    if not isinstance(history, dict) or any(
        not isinstance(v, list) or len(v) != epoch or not all(isinstance(x, (int, float)) for x in v)
        for v in history.values()
    ):
        raise ValueError(f"`history` does not hold one number per finished epoch ({epoch})")
    if epoch and not history.get("loss"):
        raise ValueError(f"`history` has no loss for the {epoch} finished epoch(s)")
    seeds = state.get("seed_generators")
    if seed_generators is not None and (
        not isinstance(seeds, list)
        or len(seeds) != seed_generators
        or not all(
            isinstance(s, list) and len(s) == 2 and all(_is_int(x, -(2**63), 2**63 - 1) for x in s) for s in seeds
        )
    ):
        raise ValueError(f"`seed_generators` does not hold the {seed_generators} dropout seed state(s) of the model")
    sums = state.get("loss_sums")
    finite = isinstance(sums, list) and all(isinstance(x, (int, float)) and math.isfinite(x) for x in sums)
    if steps and not finite:
        raise ValueError("`loss_sums` (the running loss of a mid-epoch save) is not a list of finite numbers")


def load_state(model, backup_dir, state, epochs=None, steps_per_epoch=None):
    """Loads a backup's `state` into `model` after checking it; on any error every variable keeps its value.

    Args:
        model: the compiled Keras model being trained (its optimizer is built here).
        backup_dir: str. The folder of the weights file `state` names.
        state: dict. The parsed `state.json`; epochs, steps_per_epoch: int or None.

    Raises:
        ValueError: a field that cannot belong to the run (`check_state`), or
            a weights file whose optimizer step is not the step `state` claims;
            whatever h5py raises for a damaged file.
    """
    optimizer = model.optimizer
    if optimizer is not None and not optimizer.built:
        optimizer.build(model.trainable_variables)
    variables, seeds = training_variables(model), seed_generator_variables(model)
    before = [v.numpy() for v in variables]
    try:
        check_state(state, epochs, steps_per_epoch, len(seeds))
        model.load_weights(os.path.join(backup_dir, state["weights"]))
        done = state["epoch"] * (steps_per_epoch or 0) + state["steps_done"]
        if steps_per_epoch and optimizer is not None and int(optimizer.iterations.numpy()) != done:
            raise ValueError(f"its weights file holds step {int(optimizer.iterations.numpy())}, state.json step {done}")
        for variable, value in zip(seeds, state["seed_generators"], strict=True):
            variable.assign(np.asarray(value, dtype=variable.dtype))
    except BaseException:
        for variable, value in zip(variables, before, strict=True):
            variable.assign(value)
        raise


def saved_state(model, epoch, steps, weights, fingerprint, history):
    """The `state.json` of a save after `steps` steps of `epoch`: with the seed states and the running loss."""
    tracker = keras_training.loss_tracker(model)
    return {
        "epoch": epoch,
        "steps_done": steps,
        "weights": weights,
        "fingerprint": fingerprint,
        "history": history,
        "seed_generators": [[int(x) for x in v.numpy()] for v in seed_generator_variables(model)],
        "loss_sums": [float(v.numpy()) for v in tracker.variables] if steps and tracker is not None else None,
    }


def set_loss_sums(model, sums):
    """Sets the running loss of `fit`'s logs (its `Mean`'s total and count) to a backup's `loss_sums`.

    Under a strategy of several replicas each holds its own share, which a
    backup does not record: the sums are left as Keras reset them there.
    """
    tracker = keras_training.loss_tracker(model)
    if tracker is None or len(sums) != len(tracker.variables):
        return
    if not backends.uses_tensorflow() or backends.tensorflow.distribute.get_strategy().num_replicas_in_sync == 1:
        for variable, value in zip(tracker.variables, sums, strict=True):
            variable.assign(value)


class RunBackup(keras.callbacks.BackupAndRestore):
    """`BackupAndRestore` with atomic saves, a run fingerprint and everything a step depends on.

    Args:
        backup_dir: str. The folder holding `state.json` and the weights.
        fingerprint: dict or None. JSON-serialisable facts identifying the
            run (configuration, data hash); a backup with a different one is
            refused (`StaleBackupError`) or, with `overwrite`, discarded.
        save_freq: `"epoch"` or int. Save at each epoch end, or every
            `save_freq` steps as well as at each epoch end.
        overwrite: bool. Discard a backup of a different run instead of
            raising.
        steps_done: int. Steps of the first epoch already done (the caller
            skips them in the dataset when resuming mid-epoch).
        check: callable or None. `check(epoch, steps)` runs before each
            save and raises to stop the run (the backup on disk stays).
    """

    def __init__(self, backup_dir, fingerprint=None, save_freq="epoch", overwrite=False, steps_done=0, check=None):
        # Kept at the end of `fit` (`delete_checkpoint=False`): the caller deletes it once its outputs are safe.
        super().__init__(backup_dir, save_freq=save_freq, delete_checkpoint=False)
        self.fingerprint = fingerprint or {}
        self.overwrite = overwrite
        self.steps_done = steps_done
        self.check = check
        self.history = {}
        self.restored = None  # the state `restore` applied (None: fresh), once it ran
        self._loss_sums = None  # the running loss of the resumed epoch, set at its start
        self._state_path = os.path.join(backup_dir, STATE)
        self._save_bytes = None  # `weights_bytes` of the model, at the first save

    def state(self):
        """The saved state (a dict), or None when there is no readable backup.

        Checks the fingerprint: a different run raises `StaleBackupError`,
        or with `overwrite` is deleted with a warning naming the fields. An
        unreadable backup is deleted with a warning.
        """
        if not os.path.isdir(self.backup_dir):
            return None
        try:
            with open(self._state_path, encoding="utf-8") as f:
                state = json.load(f)
            weights = os.path.join(self.backup_dir, state["weights"])
            if not os.path.isfile(weights):
                raise OSError(f"missing {weights}")
        except (OSError, ValueError, KeyError, TypeError) as error:
            self.discard(f"it is unreadable or incomplete ({error}); starting fresh from step 0")
            return None
        differences = fingerprint_differences(state.get("fingerprint", {}), self.fingerprint)
        if differences and not self.overwrite:
            raise StaleBackupError(self.backup_dir, differences)
        if differences:
            self.discard(
                f"it belongs to a different run ({', '.join(sorted(differences))}); "
                f"starting fresh as overwrite was given"
            )
            return None
        return state

    def discard(self, reason):
        """Deletes the backup folder, warning with `reason`."""
        warnings.warn(f"Ignoring the training backup in {self.backup_dir}: {reason}.", stacklevel=2)
        shutil.rmtree(self.backup_dir, ignore_errors=True)

    def restore(self, model, epochs=None, steps_per_epoch=None):
        """Loads the backup into `model` (compiled) and returns its state, or None: start at step 0.

        Everything is checked first (`check_state`, then the optimizer's
        step count read from the weights file); a backup that fails is
        discarded with a warning and every variable keeps its value.

        Args:
            model: the compiled Keras model being trained.
            epochs: int or None. The run's epochs.
            steps_per_epoch: int or None. The batches of each epoch.
        """
        self.set_model(model)
        self.history, self.restored = {}, None
        state = self.state()
        if state is None:
            return None
        try:
            load_state(model, self.backup_dir, state, epochs, steps_per_epoch)
        except (OSError, KeyError, ValueError, RuntimeError, TypeError) as error:  # h5py raises these too
            self.discard(f"it does not fit this run ({type(error).__name__}: {error}); starting fresh from step 0")
            return None
        self.history = {k: [float(x) for x in v] for k, v in state["history"].items()}
        self.steps_done = state["steps_done"]
        self._loss_sums = state.get("loss_sums") if state["steps_done"] else None
        self.restored = state
        return state

    def on_train_begin(self, logs=None):
        if self.restored is None and not self.history:  # not restored by the caller: as Keras' callback does
            state = self.restore(self.model, self.params.get("epochs"), self.params.get("steps"))
            if state is not None:
                keras_training.set_initial_epoch(self.model, state["epoch"])

    def on_epoch_begin(self, epoch, logs=None):
        self._current_epoch = epoch  # Keras leaves 0 here after a resume.
        if self._loss_sums is not None:  # Keras has just reset the running loss
            set_loss_sums(self.model, self._loss_sums)
        self._loss_sums = None

    def on_train_batch_end(self, batch, logs=None):
        last = batch + 1 == self.params.get("steps")  # the epoch's own save follows at once
        if keras_training.backup_saves_after_batch(self, batch) and not last:
            self._save(self._current_epoch, self.steps_done + batch + 1)

    def on_epoch_end(self, epoch, logs=None):
        for key, value in (logs or {}).items():
            self.history.setdefault(key, []).append(float(value))
        keras_training.restart_backup_batch_count(self)
        self.steps_done = 0
        self._save(epoch + 1, 0)

    def _save(self, epoch, steps):
        if self.check is not None:
            self.check(epoch, steps)
        previous = self._saved_weights_name()
        name = f"weights-{epoch}-{steps}.weights.h5"
        if name == previous:
            name = f"weights-{epoch}-{steps}-b.weights.h5"
        if self._save_bytes is None:
            self._save_bytes = weights_bytes(self.model)
        # Before anything is written: a full disk leaves no empty or half-written backup.
        disk_space.check_free_space(os.path.join(self.backup_dir, name), self._save_bytes)
        os.makedirs(self.backup_dir, exist_ok=True)
        atomic_io.replace_atomically(self.model.save_weights, os.path.join(self.backup_dir, name), suffix=".weights.h5")
        state = saved_state(self.model, epoch, steps, name, self.fingerprint, self.history)
        atomic_io.write_json(self._state_path, state)
        for old in os.listdir(self.backup_dir):  # the previous weights, files of a killed save
            if old not in (name, STATE) and (old == previous or ".tmp-" in old):
                try:
                    os.remove(os.path.join(self.backup_dir, old))
                except OSError:
                    pass

    def _saved_weights_name(self):
        try:
            with open(self._state_path, encoding="utf-8") as f:
                return json.load(f).get("weights")
        except (OSError, ValueError):
            return None

    def delete(self):
        """Removes the backup folder (after the run's results are saved)."""
        shutil.rmtree(self.backup_dir, ignore_errors=True)


def resumed_fits(dataset_of, dataset, epoch, steps_done, epochs, steps):
    """`[(dataset, fit keyword arguments)]` that train from `epoch`, `steps_done` on to the end.

    A run resumed mid-epoch first fits the rest of that epoch's pass (its
    first `steps_done` batches skipped), then the later passes; a finished
    run fits nothing.

    Args:
        dataset_of: callable `range of passes -> dataset` (`siamese_dataset`'s `passes`).
        dataset: `dataset_of(range(epochs))`, reused for a run from step 0.
        epoch, steps_done: int. Epochs done, and steps done in `epoch`.
        epochs, steps: int. The run's epochs, and batches per epoch.
    """
    if epoch == 0 and steps_done == 0:
        return [(dataset, {"epochs": epochs, "steps_per_epoch": steps})]
    fits = []
    if steps_done:
        rest = dataset_of(range(epoch, epoch + 1)).skip(steps_done)
        fits.append((rest, {"epochs": epoch + 1, "initial_epoch": epoch}))
        epoch += 1
    if epoch < epochs:
        rest = dataset_of(range(epoch, epochs))
        fits.append((rest, {"epochs": epochs, "initial_epoch": epoch, "steps_per_epoch": steps}))
    return fits
