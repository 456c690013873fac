"""The SBERT paper's training recipe: 2e-5, batch 16, 10 % linear warmup; AdamW, clip 1.0.

`train_objective` checks its arguments and that the data fits the
objective before anything trains, and resumes an interrupted run from a
`backup.RunBackup` tied to the run's configuration and data. The schedule
and optimizer live in `sbert_keras.training.schedules`, the compute vocabulary
(`set_compute`) in `sbert_keras.model.precision`; both are importable from here.
Keras' `fit` runs the loop; this module adds the checks, the data pipeline
and the resumable backup around it, which Keras does not have, and what the
run shows and writes: an epoch bar with its total (the dataset's number of
batches is known), the dev figures on a line of their own after each
epoch's, and, with `output_dir`, a CSV log of every step
(`step_log.StepLog`).
"""

import dataclasses
import hashlib
import json
import math
import numbers
import os
import random

import keras
import numpy as np

from sbert_keras.compat import keras_training
from sbert_keras.data.examples import NLIPairs
from sbert_keras.data.examples import Triplets
from sbert_keras.data.examples import nli_to_triplets
from sbert_keras.evaluation.evaluators import EvaluationCallback
from sbert_keras.losses import replicas
from sbert_keras.model.precision import set_compute  # noqa: F401 (public here too)
from sbert_keras.model.precision import set_precision  # noqa: F401 (public here too)
from sbert_keras.training import distributed
from sbert_keras.training.backend_fit import fit_batches
from sbert_keras.training.backend_fit import has_strategy
from sbert_keras.training.backend_fit import refuse_strategy_off_tensorflow
from sbert_keras.training.backup import RunBackup
from sbert_keras.training.backup import resumed_fits
from sbert_keras.training.fit_checks import check_finite_weights
from sbert_keras.training.host_pipelines import batch_count
from sbert_keras.training.objectives import LABEL_DTYPES
from sbert_keras.training.objectives import MODEL_CLASSES  # noqa: F401 (public here too)
from sbert_keras.training.objectives import array_sha256
from sbert_keras.training.objectives import build_model
from sbert_keras.training.objectives import objective_inputs
from sbert_keras.training.objectives import objective_loss
from sbert_keras.training.objectives import teacher_targets
from sbert_keras.training.pipelines import siamese_dataset
from sbert_keras.training.schedules import WarmupLinearDecay  # noqa: F401 (public here too)
from sbert_keras.training.schedules import check_optimizer_settings
from sbert_keras.training.schedules import paper_optimizer
from sbert_keras.training.step_log import StepLog
from sbert_keras.utils.atomic_io import TRAINING_LOG
from sbert_keras.utils.backends import tensorflow as tf
from sbert_keras.utils.checks import check_positive_int
from sbert_keras.utils.defaults import CLIP_NORM
from sbert_keras.utils.defaults import DEFAULT_SAVE_STEPS  # noqa: F401 (public here too)
from sbert_keras.utils.defaults import MAX_LEARNING_RATE
from sbert_keras.utils.defaults import PAPER_BATCH_SIZE
from sbert_keras.utils.defaults import PAPER_LEARNING_RATE
from sbert_keras.utils.defaults import PAPER_WARMUP_FRACTION
from sbert_keras.utils.defaults import WEIGHT_DECAY


def check_hyperparameters(epochs, batch_size, learning_rate, warmup_fraction=PAPER_WARMUP_FRACTION):
    """Raises a `ValueError` naming the first bad training hyperparameter.

    Args:
        epochs: int >= 1.
        batch_size: int >= 1.
        learning_rate: float in (0, `MAX_LEARNING_RATE`] (a negative rate ascends the loss,
            one above 1 diverges at the first steps).
        warmup_fraction: float in [0, 1].
    """
    check_positive_int(epochs, "epochs")
    check_positive_int(batch_size, "batch_size")
    for name, value, low, high in (
        ("learning_rate", learning_rate, 0.0, MAX_LEARNING_RATE),
        ("warmup_fraction", warmup_fraction, 0.0, 1.0),
    ):
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or not low <= value <= high or (name == "learning_rate" and value <= 0):
            bounds = f"a number in (0, {MAX_LEARNING_RATE:g}]" if name == "learning_rate" else "a number in [0, 1]"
            raise ValueError(f"`{name}` must be {bounds}; received {value!r}.")


