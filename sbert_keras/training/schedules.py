"""The SBERT paper's learning-rate schedule and optimizer.

Keras has warmup only on `CosineDecay`; the paper (and BERT) use linear
warmup then linear decay, so `WarmupLinearDecay` is written here (a
registered `LearningRateSchedule`). `paper_optimizer` is AdamW with it, as
sentence-transformers' `fit` (weight decay 0.01, off biases and LayerNorm
scales and offsets; the global gradient norm clipped at 1.0), or, with
weight decay 0, the paper's plain Adam.

Example:
```python
optimizer = paper_optimizer(total_steps=360)  # AdamW, 2e-5, 36 warmup steps
optimizer = paper_optimizer(360, weight_decay=0, clipnorm=None)  # the paper's Adam
```
"""

import math
import numbers

import keras

from sbert_keras.utils.defaults import CLIP_NORM
from sbert_keras.utils.defaults import NO_WEIGHT_DECAY
from sbert_keras.utils.defaults import PAPER_LEARNING_RATE
from sbert_keras.utils.defaults import PAPER_WARMUP_FRACTION
from sbert_keras.utils.defaults import WEIGHT_DECAY


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


def check_optimizer_settings(weight_decay, clipnorm):
    """Raises a `ValueError` naming the first bad optimizer setting.

    Args:
        weight_decay: a finite number >= 0.
        clipnorm: None or a finite number >= 0.
    """
    for name, value in (("weight_decay", weight_decay), ("clipnorm", clipnorm)):
        if value is None and name == "clipnorm":
            continue
        real = isinstance(value, numbers.Real) and not isinstance(value, bool)
        if not real or not math.isfinite(value) or value < 0:
            raise ValueError(f"`{name}` must be a finite number >= 0; received {value!r}.")


def paper_optimizer(
    total_steps,
    learning_rate=PAPER_LEARNING_RATE,
    warmup_fraction=PAPER_WARMUP_FRACTION,
    weight_decay=WEIGHT_DECAY,
    clipnorm=CLIP_NORM,
):
    """The paper's schedule over `total_steps` steps, with AdamW or Adam.

    Args:
        total_steps: int. All training steps (epochs x steps per epoch).
        learning_rate: float. The peak learning rate.
        warmup_fraction: float. Share of steps with linear warmup.
        weight_decay: float >= 0. With > 0, `keras.optimizers.AdamW` with
            this decoupled weight decay (scaled by the learning rate, as
            torch's AdamW), except on biases and LayerNorm scales and
            offsets (`defaults.NO_WEIGHT_DECAY`); 0: plain Adam. Default
            `defaults.WEIGHT_DECAY` (0.01).
        clipnorm: float or None. Clip the gradients to this global norm
            (`global_clipnorm`); None or 0: no clipping. Default
            `defaults.CLIP_NORM` (1.0).

    Returns:
        A Keras optimizer.
    """
    check_optimizer_settings(weight_decay, clipnorm)
    schedule = WarmupLinearDecay(learning_rate, total_steps, int(round(warmup_fraction * total_steps)))
    clip = {"global_clipnorm": float(clipnorm)} if clipnorm else {}
    if not weight_decay:
        return keras.optimizers.Adam(schedule, **clip)
    optimizer = keras.optimizers.AdamW(schedule, weight_decay=float(weight_decay), **clip)
    optimizer.exclude_from_weight_decay(var_names=list(NO_WEIGHT_DECAY))
    return optimizer
