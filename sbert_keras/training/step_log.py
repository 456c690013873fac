"""A CSV log of every training step: its loss and learning rate, written as training goes.

Keras has no per-step log a user can read after the run:
`keras.callbacks.CSVLogger` writes one row per epoch, the progress bar
shows the epoch's running mean and is gone with the terminal, and
`TensorBoard`'s per-batch scalars need TensorBoard (and log the running
mean too). `StepLog` appends one row per step to a CSV file:

    epoch,step,loss,mean_loss,learning_rate
    1,1,0.61215836,0.61215836,5.5555556e-07

- `epoch`: from 1, as Keras' `Epoch 1/3`;
- `step`: the run's training steps so far, from 1 (across epochs);
- `loss`: this step's own loss (`CheckedTraining.last_step_loss`; under a
  multi-worker strategy, that of the global batch, as in one process),
  empty for a model that does not report it;
- `mean_loss`: the epoch's running mean, the `loss` Keras' progress bar
  shows;
- `learning_rate`: what the optimizer applied at this step (its schedule,
  e.g. `schedules.WarmupLinearDecay`, at the step's iteration).

Each row is appended and the file closed at once, so a run that crashes
leaves every row so far. A resumed run (`start_step`, the steps its backup
holds) first drops the rows of steps after that point, which it trains
again, so the log has each step once.

Example:
```python
log = StepLog("runs/sts/training_log.csv")
model.fit(dataset, epochs=2, callbacks=[log])
```
"""

import csv
import errno
import io
import os

import keras
import numpy as np

from sbert_keras.utils import atomic_io
from sbert_keras.utils.disk_space import DiskFullError
from sbert_keras.utils.disk_space import free_bytes

COLUMNS = ("epoch", "step", "loss", "mean_loss", "learning_rate")


def _number(value):
    """A float from a log value (a float, a NumPy scalar or a `(1,)` array), or None."""
    if value is None:
        return None
    return float(np.asarray(value, dtype="float64").reshape(-1)[0])


def _cell(value):
    return "" if value is None else f"{value:.8g}"


def read_rows(path):
    """The rows of a step log as dicts of str (`[]` when the file is missing); a torn last line is skipped."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
    except FileNotFoundError:
        return []
    return [row for row in rows if None not in row.values() and (row.get("step") or "").isdigit()]


class StepLog(keras.callbacks.Callback):
    """Appends a CSV row per training step (see the module docstring).

    Place it before a `backup.RunBackup` in the callbacks: the row of a step
    is then on disk before a backup that includes the step.

    Args:
        path: str. The CSV file (created, with its header, if missing).
        start_step: int. Steps already done by the run (a resumed backup's):
            rows after it are dropped when the first epoch begins, and the
            count goes on from it (from 0 if the optimizer has done no step:
            the backup was not restored).
    """

    def __init__(self, path, start_step=0):
        super().__init__()
        self.path = os.fspath(path)
        self.start_step = self.step = int(start_step)
        self.epoch = 1
        self.learning_rate = None
        self._epoch_start = self.step
        self._opened = False

    def on_epoch_begin(self, epoch, logs=None):
        if not self._opened:  # once per run (a resumed run calls `fit` twice), once any backup is restored
            # A backup that could not be restored leaves the optimizer at step 0: the run starts afresh.
            optimizer = getattr(self.model, "optimizer", None)
            restored = optimizer is None or _number(optimizer.iterations) > 0
            self.step = self.start_step if restored else 0
            self._keep_rows_up_to(self.step)
            self._opened = True
        self.epoch = epoch + 1
        self._epoch_start = self.step

    def on_train_batch_begin(self, batch, logs=None):
        # Read before the step: after it, the optimizer's iteration (and so its rate) has moved on.
        optimizer = getattr(self.model, "optimizer", None)
        self.learning_rate = None if optimizer is None else _number(optimizer.learning_rate)

    def on_train_batch_end(self, batch, logs=None):
        self.step = self._epoch_start + batch + 1  # `batch`: the last of a `steps_per_execution` group
        loss = getattr(self.model, "last_step_loss", None)
        mean_loss = _number((logs or {}).get("loss"))
        row = [self.epoch, self.step, _cell(_number(loss)), _cell(mean_loss), _cell(self.learning_rate)]
        try:
            with open(self.path, "a", encoding="utf-8", newline="") as f:
                csv.writer(f, lineterminator="\n").writerow(row)
        except OSError as error:
            if error.errno == errno.ENOSPC:
                raise DiskFullError(self.path, None, free_bytes(self.path)) from None
            raise

    def _keep_rows_up_to(self, step):
        """Rewrites the file (atomically) with its header and its rows of steps `<= step`."""
        kept = [row for row in read_rows(self.path) if int(row["step"]) <= step] if step else []
        text = io.StringIO()
        writer = csv.DictWriter(text, COLUMNS, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(kept)
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)

        def write(temp):
            with open(temp, "w", encoding="utf-8", newline="") as f:
                f.write(text.getvalue())

        atomic_io.replace_atomically(write, self.path, ".csv")
