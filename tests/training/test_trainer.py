import json
import os
import re
import subprocess
import sys
import textwrap
import warnings

import keras
import numpy as np
import pytest

import sbert_keras as sk
from conftest import ROOT
from conftest import large
from conftest import shared_path
from conftest import tiny_encoder
from sbert_keras.data.examples import NLIPairs
from sbert_keras.data.examples import SentencePairs
from sbert_keras.data.examples import Triplets
from sbert_keras.model import precision
from sbert_keras.training import backup
from sbert_keras.training import trainer
from sbert_keras.training.trainer import WarmupLinearDecay
from sbert_keras.utils import hardware
from sbert_keras.utils.defaults import DEPRECATED_POLICY_NAMES

A = ["a man is playing guitar", "the cat sleeps on the sofa", "a dog runs in the park", "a woman eats food"] * 4
B = ["a man is playing piano", "a cat sleeps", "the dog runs", "the sky is blue"] * 4
C = ["the sky is blue", "a red car", "a woman is playing piano", "the cat runs"] * 4


def test_warmup_then_linear_decay():
    schedule = WarmupLinearDecay(2e-5, total_steps=100, warmup_steps=10)
    values = [float(schedule(s)) for s in (0, 5, 10, 55, 100, 120)]
    np.testing.assert_allclose(values, [0, 1e-5, 2e-5, 1e-5, 0, 0], atol=1e-12)
    clone = WarmupLinearDecay.from_config(schedule.get_config())
    assert float(clone(5)) == pytest.approx(1e-5)


def test_paper_optimizer_is_adam_with_ten_percent_warmup():
    optimizer = trainer.paper_optimizer(total_steps=360, weight_decay=0, clipnorm=None)
    assert type(optimizer) is keras.optimizers.Adam and optimizer.global_clipnorm is None
    schedule = optimizer._learning_rate
    assert schedule.warmup_steps == 36 and schedule.learning_rate == 2e-5


def test_paper_optimizer_with_weight_decay_is_adamw_sparing_biases_and_layer_norms():
    optimizer = trainer.paper_optimizer(10, learning_rate=0.1, warmup_fraction=0.0, weight_decay=0.01, clipnorm=1.0)
    assert isinstance(optimizer, keras.optimizers.AdamW) and optimizer.global_clipnorm == 1.0
    inputs = keras.Input((4,))
    outputs = keras.layers.LayerNormalization()(keras.layers.Dense(4, kernel_initializer="ones")(inputs))
    model = keras.Model(inputs, outputs)
    before = {v.path: np.array(v) for v in model.trainable_variables}
    # Zero gradients: Adam moves nothing, so what changes is the decay alone (lr 0.1 x 0.01 of each weight).
    optimizer.apply_gradients([(keras.ops.zeros_like(v), v) for v in model.trainable_variables])
    for v in model.trainable_variables:
        shrink = 1.0 - 0.1 * 0.01 if v.name == "kernel" else 1.0
        np.testing.assert_allclose(np.array(v), before[v.path] * shrink, rtol=1e-6, err_msg=v.path)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"weight_decay": -0.01}, "weight_decay"),
        ({"clipnorm": float("nan")}, "clipnorm"),
        ({"clipnorm": "1"}, "clipnorm"),
    ],
)
def test_bad_optimizer_settings_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=f"`{name}` must be a finite number >= 0"):
        trainer.paper_optimizer(10, **kwargs)
    with pytest.raises(ValueError, match=f"`{name}` must be" if "`" not in name else name):
        trainer.train_objective("regression", None, STS, **kwargs)


def _tiny_roberta_run(seed, builder_seed):
    """Trains the tiny RoBERTa (dropout 0.1) on 32 pairs; its vectors of the training sentences."""
    keras.utils.set_random_seed(builder_seed)  # the state the encoder (and its dropout) is built in
    encoder = sk.SentenceEncoder.from_preset(shared_path("reference", "tiny-roberta", "model"), sequence_length=16)
    pairs = SentencePairs(A * 2, B * 2, np.linspace(0, 5, 32).astype("float32"))
    trainer.train_objective("regression", encoder, pairs, batch_size=8, learning_rate=1e-3, seed=seed, verbose=0)
    return encoder.encode(A[:4] + B[:4], compute="float32", show_progress=False)