def seed_everything(seed, model=None):
    """Seeds Python, NumPy and the Keras backend (TensorFlow, JAX or PyTorch), and `model`'s dropout.

    `keras.utils.set_random_seed` seeds what is built after it (a new head's
    initial weights) and the global generators; a layer's dropout draws from
    its own `SeedGenerator`, whose state was fixed when the layer was built.
    Each of `model`'s seed-generator states is therefore set again, in the
    model's variable order, from the freshly seeded Python generator: the
    same seed gives the same dropout masks whenever the encoder was built.

    Args:
        seed: int.
        model: a Keras model or layer, or None.
    """
    keras.utils.set_random_seed(seed)
    for variable in [] if model is None else model.variables:
        if variable.name == "seed_generator_state":
            variable.assign(np.array([random.randint(1, int(1e9)), 0], dtype=variable.dtype))


def dev_callback(objective, model, dev, prefix="dev_", verbose=0):
    """An `EvaluationCallback` suited to the dev data's kind (`verbose`: one line per evaluation)."""
    kwargs = {"prefix": prefix, "verbose": verbose}
    if isinstance(dev, NLIPairs) and objective == "classification":
        return EvaluationCallback.nli(model, dev.sentence_a, dev.sentence_b, dev.labels, **kwargs)
    if isinstance(dev, NLIPairs):
        dev = nli_to_triplets(dev)
    if isinstance(dev, Triplets):
        return EvaluationCallback.triplets(model.encoder, dev.anchor, dev.positive, dev.negative, **kwargs)
    return EvaluationCallback.sts(model.encoder, dev.sentence_a, dev.sentence_b, dev.labels, **kwargs)


