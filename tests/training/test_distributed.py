"""Multi-worker training: two local worker processes against one process.

The slow test starts this file as a script twice (`launch_local_workers`:
one OS process per worker, each with its `TF_CONFIG`); each worker trains
the runs of `training_runs` under `MultiWorkerMirroredStrategy` and writes
its logged losses and final weights as JSON. The test compares them with
the same runs in this process, without a strategy, on the same global
batches. Run it alone: `PYTHONPATH=.:tests python tests/training/test_distributed.py
OUT_DIR` with a `TF_CONFIG` set is one worker.
"""

import json
import os
import pathlib
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import ROOT
from conftest import WORDS
from conftest import tiny_encoder
from harness import run_serialization_test
from sbert_keras.cli import parser
from sbert_keras.compat import keras_training
from sbert_keras.data.examples import SentencePairs
from sbert_keras.data.examples import Triplets
from sbert_keras.losses import replicas
from sbert_keras.losses.in_batch import InBatchNegativesLoss
from sbert_keras.losses.matryoshka import MatryoshkaLoss
from sbert_keras.training import distributed
from sbert_keras.training import objectives
from sbert_keras.training import trainer
from sbert_keras.training.pipelines import siamese_dataset
from sbert_keras.training.siamese import ContrastiveSiamese
from sbert_keras.training.step_log import COLUMNS
from sbert_keras.training.step_log import read_rows
from sbert_keras.utils.atomic_io import TRAINING_LOG

GLOBAL_BATCH = 8
WORKERS = 2
WORKER_TIMEOUT_S = 900  # a hang guard; the cluster takes ~1 min on an idle 2-core machine


def sentences(n, offset):
    """`n` short deterministic sentences from the toy vocabulary (one length bucket)."""
    return [" ".join(WORDS[(offset + 7 * i + k * 3) % len(WORDS)] for k in range(4)) for i in range(n)]


def examples():
    anchors, positives, negatives = sentences(16, 0), sentences(16, 1), sentences(16, 5)
    # 15 pairs: batches of 8 and 7, and 2 workers split the second one 4 / 3.
    pairs = SentencePairs(anchors[:15], positives[:15], np.linspace(0.0, 5.0, 15).astype("float32"))
    return pairs, Triplets(anchors, positives, negatives)


# name -> (objective, examples index, model kwargs); local-only negatives are computed in this process.
# Both runs hold a global batch of odd size (`test_some_global_batch_splits_unevenly`): a length bucket's last batch
# (regression), and a no-duplicates batch closed short (contrastive's default batching, as `first_batch_losses`
# rebuilds it), so the replicas' losses must be weighted by their rows (`replicas.replica_batch_weight`).
RUNS = {
    "regression": ("regression", 0, {}),
    "gathered": ("contrastive", 1, {"gather_across_replicas": True, "hard_negatives": True}),
}


class StepLosses(keras.callbacks.Callback):
    """The running mean of the loss after each step, as `fit` logs it."""

    def __init__(self):
        super().__init__()
        self.losses = []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(np.reshape(logs["loss"], -1)[0]))


def training_runs(log_dir, strategy=None):
    """`{name: {"losses", "weights", "log"}}` of each run of `RUNS`, under `strategy` or none.

    `log`: the rows of the run's step log (written into `log_dir/name`), as numbers.
    """
    results = {}
    for name, (objective, which, kwargs) in RUNS.items():
        encoder = tiny_encoder(seed=0)
        steps = StepLosses()
        output_dir = os.path.join(log_dir, name)
        trainer.train_objective(
            objective,
            encoder,
            examples()[which],
            epochs=1,
            batch_size=GLOBAL_BATCH,
            learning_rate=1e-2,
            seed=0,
            clipnorm=None,  # Keras clips per replica, before the sum (refused under a strategy)
            callbacks=[steps],
            verbose=0,
            strategy=strategy,
            output_dir=output_dir,
            **kwargs,
        )
        log = [[float(row[key]) for key in COLUMNS] for row in read_rows(os.path.join(output_dir, TRAINING_LOG))]
        results[name] = {"losses": steps.losses, "weights": [w.tolist() for w in encoder.get_weights()], "log": log}
    return results