@pytest.mark.large
def test_the_same_seed_trains_the_same_weights_whatever_came_before():
    first = _tiny_roberta_run(seed=7, builder_seed=1)
    again = _tiny_roberta_run(seed=7, builder_seed=2)  # other global random state when the encoder was built
    np.testing.assert_allclose(again, first, atol=1e-6)
    other = _tiny_roberta_run(seed=8, builder_seed=1)  # the seed moves the dropout masks and the batch order
    assert np.abs(other - first).max() > 1e-4


def test_set_compute_takes_the_compute_vocabulary(monkeypatch):
    previous = keras.config.dtype_policy()
    try:
        monkeypatch.setattr(hardware, "has_gpu", lambda: False)
        monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
        assert trainer.set_compute("auto") == "bfloat16"
        assert keras.config.dtype_policy().name == "mixed_bfloat16"
        monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx2"}))
        assert trainer.set_compute("auto") == "float32"
        assert keras.config.dtype_policy().name == "float32"
        assert trainer.set_compute("float16") == "float16"
        assert keras.config.dtype_policy().name == "mixed_float16"
        with pytest.raises(ValueError, match="`compute` must be one of .*'int8'"):
            trainer.set_compute("int8")
        with pytest.warns(DeprecationWarning, match="`set_precision` is now `set_compute`"):
            assert trainer.set_precision("float32") == "float32"  # its earlier name
    finally:
        keras.config.set_dtype_policy(previous)


@pytest.mark.parametrize("old, new", sorted(DEPRECATED_POLICY_NAMES.items()))
def test_set_compute_accepts_keras_policy_names_with_a_deprecation_warning(old, new):
    previous = keras.config.dtype_policy()
    try:
        with pytest.warns(DeprecationWarning, match=f"use `compute='{new}'`"):
            assert sk.set_compute(old) == new
        assert keras.config.dtype_policy().name == old
    finally:
        keras.config.set_dtype_policy(previous)


def test_compute_vocabulary_maps_to_policies():
    assert precision.policy_for("bfloat16") == "mixed_bfloat16"
    assert precision.policy_for("float32") == "float32"
    with pytest.warns(DeprecationWarning, match="use `dtype='float16'`"):
        assert precision.policy_for("mixed_float16", "dtype") == "mixed_float16"
    with pytest.raises(ValueError, match="`dtype` must be one of"):
        precision.policy_for("int8", "dtype")


@pytest.mark.parametrize(
    "objective, examples, dev",
    [
        (
            "regression",
            SentencePairs(A, B, np.linspace(0, 5, 16, dtype="float32")),
            SentencePairs(A[:6], B[:6], np.linspace(0, 5, 6, dtype="float32")),
        ),
        large("triplet", Triplets(A, B, C), Triplets(A[:4], B[:4], C[:4])),
        (
            "classification",
            NLIPairs(A, B, np.array([0, 1, 2, 0] * 4, "int32")),
            NLIPairs(A[:4], B[:4], np.array([0, 1, 2, 0], "int32")),
        ),
        large("contrastive", Triplets(A, B, None), SentencePairs(A[:6], B[:6], np.arange(6.0))),
    ],
)
def test_train_objective_logs_dev_metrics(objective, examples, dev):
    encoder = tiny_encoder()
    model, history = trainer.train_objective(objective, encoder, examples, dev=dev, epochs=1, batch_size=4, verbose=0)
    assert model.encoder is encoder
    assert any(k.startswith("dev_") for k in history.history)
    assert np.isfinite(history.history["loss"][0])


