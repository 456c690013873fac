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

Here every save writes `weights-<n>.weights.h5` and then atomically replaces
`state.json` (epoch, steps done in that epoch, the weights file, the run's
fingerprint and the per-epoch history); the file a `state.json` names is
always complete. A corrupt or unreadable backup is reported with a warning
and training starts fresh. Each save first checks that the weights fit on
the disk (`weights_bytes`); a full disk stops the run with one
`disk_space.DiskFullError` naming the file and the bytes it needs.

Example:
```python
backup = RunBackup("out/backup", fingerprint={"epochs": 3}, save_freq=100)
state = backup.state()          # None, or the saved epoch/steps/history
model.fit(dataset, epochs=3, callbacks=[backup])
```
"""

import json
import math
import os
import shutil
import warnings

import keras
import tensorflow as tf

from sbert_keras.compat import keras_training
from sbert_keras.utils import atomic_io as outputs
from sbert_keras.utils import disk_space

STATE = "state.json"
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
    data = sum(math.prod(v.shape) * tf.as_dtype(v.dtype).size for v in variables)
    return data + H5_BYTES_PER_VARIABLE * len(variables) + H5_BYTES_PER_FILE


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


class RunBackup(keras.callbacks.BackupAndRestore):
    """`BackupAndRestore` with atomic saves, a run fingerprint and the history.

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
    """

    def __init__(self, backup_dir, fingerprint=None, save_freq="epoch", overwrite=False, steps_done=0):
        super().__init__(backup_dir, save_freq=save_freq, delete_checkpoint=False)
        self.fingerprint = fingerprint or {}
        self.overwrite = overwrite
        self.steps_done = steps_done
        self.history = {}
        self._state_path = os.path.join(backup_dir, STATE)
        self._save_bytes = None  # `weights_bytes` of the model, at the first save

    def state(self):
        """The saved state (a dict), or None when there is no usable backup.

        Checks the fingerprint: a different run raises `StaleBackupError`,
        or with `overwrite` is deleted with a warning naming the fields. A
        corrupt backup is deleted with a warning.
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
            self.discard(f"it is unreadable or incomplete ({error}); starting fresh")
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

    def on_train_begin(self, logs=None):
        state = self.state()
        self.history = {k: list(v) for k, v in (state or {}).get("history", {}).items()}
        if state is None:
            return
        if self.model.optimizer is not None and not self.model.optimizer.built:
            self.model.optimizer.build(self.model.trainable_variables)
        variables = list(self.model.variables)
        if self.model.optimizer is not None:
            variables += list(self.model.optimizer.variables)
        before = [v.numpy() for v in variables]
        try:
            self.model.load_weights(os.path.join(self.backup_dir, state["weights"]))
        except (OSError, KeyError, ValueError, RuntimeError, TypeError) as error:  # what h5py raises
            for variable, value in zip(variables, before):
                variable.assign(value)
            self.history = {}
            self.discard(f"its weights cannot be read ({type(error).__name__}: {error}); starting fresh")
            return
        keras_training.set_initial_epoch(self.model, state["epoch"])
        self._current_epoch = state["epoch"]

    def on_epoch_begin(self, epoch, logs=None):
        self._current_epoch = epoch  # Keras leaves 0 here after a resume.

    def on_train_batch_end(self, batch, logs=None):
        if keras_training.backup_saves_after_batch(self, batch):
            self._save(self._current_epoch, self.steps_done + batch + 1)

    def on_epoch_end(self, epoch, logs=None):
        for key, value in (logs or {}).items():
            self.history.setdefault(key, []).append(float(value))
        keras_training.restart_backup_batch_count(self)
        self.steps_done = 0
        self._save(epoch + 1, 0)

    def _save(self, epoch, steps):
        previous = self._saved_weights_name()
        name = f"weights-{epoch}-{steps}.weights.h5"
        if name == previous:
            name = f"weights-{epoch}-{steps}-b.weights.h5"
        if self._save_bytes is None:
            self._save_bytes = weights_bytes(self.model)
        # Before anything is written: a full disk leaves no empty or half-written backup.
        disk_space.check_free_space(os.path.join(self.backup_dir, name), self._save_bytes)
        os.makedirs(self.backup_dir, exist_ok=True)
        outputs.replace_atomically(self.model.save_weights, os.path.join(self.backup_dir, name), suffix=".weights.h5")
        outputs.write_json(
            self._state_path,
            {
                "epoch": epoch,
                "steps_done": steps,
                "weights": name,
                "fingerprint": self.fingerprint,
                "history": self.history,
            },
        )
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

    def on_train_end(self, logs=None):
        pass  # The caller deletes the backup once its own outputs are safe.

    def delete(self):
        """Removes the backup folder (after the run's results are saved)."""
        shutil.rmtree(self.backup_dir, ignore_errors=True)