def worker_main(out_dir):
    """One worker: the strategy first (before any TensorFlow op), then the runs."""
    strategy = distributed.multi_worker_strategy()
    index = distributed.read_tf_config()["task"]["index"]
    results = training_runs(os.path.join(out_dir, f"logs_{index}"), strategy)
    results["replicas"] = strategy.num_replicas_in_sync
    pathlib.Path(out_dir, f"worker_{index}.json").write_text(json.dumps(results))


@pytest.fixture(scope="module")
def worker_results(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("workers")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]),
        "CUDA_VISIBLE_DEVICES": "-1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    distributed.launch_local_workers([sys.executable, __file__, str(out_dir)], WORKERS, env, WORKER_TIMEOUT_S)
    return [json.loads((out_dir / f"worker_{i}.json").read_text()) for i in range(WORKERS)]


@pytest.fixture(scope="module")
def single_results(tmp_path_factory):
    return training_runs(str(tmp_path_factory.mktemp("logs")))


def assert_weights_close(actual, expected):
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=1e-4, atol=1e-5)


@pytest.mark.large
def test_two_workers_train_like_one_process_on_the_global_batch(worker_results, single_results):
    assert [r["replicas"] for r in worker_results] == [WORKERS] * WORKERS
    for name in ("regression", "gathered"):
        expected = single_results[name]
        for result in worker_results:
            np.testing.assert_allclose(result[name]["losses"], expected["losses"], rtol=1e-4, err_msg=name)
            assert_weights_close(result[name]["weights"], expected["weights"])
    # Training moved the weights (the comparison is not of two untouched models).
    initial = tiny_encoder(seed=0).get_weights()
    assert max(np.abs(np.asarray(w) - i).max() for w, i in zip(single_results["regression"]["weights"], initial)) > 1e-3


@pytest.mark.large
def test_each_worker_logs_the_steps_of_the_one_process_run(worker_results, single_results):
    for name in RUNS:
        expected = np.array(single_results[name]["log"])
        for result in worker_results:
            log = np.array(result[name]["log"])  # epoch, step, loss, mean_loss, learning_rate
            np.testing.assert_array_equal(log[:, :2], expected[:, :2], err_msg=name)
            np.testing.assert_allclose(log[:, 4], expected[:, 4], rtol=1e-6, err_msg=name)  # the schedule's rates
            np.testing.assert_allclose(log[:, 3], result[name]["losses"], rtol=1e-6, err_msg=name)  # Keras' mean
            np.testing.assert_allclose(log[:, 2], expected[:, 2], rtol=1e-4, err_msg=name)  # each step's global loss


@pytest.mark.large
def test_gathered_negatives_are_the_global_batch(worker_results, single_results):
    # The first step, before any update: each anchor of a worker scores against the 16 candidates (positives and
    # hard negatives) of the global batch, as in one process; with only its own half it would see 8.
    gathered = worker_results[0]["gathered"]["losses"][0]
    assert gathered == pytest.approx(single_results["gathered"]["losses"][0], rel=1e-4)
    full, local_only = first_batch_losses()
    assert full == pytest.approx(gathered, rel=1e-4)  # the same first batch, rebuilt here
    assert local_only < gathered - 1e-2