def test_wrong_examples_for_objective_is_clear():
    with pytest.raises(TypeError, match="sentence pairs"):
        trainer.train_objective("regression", tiny_encoder(), Triplets(A, B, C))
    with pytest.raises(ValueError, match="objective"):
        trainer.objective_inputs("ranking", Triplets(A, B, C))


class Interrupt(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        if epoch == 1:
            raise KeyboardInterrupt("simulated interruption")


class EpochLog(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.epochs = []

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append(epoch)


def test_interrupted_fit_resumes_from_backup(tmp_path):
    examples = SentencePairs(A, B, np.linspace(0, 5, 16, dtype="float32"))
    encoder = tiny_encoder()
    with pytest.raises(KeyboardInterrupt):
        trainer.train_objective(
            "regression",
            encoder,
            examples,
            epochs=4,
            batch_size=4,
            output_dir=str(tmp_path),
            callbacks=[Interrupt()],
            verbose=0,
        )
    assert os.path.isdir(tmp_path / "backup")
    saved = [w.copy() for w in encoder.get_weights()]
    log = EpochLog()
    fresh = tiny_encoder(seed=5)  # a restarted process: new, different weights
    _, history = trainer.train_objective(
        "regression", fresh, examples, epochs=4, batch_size=4, output_dir=str(tmp_path), callbacks=[log], verbose=0
    )
    # Epochs 0 and 1 were done before the interruption (the backup is taken at
    # the end of each epoch): only 2 and 3 run again, from the saved weights.
    assert log.epochs == [2, 3]
    assert len(history.history["loss"]) == 4  # the whole history, before and after the interruption
    assert not os.path.isdir(tmp_path / "backup")  # removed after a clean finish
    assert any(not np.allclose(a, b) for a, b in zip(saved, fresh.get_weights()))


MIRRORED = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    sys.path.insert(0, "tests")
    import numpy as np
    from conftest import tiny_encoder
    from sbert_keras.data import examples
    from sbert_keras.training import trainer
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    A = ["a man is playing guitar", "the cat sleeps", "a dog runs", "a woman eats food"] * 4
    B = ["a man is playing piano", "a cat sleeps", "the dog runs", "the sky is blue"] * 4
    pairs = examples.SentencePairs(A, B, np.linspace(0, 5, 16, dtype="float32"))
    with strategy.scope():
        encoder = tiny_encoder()
        try:  # Keras would clip per replica, before the sum: refused
            trainer.train_objective("regression", encoder, pairs, batch_size=8, verbose=0, clipnorm=1.0)
            refused = ""
        except ValueError as error:
            refused = str(error)
        model, history = trainer.train_objective(
            "regression", encoder, pairs, epochs=1, batch_size=8, verbose=0, clipnorm=None)
    print(json.dumps({"replicas": strategy.num_replicas_in_sync, "refused": refused,
                      "loss": history.history["loss"][0]}))
""")


@pytest.mark.large
def test_one_epoch_under_mirrored_strategy_on_two_cpus():
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-c", MIRRORED], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["replicas"] == 2 and np.isfinite(out["loss"])
    assert "`clipnorm=1.0` under a strategy with 2 replicas" in out["refused"]


STS = SentencePairs(A, B, np.linspace(0, 5, 16, dtype="float32"))
NLI = NLIPairs(A, B, np.array([0, 1, 2, 0] * 4, "int32"))


def test_nli_labels_are_refused_by_the_regression_objective():
    # NLI ids 0/1/2 used to become STS targets 0, 0.2, 0.4 silently.
    with pytest.raises(TypeError, match="regression objective trains on STS scores.*NLI pairs"):
        trainer.objective_inputs("regression", NLI)
    with pytest.raises(ValueError, match=r"STS scores in \[0, 5\]; item 2 \(0-based\) has label 7"):
        trainer.objective_inputs("regression", SentencePairs(A[:3], B[:3], np.array([1, 2, 7.0])))


def test_sts_scores_are_refused_by_the_classification_objective():
    # STS scores used to crash after training started ("label value of 5").
    with pytest.raises(ValueError, match=r"class ids 0..2 .*item 1 \(0-based\) has label 3.8"):
        trainer.objective_inputs("classification", SentencePairs(A[:3], B[:3], np.array([0, 3.8, 5.0])))
    unlabelled = NLIPairs(A[:2], B[:2], np.array([0, -1], "int32"))
    with pytest.raises(ValueError, match=r"item 1 \(0-based\) has label -1"):
        trainer.objective_inputs("classification", unlabelled)
    columns, labels, _ = trainer.objective_inputs("classification", NLI)
    assert len(columns) == 2 and list(labels[:3]) == [0, 1, 2]


def test_empty_training_data_is_a_clear_error():
    empty = SentencePairs([], [], np.zeros(0, "float32"))
    with pytest.raises(ValueError, match="no training examples"):
        trainer.train_objective("regression", tiny_encoder(), empty)
    no_triplets = NLIPairs(A[:2], B[:2], np.array([1, 1], "int32"))  # neutral only
    with pytest.raises(ValueError, match="no premise with both an entailment and a contradiction"):
        trainer.objective_inputs("triplet", no_triplets)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"learning_rate": -1.0}, "learning_rate"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"learning_rate": float("nan")}, "learning_rate"),
        ({"learning_rate": float("inf")}, "learning_rate"),
        ({"learning_rate": 2e5}, r"learning_rate` must be a number in \(0, 1\]; received 200000.0"),
        ({"epochs": 0}, "epochs"),
        ({"epochs": 1.5}, "epochs"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": "8"}, "batch_size"),
        ({"warmup_fraction": 1.5}, "warmup_fraction"),
        ({"save_freq": 0}, "save_freq"),
    ],
)
def test_bad_hyperparameters_name_the_argument_before_training(kwargs, name):
    # --lr -1 used to train and save a ruined encoder; epochs=0 blamed warmup_steps.
    with pytest.raises(ValueError, match=f"`{name}` must be" if "`" not in name else name):
        trainer.train_objective("regression", None, STS, **kwargs)


def _interrupted_run(tmp_path, epochs=4, **kwargs):
    with pytest.raises(KeyboardInterrupt):
        trainer.train_objective(
            "regression",
            tiny_encoder(),
            STS,
            epochs=epochs,
            batch_size=4,
            output_dir=str(tmp_path),
            callbacks=[Interrupt()],
            verbose=0,
            **kwargs,
        )


def test_a_backup_of_a_different_run_is_refused_naming_the_fields(tmp_path):
    _interrupted_run(tmp_path)
    other = SentencePairs(A, C, np.linspace(0, 5, 16, dtype="float32"))
    with pytest.raises(backup.StaleBackupError, match="epochs: backup 4, now 3.*train_data"):
        trainer.train_objective(
            "regression", tiny_encoder(), other, epochs=3, batch_size=4, output_dir=str(tmp_path), verbose=0
        )
    log = EpochLog()
    with pytest.warns(UserWarning, match=r"different run \(epochs, train_data\); starting fresh"):
        _, history = trainer.train_objective(
            "regression",
            tiny_encoder(),
            other,
            epochs=3,
            batch_size=4,
            output_dir=str(tmp_path),
            callbacks=[log],
            verbose=0,
            overwrite=True,
        )
    assert log.epochs == [0, 1, 2] and len(history.history["loss"]) == 3


@pytest.mark.parametrize("damage", [large("weights"), "state"])
def test_a_corrupt_backup_warns_and_starts_fresh(tmp_path, damage):
    # A kill during Keras's in-place write left a corrupt latest.weights.h5
    # that failed every rerun with an h5py error.
    _interrupted_run(tmp_path, epochs=3)
    state_path = tmp_path / "backup" / backup.STATE
    state = json.loads(state_path.read_text())
    if damage == "weights":
        weights = tmp_path / "backup" / state["weights"]
        weights.write_bytes(weights.read_bytes()[:300])
    else:
        state_path.write_text(state_path.read_text()[:20])
    log = EpochLog()
    with pytest.warns(UserWarning, match="Ignoring the training backup .*starting fresh"):
        trainer.train_objective(
            "regression",
            tiny_encoder(),
            STS,
            epochs=3,
            batch_size=4,
            output_dir=str(tmp_path),
            callbacks=[log],
            verbose=0,
        )
    assert log.epochs == [0, 1, 2]


class StopAtStep(keras.callbacks.Callback):
    def __init__(self, step):
        super().__init__()
        self.step, self.batches = step, []

    def on_train_batch_end(self, batch, logs=None):
        self.batches.append(batch)
        if self.step is not None and batch == self.step:
            raise KeyboardInterrupt("killed mid-epoch")


@pytest.mark.large
def test_a_mid_epoch_interruption_resumes_past_the_saved_step(tmp_path):
    full = StopAtStep(None)
    trainer.train_objective("regression", tiny_encoder(), STS, epochs=1, batch_size=2, callbacks=[full], verbose=0)
    steps = len(full.batches)
    assert steps >= 6
    with pytest.raises(KeyboardInterrupt):
        trainer.train_objective(
            "regression",
            tiny_encoder(),
            STS,
            epochs=1,
            batch_size=2,
            save_freq=1,
            output_dir=str(tmp_path),
            callbacks=[StopAtStep(3)],
            verbose=0,
        )
    state = json.loads((tmp_path / "backup" / backup.STATE).read_text())
    assert (state["epoch"], state["steps_done"]) == (0, 4)
    resumed = StopAtStep(None)
    _, history = trainer.train_objective(
        "regression",
        tiny_encoder(),
        STS,
        epochs=1,
        batch_size=2,
        save_freq=1,
        output_dir=str(tmp_path),
        callbacks=[resumed],
        verbose=0,
    )
    assert len(resumed.batches) == steps - 4  # only the steps not yet done
    assert len(history.history["loss"]) == 1
    assert not os.path.isdir(tmp_path / "backup")


SCORED = SentencePairs(A, B, np.linspace(-1, 7, 16, dtype="float32"))  # raw scores: any finite range


@pytest.mark.parametrize(
    "objective, matryoshka_dims, loss_name, pair_output",
    [
        ("cosent", None, "cosent_loss", "cosine"),
        large("cosent", (8, 4), "matryoshka_loss", "cosine"),
        ("angle", None, "angle_loss", "embeddings"),
    ],
)
def test_cosent_and_angle_objectives_train_on_raw_scores(tmp_path, objective, matryoshka_dims, loss_name, pair_output):
    encoder = tiny_encoder()
    kwargs = {"matryoshka_dims": matryoshka_dims} if matryoshka_dims else {}
    model, history = trainer.train_objective(
        objective, encoder, SCORED, dev=SCORED, epochs=1, batch_size=4, verbose=0, **kwargs
    )
    assert isinstance(model, sk.RegressionSiamese) and model.pair_output == pair_output
    assert model.loss.name == loss_name
    if matryoshka_dims:
        assert model.loss.loss.name == "cosent_loss" and model.matryoshka_dims == matryoshka_dims
    assert np.isfinite(history.history["loss"][0]) and "dev_spearman" in " ".join(history.history)
    columns, labels, _ = trainer.objective_inputs(objective, SCORED)
    np.testing.assert_allclose(labels, SCORED.labels, atol=0)  # not rescaled like regression's
    path = str(tmp_path / "model.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert reloaded.loss.name == loss_name


def test_cosent_and_angle_refuse_what_does_not_fit():
    with pytest.raises(TypeError, match="cosent objective trains on scored sentence pairs"):
        trainer.objective_inputs("cosent", Triplets(A, B, C))
    with pytest.raises(TypeError, match="angle objective trains on STS scores.*NLI pairs"):
        trainer.objective_inputs("angle", NLIPairs(A, B, np.zeros(16, "int32")))
    with pytest.raises(ValueError, match="finite similarity scores; item 1"):
        trainer.objective_inputs("angle", SentencePairs(A[:2], B[:2], np.array([1.0, np.nan])))
    with pytest.raises(ValueError, match="matryoshka_dims"):
        trainer.train_objective("angle", tiny_encoder(), SCORED, batch_size=4, verbose=0, matryoshka_dims=(8, 4))


def test_run_fingerprint_ignores_the_set_order_of_bpe_special_tokens():
    """KerasHub's BPE tokenizer lists its unsplittable tokens in set order, which
    follows PYTHONHASHSEED: two processes of one run must still agree."""
    encoder = tiny_encoder(kind="roberta")
    pairs = SentencePairs(A[:4], B[:4], np.linspace(0, 1, 4))
    tokenizer = encoder.preprocessor.tokenizer
    tokens = list(tokenizer.unsplittable_tokens)
    assert len(set(tokens)) > 1
    first = trainer.run_fingerprint("regression", encoder, pairs, None, epochs=1)
    tokenizer.unsplittable_tokens = tokens[::-1]
    assert trainer.run_fingerprint("regression", encoder, pairs, None, epochs=1) == first
    # The config's other lists keep their order: they are not sets.
    assert trainer.canonical_config({"name": "x", "a": [3, 1], "special_tokens": ["b", "a"]}) == {
        "a": [3, 1],
        "special_tokens": ["a", "b"],
    }


class EpochSteps(keras.callbacks.Callback):
    """The step total Keras' progress bar is given, and the batches each epoch ran."""

    def __init__(self):
        super().__init__()
        self.targets, self.batches = [], []

    def on_train_begin(self, logs=None):
        self.targets.append(self.params["steps"])

    def on_epoch_begin(self, epoch, logs=None):
        self.batches.append(0)

    def on_train_batch_end(self, batch, logs=None):
        self.batches[-1] += 1


@pytest.mark.parametrize(
    "objective, examples, batching",
    [
        ("regression", STS, None),  # length buckets
        ("regression", STS, "shuffle"),
        ("contrastive", Triplets(A, B, C), None),  # no duplicates: plans drawn ahead
    ],
)
def test_the_epoch_bar_knows_the_steps_of_every_epoch(objective, examples, batching):
    seen = EpochSteps()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # contrastive: the negatives unused
        trainer.train_objective(
            objective, tiny_encoder(), examples, epochs=2, batch_size=3, batching=batching, callbacks=[seen], verbose=0
        )
    assert seen.targets[0] is not None and seen.targets[0] >= -(-16 // 3)
    assert seen.batches == [seen.targets[0]] * 2


DEV_WORDS = "man woman dog cat car sky ball food".split()
# More distinct texts than `encode` shows a progress bar for (8 batches of 32).
DEV = SentencePairs(
    [f"a {x} {y} in the park {z}" for x in DEV_WORDS for y in DEV_WORDS for z in ("red", "blue", "fast")],
    [f"the {y} {x} on the sofa {z}" for x in DEV_WORDS for y in DEV_WORDS for z in ("red", "blue", "fast")],
    np.linspace(0, 5, 192, dtype="float32"),
)


def test_the_dev_line_follows_the_epoch_line_and_no_bar_is_drawn_inside_it(capfd):
    capfd.readouterr()
    trainer.train_objective("regression", tiny_encoder(), STS, dev=DEV, epochs=2, batch_size=4, batching="shuffle")
    out, err = capfd.readouterr()
    lines = out.split("\n")
    for epoch in (1, 2):
        at = next(i for i, line in enumerate(lines) if line.startswith(f"Epoch {epoch}/2 dev "))
        assert re.fullmatch(rf"Epoch {epoch}/2 dev \(\d+\.\ds\) - dev_spearman_cosine: -?\d\.\d{{4}}", lines[at])
        assert "4/4" in lines[at - 1].split("\r")[-1]  # Keras' final epoch line, complete, just above
    assert "1/4" in out and "Unknown" not in out  # the bar has its total from the first step
    assert "encode" not in err and "preparing" not in err  # no bar or status line of the dev encoding
