"""The SBERT paper's training recipe: Adam 2e-5, batch 16, 10 % linear warmup.

Keras has warmup only on `CosineDecay`; the paper (and BERT) use linear
warmup then linear decay, so `WarmupLinearDecay` is written here (a
registered `LearningRateSchedule`). Precision follows the hardware:
`mixed_float16` on a GPU, `mixed_bfloat16` on a CPU with bf16 instructions
(AVX512-BF16 / AMX), else float32.
"""

import os
import warnings

import keras
import tensorflow as tf

from sbert_keras.siamese import PAPER_LEARNING_RATE

PAPER_BATCH_SIZE = 16
PAPER_WARMUP_FRACTION = 0.1


@keras.saving.register_keras_serializable(package="sbert_keras")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to `learning_rate`, then linear decay to 0.

    Args:
        learning_rate: float. The peak learning rate (2e-5 in the paper).
        total_steps: int. All training steps (epochs x steps per epoch).
        warmup_steps: int. Steps of the warmup (10 % of `total_steps`).
    """

    def __init__(self, learning_rate, total_steps, warmup_steps):
        if total_steps < 1 or not 0 <= warmup_steps <= total_steps:
            raise ValueError(
                f"Need 0 <= warmup_steps <= total_steps and total_steps >= 1; "
                f"received warmup_steps={warmup_steps}, total_steps={total_steps}."
            )
        self.learning_rate = learning_rate
        self.total_steps = total_steps
        self.warmup_steps = warmup_steps

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        warmup = keras.ops.cast(max(self.warmup_steps, 1), "float32")
        decay = keras.ops.cast(max(self.total_steps - self.warmup_steps, 1), "float32")
        rising = step / warmup
        falling = keras.ops.maximum(0.0, (self.total_steps - step) / decay)
        factor = keras.ops.where(step < self.warmup_steps, rising, falling)
        return self.learning_rate * factor

    def get_config(self):
        return {
            "learning_rate": self.learning_rate,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
        }


def paper_optimizer(total_steps, learning_rate=PAPER_LEARNING_RATE, warmup_fraction=PAPER_WARMUP_FRACTION):
    """Adam with the paper's schedule over `total_steps` training steps."""
    schedule = WarmupLinearDecay(learning_rate, total_steps, int(round(warmup_fraction * total_steps)))
    return keras.optimizers.Adam(schedule)