def data_hash(examples):
    """A SHA-256 of a data dataclass's texts and labels (`None` for `None`)."""
    if examples is None:
        return None
    digest = hashlib.sha256(type(examples).__name__.encode())
    for field in dataclasses.fields(examples):
        value = getattr(examples, field.name)
        if isinstance(value, np.ndarray):
            digest.update(np.ascontiguousarray(value, dtype="float64").tobytes())
        else:
            digest.update(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


# Config entries that KerasHub fills from a Python set (a BPE tokenizer's
# special and unsplittable tokens): their order follows PYTHONHASHSEED, so it
# says nothing about the run.
SET_VALUED_KEYS = frozenset({"unsplittable_tokens", "special_tokens"})


def _canonical_entry(key, value):
    if key in SET_VALUED_KEYS and isinstance(value, list):
        return sorted(value, key=str)
    return canonical_config(value)


def canonical_config(config):
    """A config as the same run gives it in any process.

    Drops the `name` keys (Keras numbers them per process) and sorts the
    lists of `SET_VALUED_KEYS`, whose order changes with `PYTHONHASHSEED`.

    Args:
        config: a (nested) `get_config()` dict.
    """
    if isinstance(config, dict):
        return {key: _canonical_entry(key, value) for key, value in config.items() if key != "name"}
    if isinstance(config, (list, tuple)):
        return [canonical_config(v) for v in config]
    return config


def run_fingerprint(objective, encoder, train, dev, **settings):
    """What identifies a run: objective, encoder config, data hashes, settings.

    Two calls of `train_objective` resume each other's backup only when this
    is equal (the encoder's weights are not part of it: a restarted process
    builds the encoder again before the backup restores its weights). It is
    the same in every process: the config goes through `canonical_config`.

    Args:
        objective: str. The objective's name.
        encoder: the `SentenceEncoder` being trained.
        train: the training examples (a data dataclass).
        dev: the dev examples or None.
        **settings: JSON-serialisable hyperparameters and run facts.
    """
    config = json.dumps(canonical_config(encoder.get_config()), sort_keys=True, default=str)
    return {
        "objective": objective,
        "encoder_config": hashlib.sha256(config.encode()).hexdigest(),
        "sequence_length": getattr(encoder, "sequence_length", None),
        "dtype_policy": keras.config.dtype_policy().name,
        "train_data": data_hash(train),
        "train_examples": len(train),
        "dev_data": data_hash(dev),
        **json.loads(json.dumps(settings, default=str)),
    }


@refuse_strategy_off_tensorflow
@distributed.under_strategy
def train_objective(
    objective,
    encoder,
    train,
    dev=None,
    epochs=1,
    batch_size=PAPER_BATCH_SIZE,
    learning_rate=PAPER_LEARNING_RATE,
    warmup_fraction=PAPER_WARMUP_FRACTION,
    output_dir=None,
    seed=0,
    callbacks=(),
    verbose="auto",
    sts_mapping="unit",
    save_freq="epoch",
    overwrite=False,
    keep_backup=False,
    run_info=None,
    teacher=None,
    batching=None,
    weight_decay=WEIGHT_DECAY,
    clipnorm=CLIP_NORM,
    **model_kwargs,
):
    """Fine-tunes `encoder` with one SBERT objective and the paper's recipe.

    Checks the arguments and that `train` fits the objective, then builds
    the siamese model around the (shared) encoder, a length-bucketed
    shuffled dataset, AdamW (`schedules.paper_optimizer`) with 10 % linear
    warmup then linear decay, an optional dev `EvaluationCallback` (its
    metrics land in the `History`),
    and, with `output_dir`, a `backup.RunBackup` in `output_dir/backup`: a
    call interrupted at any point resumes when run again with the same
    configuration and data, past the steps already done. The returned
    history covers every epoch, including those before an interruption.
    A resumed run equals the uninterrupted one: the backup holds the
    weights, the optimizer, the dropout's seed states, the history and the
    epoch's running loss, and each epoch's batch order is fixed by the seed
    and the epoch (`siamese_dataset`'s `passes`). A run whose loss or
    weights stop being finite stops with a `fit_checks.NonFiniteLossError`
    naming the step; the backup keeps the last good state.

    Args:
        objective: str. One of `defaults.OBJECTIVES`: `"regression"`,
            `"triplet"`, `"classification"`, `"contrastive"`, `"cosent"`,
            `"angle"`, `"online-contrastive"`, `"batch-hard"` or
            `"distill"` (the data, model and loss of each: the table of
            `sbert_keras.training.objectives`).
        encoder: the `SentenceEncoder` to train (updated in place).
        train: the training examples (see `objective_inputs`).
        dev: optional `SentencePairs` (STS), `NLIPairs` or `Triplets`.
        epochs: int. Passes over `train`.
        batch_size: int. 16 in the paper.
        learning_rate: float. The peak learning rate, 2e-5 in the paper.
        warmup_fraction: float. Share of steps with linear warmup.
        output_dir: str or None. Where the backup lives while training, and
            the step log `training_log.csv` (`step_log.StepLog`: epoch,
            step, loss, mean_loss, learning_rate; a resumed run goes on
            with it).
        seed: int. Seeds everything random in the run (`seed_everything`):
            the batch order, dropout and a new head's initial weights, so the
            same call on the same machine gives the same weights.
        callbacks: extra Keras callbacks.
        verbose: passed to `fit` (a progress bar with the epoch's steps by
            default), and any dev evaluation prints one line after each
            epoch's.
        sts_mapping: str. How the regression objective maps 0-5 scores to
            cosine targets: `"unit"` (score / 5) or `"keras-io"`
            (score / 2.5 - 1); see `sbert_keras.data.examples.scale_sts_score`.
        save_freq: `"epoch"` or int. Back up at each epoch end, or also
            every `save_freq` steps (a kill then loses at most that many).
        overwrite: bool. Discard a backup left by a different run (else a
            `backup.StaleBackupError` names the fields that differ).
        keep_backup: bool. Leave the backup after a clean finish (the CLI
            deletes it itself once its outputs are saved).
        run_info: dict or None. Extra fingerprint fields (e.g. file names).
        strategy: a `tf.distribute` strategy or None. Build, compile and fit
            under its scope, e.g. `distributed.multi_worker_strategy()` on
            every worker (`distributed.under_strategy`); `batch_size` is global.
        batching: str or None. `pipelines.siamese_dataset`'s batching
            (`"bucket"`, `"no_duplicates"`, `"shuffle"`); None: the
            objective's default (`defaults.BATCHING`).
        weight_decay: float >= 0. > 0: AdamW with this weight decay
            (`schedules.paper_optimizer`; 0.01 as sentence-transformers);
            0: the paper's Adam.
        clipnorm: float or None. Clip gradients to this global norm (1.0);
            None or 0: no clipping.
        teacher: the distill objective's teacher: a `SentenceEncoder`
            (it encodes `train.texts` once, at float32) or its embeddings
            `(len(train), dim)`; the student's dimension must match.
        **model_kwargs: passed to the model (e.g. `concatenation`,
            `matryoshka_dims`, not with `"angle"`); contrastive only:
            `hard_negatives=True` (train on the triplets' negatives too) and
            `mini_batch_size=N` (GradCache: `CachedContrastiveSiamese`).

    Returns:
        `(model, history)`.

    Example:
    ```python
    model, history = train_objective("regression", encoder, read_sts("sts-train.csv"),
                                     epochs=4, output_dir="runs/sts", save_freq=500)
    ```
    """
    check_hyperparameters(epochs, batch_size, learning_rate, warmup_fraction)
    check_optimizer_settings(weight_decay, clipnorm)
    if save_freq != "epoch":
        check_positive_int(save_freq, "save_freq")
    num_classes = model_kwargs.get("num_classes", 3)
    hard_negatives = model_kwargs.get("hard_negatives", False)
    columns, labels, extra = objective_inputs(objective, train, sts_mapping, num_classes, hard_negatives)
    if teacher is not None and objective != "distill":
        raise ValueError(f"`teacher` applies to the distill objective only; objective {objective!r}.")
    if objective == "distill":
        labels = teacher_targets(teacher, columns[0], encoder)
        run_info = {**(run_info or {}), "teacher_embeddings_sha256": array_sha256(labels)}
    seed_everything(seed)  # the new head's initial weights
    model = build_model(objective, encoder, {**model_kwargs, **extra})
    seed_everything(seed, model)  # and the dropout of the encoder, built earlier

    def dataset_of(passes):
        """The batches of these passes (epochs), each in its own order: a resumed run sees the same batches."""
        dataset = siamese_dataset(
            columns,
            labels,
            encoder.preprocessor,
            model.active_roles,
            batch_size=batch_size,
            seed=seed,
            label_dtype=LABEL_DTYPES.get(objective, "float32"),
            objective=objective,
            batching=batching,
            epochs=epochs,
            passes=passes,
        )
        return distributed.shard_by_data(dataset) if has_strategy() else dataset

    dataset = dataset_of(range(epochs))
    steps = batch_count(dataset) // epochs  # every epoch's; the schedule ends (lr 0) just after the last
    loss = objective_loss(objective)
    replicas_in_sync = tf.distribute.get_strategy().num_replicas_in_sync if has_strategy() else 1
    if clipnorm and replicas_in_sync > 1:
        # Keras clips each replica's gradients before they are summed: not the global norm of one process.
        raise ValueError(
            f"`clipnorm={clipnorm}` under a strategy with {replicas_in_sync} replicas: Keras would clip each "
            "replica's gradients before summing them, not the global gradient; pass clipnorm=None "
            "(`--clip-norm 0`)."
        )
    if has_strategy():  # workers shard the batches; the loss and fit fixed for Keras 3.15
        loss = replicas.ReplicaScaledLoss(model.default_loss() if loss == "auto" else loss)
    optimizer = paper_optimizer(epochs * steps, learning_rate, warmup_fraction, weight_decay, clipnorm)
    model.compile(optimizer=optimizer, loss=loss)
    if has_strategy():
        distributed.prepare_model(model)
    # Keras' epoch line first, then the dev line; the step log and the dev figures before the backup.
    progress_bar = verbose and not any(isinstance(c, keras.callbacks.ProgbarLogger) for c in callbacks)
    all_callbacks = [keras.callbacks.ProgbarLogger()] if progress_bar else []
    if dev is not None:
        all_callbacks.append(dev_callback(objective, model, dev, verbose=int(bool(verbose))))
    backup = None
    probe = model.encoder.preprocessor([str(text) for text in list(columns[0])[:2]])  # two training texts

    def check(epoch, steps_done):  # before each backup save, and at the end
        check_finite_weights(model, probe, epoch * steps + steps_done)

    fits = [(dataset, {"epochs": epochs, "steps_per_epoch": steps})]
    if output_dir is not None:
        fingerprint = run_fingerprint(
            objective,
            encoder,
            train,
            dev,
            epochs=epochs,
            batch_size=batch_size,
            learning_rate=learning_rate,
            warmup_fraction=warmup_fraction,
            seed=seed,
            sts_mapping=sts_mapping,
            batching=batching,
            weight_decay=weight_decay,
            clipnorm=clipnorm,
            model_kwargs=model_kwargs,
            **(run_info or {}),
        )
        backup = RunBackup(os.path.join(output_dir, "backup"), fingerprint, save_freq, overwrite, check=check)
        state = backup.restore(model, epochs, steps) or {"epoch": 0, "steps_done": 0}
        fits = resumed_fits(dataset_of, dataset, state["epoch"], state["steps_done"], epochs, steps)
        done = state["epoch"] * steps + state["steps_done"]
        all_callbacks += [StepLog(os.path.join(output_dir, TRAINING_LOG), start_step=done), backup]
    all_callbacks.extend(callbacks)
    history = keras.callbacks.History()
    for fit_data, fit_kwargs in fits:
        history = fit_batches(model, fit_data, callbacks=all_callbacks, verbose=verbose, **fit_kwargs)
    if backup is None:
        check(epochs, 0)  # the backup checks at each save, the last one included
    keras_training.set_initial_epoch(model, None)  # Keras would start a later `fit` at the restored epoch.
    if backup is not None:
        history.history = backup.history
        history.epoch = list(range(len(next(iter(backup.history.values()), []))))
        history.set_model(model)
        if not keep_backup:
            backup.delete()
    return model, history
