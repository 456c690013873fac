"""The SBERT paper's training recipe: Adam 2e-5, batch 16, 10 % linear warmup.

Keras has warmup only on `CosineDecay`; the paper (and BERT) use linear
warmup then linear decay, so `WarmupLinearDecay` is written here (a
registered `LearningRateSchedule`). Precision follows the hardware:
`mixed_float16` on a GPU, `mixed_bfloat16` on a CPU with bf16 instructions
(AVX512-BF16 / AMX), else float32.
"""

import os

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