def cpu_supports_bfloat16():
    """True when the CPU advertises AVX512-BF16 or AMX-BF16 (Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = f.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def auto_precision():
    """`"mixed_float16"` on GPU, `"mixed_bfloat16"` on a bf16 CPU, else float32."""
    if tf.config.list_physical_devices("GPU"):
        return "mixed_float16"
    if cpu_supports_bfloat16():
        return "mixed_bfloat16"
    return "float32"


def set_precision(policy="auto"):
    """Sets the global Keras dtype policy; `"auto"` picks by hardware.

    Call it before building the encoder. Returns the policy name. The
    sentence embeddings, similarities and losses stay float32 whatever the
    policy; only the backbone computes in the lower precision.
    """
    name = auto_precision() if policy in (None, "auto") else policy
    allowed = ("float32", "mixed_float16", "mixed_bfloat16")
    if name not in allowed:
        raise ValueError(f"`policy` must be 'auto' or one of {allowed}. Received {policy!r}.")
    keras.config.set_dtype_policy(name)
    return name


def training_callbacks(output_dir, extra=()):
    """`BackupAndRestore` (resume an interrupted fit) plus `extra` callbacks.

    The backup lives in `output_dir/backup`; Keras deletes it when `fit`
    ends normally and restores from it when the same `fit` is run again after
    an interruption.
    """
    return [keras.callbacks.BackupAndRestore(os.path.join(output_dir, "backup")), *extra]


OBJECTIVES = ("regression", "triplet", "classification", "contrastive")


def objective_inputs(objective, examples, sts_mapping="unit"):
    """The text columns and labels an objective trains on.

    Args:
        objective: str. One of `OBJECTIVES`.
        examples: `data.SentencePairs` (regression: raw 0-5 STS scores,
            rescaled here with `data.scale_sts_score(mapping=sts_mapping)`), `data.NLIPairs`
            (classification) or `data.Triplets` (triplet, contrastive;
            contrastive uses the negatives as hard negatives when present).

    Returns:
        `(columns, labels, model_kwargs)`.
    """
    from sbert_keras import data

    if objective not in OBJECTIVES:
        raise ValueError(f"`objective` must be one of {OBJECTIVES}. Received {objective!r}.")
    if objective in ("regression", "classification"):
        if not isinstance(examples, data.SentencePairs):
            raise TypeError(f"The {objective} objective trains on sentence pairs; "
                            f"received {type(examples).__name__}.")
        if objective == "regression":
            targets = data.scale_sts_score(examples.labels, mapping=sts_mapping)
            return [examples.sentence_a, examples.sentence_b], targets, {}
        return [examples.sentence_a, examples.sentence_b], examples.labels, {}
    if isinstance(examples, data.NLIPairs):
        examples = data.nli_to_triplets(examples)
    if not isinstance(examples, data.Triplets):
        raise TypeError(f"The {objective} objective trains on triplets; "
                        f"received {type(examples).__name__}.")
    if objective == "triplet":
        if examples.negative is None:
            raise ValueError("The triplet objective needs negatives.")
        return [examples.anchor, examples.positive, examples.negative], None, {}
    hard = examples.negative is not None
    return list(examples.as_tuple()), None, {"hard_negatives": hard}


def dev_callback(objective, model, dev, prefix="dev_"):
    """An `EvaluationCallback` suited to the dev data's kind."""
    from sbert_keras import data
    from sbert_keras.evaluation import EvaluationCallback

    if isinstance(dev, data.NLIPairs) and objective == "classification":
        return EvaluationCallback.nli(model, dev.sentence_a, dev.sentence_b, dev.labels, prefix=prefix)
    if isinstance(dev, data.NLIPairs):
        dev = data.nli_to_triplets(dev)
    if isinstance(dev, data.Triplets):
        return EvaluationCallback.triplets(model.encoder, dev.anchor, dev.positive, dev.negative, prefix=prefix)
    return EvaluationCallback.sts(model.encoder, dev.sentence_a, dev.sentence_b, dev.labels, prefix=prefix)


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
    **model_kwargs,
):
    """Fine-tunes `encoder` with one SBERT objective and the paper's recipe.

    Builds the siamese model around the (shared) encoder, a length-bucketed
    shuffled dataset, Adam with 10 % linear warmup then linear decay, an
    optional dev `EvaluationCallback` (its metrics land in the `History`),
    and `BackupAndRestore` in `output_dir/backup` so an interrupted call
    resumes when run again.

    Args:
        objective: str. `"regression"`, `"triplet"`, `"classification"` or
            `"contrastive"`.
        encoder: the `SentenceEncoder` to train (updated in place).
        train: the training examples (see `objective_inputs`).
        dev: optional `SentencePairs` (STS), `NLIPairs` or `Triplets`.
        epochs: int. Passes over `train`.
        batch_size: int. 16 in the paper.
        learning_rate: float. The peak learning rate, 2e-5 in the paper.
        warmup_fraction: float. Share of steps with linear warmup.
        output_dir: str or None. Where the backup lives while training.
        seed: int. Shuffle seed.
        callbacks: extra Keras callbacks.
        verbose: passed to `fit` (a progress bar by default).
        sts_mapping: str. How the regression objective maps 0-5 scores to
            cosine targets: `"unit"` (score / 5) or `"keras-io"`
            (score / 2.5 - 1); see `data.scale_sts_score`.
        **model_kwargs: passed to the siamese model (e.g. `concatenation`).

    Returns:
        `(model, history)`.
    """
    from sbert_keras import siamese
    from sbert_keras.pipelines import bucket_boundaries
    from sbert_keras.pipelines import siamese_dataset

    columns, labels, extra = objective_inputs(objective, train, sts_mapping)
    model_cls = {
        "regression": siamese.RegressionSiamese,
        "triplet": siamese.TripletSiamese,
        "classification": siamese.ClassificationSiamese,
        "contrastive": siamese.ContrastiveSiamese,
    }[objective]
    model = model_cls(encoder, **extra, **model_kwargs)
    dataset = siamese_dataset(
        columns, labels, encoder.preprocessor, model.active_roles, batch_size=batch_size,
        seed=seed, label_dtype="int32" if objective == "classification" else "float32",
    )
    # Bucketing leaves at most one partial batch per bucket, so an epoch has
    # at most this many steps; the schedule ends (lr 0) just after the last.
    steps = -(-len(columns[0]) // batch_size) + len(bucket_boundaries(encoder.sequence_length))
    model.compile(optimizer=paper_optimizer(epochs * steps, learning_rate, warmup_fraction))
    all_callbacks = list(callbacks)
    if dev is not None:
        all_callbacks.append(dev_callback(objective, model, dev))
    if output_dir is not None:
        all_callbacks = training_callbacks(output_dir, all_callbacks)
    with warnings.catch_warnings():
        # The bucketed dataset has no known length: Keras notices the end of
        # the first epoch and says so; that is expected here.
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        history = model.fit(dataset, epochs=epochs, callbacks=all_callbacks,
                            verbose=verbose, shuffle=False)
    return model, history