def first_batch_losses():
    """The first batch's loss in one process, and the mean loss of its halves (each worker's own negatives only)."""
    pairs_or_triplets = examples()[1]
    encoder = tiny_encoder(seed=0)
    model = ContrastiveSiamese(encoder, hard_negatives=True)
    columns = list(pairs_or_triplets.as_tuple())
    features, _ = next(iter(global_batches(columns, encoder, model.active_roles, "contrastive")))
    size = int(next(iter(features.values())).shape[0])
    cut = -(-size // WORKERS)
    halves = [{k: v[:cut] for k, v in features.items()}, {k: v[cut:] for k, v in features.items()}]
    losses = [float(InBatchNegativesLoss()(None, model(h))) for h in halves]
    return float(InBatchNegativesLoss()(None, model(features))), float(np.mean(losses))


def global_batches(columns, encoder, roles, objective):
    """The batches `trainer.train_objective` builds for `objective` (its default batching), in one process."""
    return siamese_dataset(columns, None, encoder.preprocessor, roles, GLOBAL_BATCH, seed=0, objective=objective)


# === Fast, in-process ===


def test_some_global_batch_splits_unevenly():
    encoder = tiny_encoder(seed=0)
    for objective, which, kwargs in RUNS.values():
        hard = kwargs.get("hard_negatives", False)
        columns, _, extra = objectives.objective_inputs(objective, examples()[which], hard_negatives=hard)
        roles = objectives.build_model(objective, encoder, {**kwargs, **extra}).active_roles
        sizes = [int(next(iter(f.values())).shape[0]) for f, _ in global_batches(columns, encoder, roles, objective)]
        assert sum(sizes) == len(columns[0]) and any(size % WORKERS for size in sizes), (objective, sizes)


def test_tf_config_names_the_cluster_and_the_task():
    config = distributed.tf_config(["a:1", "b:2"], 1)
    assert config == {"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}
    with pytest.raises(ValueError, match="`index`"):
        distributed.tf_config(["a:1"], 1)
    with pytest.raises(ValueError, match="host:port"):
        distributed.tf_config(["a"], 0)


def test_read_tf_config_says_what_is_missing_or_malformed():
    with pytest.raises(ValueError, match="TF_CONFIG is not set"):
        distributed.read_tf_config({})
    with pytest.raises(ValueError, match="TF_CONFIG is malformed"):
        distributed.read_tf_config({"TF_CONFIG": '{"cluster": {}}'})
    config = {"TF_CONFIG": json.dumps(distributed.tf_config(["localhost:1"], 0))}
    assert distributed.read_tf_config(config)["task"]["index"] == 0


def test_local_cluster_gives_distinct_ports():
    workers = distributed.local_cluster(3)
    assert len(set(workers)) == 3 and all(w.startswith("localhost:") for w in workers)


def test_launcher_reports_the_failing_worker_with_its_stderr():
    command = [
        sys.executable,
        "-c",
        "import json, os, sys; i = json.loads(os.environ['TF_CONFIG'])['task']['index']; "
        "sys.stderr.write(f'boom {i}'); sys.exit(3 if i == 1 else 0)",
    ]
    with pytest.raises(RuntimeError, match=r"worker 1 exited with status 3(.|\n)*boom 1"):
        distributed.launch_local_workers(command, 2, timeout=60)
    ok = distributed.launch_local_workers([sys.executable, "-c", "print('hi')"], 2, timeout=60)
    assert [r.stdout.strip() for r in ok] == ["hi", "hi"]


def test_replica_gather_is_the_identity_without_a_strategy():
    x = np.arange(6, dtype="float32").reshape(3, 2)
    np.testing.assert_allclose(replicas.ReplicaGather()(x), x)
    run_serialization_test(replicas.ReplicaGather(name="g"))


def test_gathering_contrastive_siamese_round_trips_and_equals_plain_without_strategy(tmp_path):
    encoder = tiny_encoder()
    inputs = (["a man runs", "a dog sleeps", "the cat eats"], ["a man is fast", "a dog", "the cat eats food"])
    plain = ContrastiveSiamese(encoder)
    gathered = ContrastiveSiamese(encoder, gather_across_replicas=True)
    assert gathered.get_config()["gather_across_replicas"] is True
    assert plain.get_config()["gather_across_replicas"] is False
    features = gathered.preprocessor.tokenize_columns(inputs)
    np.testing.assert_allclose(gathered.predict(features, verbose=0), plain.predict(features, verbose=0), atol=1e-6)
    path = tmp_path / "gathered.keras"
    gathered.save(path)
    restored = keras.saving.load_model(path)
    assert restored.gather_across_replicas is True
    np.testing.assert_allclose(restored.predict(features, verbose=0), gathered.predict(features, verbose=0), atol=1e-6)


def test_replica_scaled_loss_equals_the_wrapped_loss_without_strategy():
    y, p = np.array([0.1, 0.5, 0.9], "float32"), np.array([0.2, 0.4, 0.5], "float32")
    mse = keras.losses.MeanSquaredError()
    assert float(replicas.ReplicaScaledLoss(mse)(y, p)) == pytest.approx(float(mse(y, p)), rel=1e-6)
    similarities = np.array([[0.9, 0.1], [0.2, 0.8]], "float32")
    inner = InBatchNegativesLoss()
    wrapped = replicas.ReplicaScaledLoss(inner)
    assert float(wrapped(None, similarities)) == pytest.approx(float(inner(None, similarities)), rel=1e-6)
    restored = run_serialization_test(replicas.ReplicaScaledLoss(mse))
    assert isinstance(restored.loss, keras.losses.MeanSquaredError)


def test_replica_scaled_loss_refuses_matryoshka():
    with pytest.raises(ValueError, match="MatryoshkaLoss"):
        replicas.ReplicaScaledLoss(MatryoshkaLoss(InBatchNegativesLoss()))


def test_prepare_model_changes_nothing_without_a_multi_worker_strategy():
    model = ContrastiveSiamese(tiny_encoder())
    model.compile()
    assert distributed.prepare_model(model) is model
    assert "train_step" not in vars(model)


def test_under_a_strategy_scope_the_first_step_is_left_to_keras():
    # A multi-worker model forgets its strategy and fits under the scope: its batches are per-replica,
    # so `keras_training.build_before_first_trace` does not build from them (the two-worker tests run it).
    model = ContrastiveSiamese(tiny_encoder())
    model.compile()
    calls = []
    function = keras_training.build_before_first_trace(model, calls.append)
    with tf.distribute.MirroredStrategy(["/cpu:0"]).scope():
        function(object())  # no `element_spec`: building from it would raise
    assert len(calls) == 1 and not model.optimizer.built
    function(object())  # only the first call may build
    assert len(calls) == 2 and not model.optimizer.built


if __name__ == "__main__":
    worker_main(sys.argv[1])


def test_cli_multi_worker_without_tf_config_is_a_clear_error(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    argv = ["train", "--strategy", "multi-worker", "--objective", "contrastive", "--model", "m.keras"]
    (tmp_path / "t.csv").write_text("anchor,positive\na,b\n")
    status = parser.main(argv + ["--train", str(tmp_path / "t.csv"), "--output", str(tmp_path / "run")])
    assert status == 2
    assert "sbert-keras train: error: TF_CONFIG is not set" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


class FakeReplicaContext:
    """One of 2 replicas, whose global batch holds `total` rows (what `all_reduce` sums)."""

    num_replicas_in_sync = 2

    def __init__(self, total):
        self.total = total

    def all_reduce(self, op, value):
        assert op == replicas.tf.distribute.ReduceOp.SUM
        return distributed.tf.constant(self.total, value.dtype)


@pytest.mark.parametrize(("rows", "total", "expected"), [(4, 8, 1.0), (4, 7, 8 / 7), (3, 7, 6 / 7), (0, 1, 0.0)])
def test_replica_batch_weight_makes_uneven_slices_one_global_mean(monkeypatch, rows, total, expected):
    # Keras: loss = mean over the slice / replicas, gradients summed. Weighted: sum over all rows / global rows.
    monkeypatch.setattr(replicas.tf.distribute, "get_replica_context", lambda: FakeReplicaContext(total))
    assert float(replicas.replica_batch_weight(rows)) == pytest.approx(expected, rel=1e-6)


def test_replica_batch_weight_is_one_without_a_strategy():
    assert float(replicas.replica_batch_weight(5)) == 1.0
