"""The CSV log of every training step (`sbert_keras.training.step_log`), as `train_objective` writes it."""

import json

import keras
import numpy as np
import pytest

from conftest import tiny_encoder
from sbert_keras.data import examples
from sbert_keras.training import trainer
from sbert_keras.training.backup import STATE
from sbert_keras.training.schedules import WarmupLinearDecay
from sbert_keras.training.step_log import COLUMNS
from sbert_keras.training.step_log import read_rows
from sbert_keras.utils.atomic_io import TRAINING_LOG

A = ["a man is playing guitar", "the cat sleeps on the sofa", "a dog runs in the park", "a woman eats food"] * 4
B = ["a man is playing piano", "a cat sleeps", "the dog runs", "the sky is blue"] * 4
STS = examples.SentencePairs(A, B, np.linspace(0, 5, 16, dtype="float32"))
STEPS = 8  # per epoch: 16 pairs in random batches of 2


class StopAt(keras.callbacks.Callback):
    """Raises `KeyboardInterrupt` after batch `batch` of epoch `epoch` (0-based), as a kill would stop the run."""

    def __init__(self, epoch, batch):
        super().__init__()
        self.at, self.epoch = (epoch, batch), None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if (self.epoch, batch) == self.at:
            raise KeyboardInterrupt("killed")


def train(tmp_path, **kwargs):
    settings = {"epochs": 2, "batch_size": 2, "learning_rate": 1e-3, "batching": "shuffle", "verbose": 0, **kwargs}
    return trainer.train_objective("regression", tiny_encoder(), STS, output_dir=str(tmp_path), **settings)


def steps(rows):
    return [int(row["step"]) for row in rows]


def test_one_row_per_step_with_the_step_loss_and_the_scheduled_rate(tmp_path):
    _, history = train(tmp_path)
    text = (tmp_path / TRAINING_LOG).read_text()
    assert text.splitlines()[0] == ",".join(COLUMNS)
    rows = read_rows(tmp_path / TRAINING_LOG)
    assert steps(rows) == list(range(1, 2 * STEPS + 1))
    assert [int(row["epoch"]) for row in rows] == [1] * STEPS + [2] * STEPS
    loss = np.array([float(row["loss"]) for row in rows])
    assert np.all(np.isfinite(loss)) and len(set(loss)) > 1
    for epoch in range(2):  # batches of one size: the epoch's running mean is the mean of its steps' losses
        last = rows[(epoch + 1) * STEPS - 1]
        assert float(last["mean_loss"]) == pytest.approx(loss[epoch * STEPS : (epoch + 1) * STEPS].mean(), rel=1e-5)
        assert float(last["mean_loss"]) == pytest.approx(history.history["loss"][epoch], rel=1e-5)
    assert float(rows[0]["mean_loss"]) == pytest.approx(loss[0], rel=1e-6)
    # The rate applied at each step: 10 % linear warmup, then linear decay, over the run's 16 steps.
    rates = np.array([float(row["learning_rate"]) for row in rows])
    schedule = WarmupLinearDecay(1e-3, total_steps=2 * STEPS, warmup_steps=2)
    np.testing.assert_allclose(rates, [float(schedule(step)) for step in range(2 * STEPS)], rtol=1e-6, atol=1e-12)
    assert rates[0] < rates[1] < rates[2] == pytest.approx(1e-3) and np.all(np.diff(rates[2:]) < 0)


def test_a_killed_run_leaves_its_rows_and_its_resumption_logs_each_step_once(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        train(tmp_path, save_freq=3, callbacks=[StopAt(epoch=1, batch=4)])
    assert steps(read_rows(tmp_path / TRAINING_LOG)) == list(range(1, STEPS + 6))  # every step before the kill
    state = json.loads((tmp_path / "backup" / STATE).read_text())
    saved = state["epoch"] * STEPS + state["steps_done"]
    assert STEPS <= saved < STEPS + 5  # the kill came after the last backup: some rows are trained again
    with open(tmp_path / TRAINING_LOG, "a") as f:
        f.write("2,14,0.5")  # a row torn by the kill
    train(tmp_path, save_freq=3)
    rows = read_rows(tmp_path / TRAINING_LOG)
    assert steps(rows) == list(range(1, 2 * STEPS + 1))
    assert [int(row["epoch"]) for row in rows] == [1] * STEPS + [2] * STEPS
    assert all(np.isfinite(float(row["loss"])) for row in rows)


def test_a_fresh_run_starts_a_new_log(tmp_path):
    (tmp_path / TRAINING_LOG).write_text(",".join(COLUMNS) + "\n1,99,0.1,0.1,0.001\n")  # an earlier run's
    train(tmp_path, epochs=1, batch_size=4)
    assert steps(read_rows(tmp_path / TRAINING_LOG)) == [1, 2, 3, 4]


def test_torn_and_short_rows_are_not_read(tmp_path):
    path = tmp_path / TRAINING_LOG
    path.write_text(",".join(COLUMNS) + "\n1,1,0.5,0.5,0.001\n1,2,0.4\n1,")
    assert steps(read_rows(path)) == [1]
    assert read_rows(tmp_path / "missing.csv") == []
