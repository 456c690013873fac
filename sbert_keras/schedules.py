"""The SBERT paper's learning-rate schedule and optimizer.

Keras has warmup only on `CosineDecay`; the paper (and BERT) use linear
warmup then linear decay, so `WarmupLinearDecay` is written here (a
registered `LearningRateSchedule`). `paper_optimizer` is Adam with it.

Example:
```python
optimizer = paper_optimizer(total_steps=360)  # Adam, 2e-5, 36 warmup steps
```
"""

import keras

from sbert_keras.defaults import PAPER_LEARNING_RATE
from sbert_keras.defaults import PAPER_WARMUP_FRACTION


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
