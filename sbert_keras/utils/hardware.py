"""What this machine offers: CPU flags, a GPU, and the precision `"auto"` picks.

The one place that asks the hardware. `Host` is what the inference engine
and its routes are given (`current_host()` by default), so a test that fakes
a machine builds a `Host(cpu_flags=..., gpu=...)` instead of patching
globals. The module functions (`has_bf16`, `has_int8`, `auto_precision`)
answer for the current host, for callers outside the engine (the precision
vocabulary of `sbert_keras.model.precision`).
"""

import dataclasses
import functools

from sbert_keras.utils import backends
from sbert_keras.utils import console
from sbert_keras.utils.backends import tensorflow as tf

# CPU flags that give bf16 matmuls (AVX512-BF16, AMX).
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
# CPU flags that give int8 dot products (VNNI, AMX); without them int8 is slower than float32.
INT8_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})
# The 256-bit vector units of an AVX2 CPU, and the flag of the 512-bit ones it lacks.
AVX2_FLAGS, AVX512_FLAG = frozenset({"avx2", "fma"}), "avx512f"


@dataclasses.dataclass(frozen=True)
class Host:
    """A machine as inference sees it: its CPU flags and whether TensorFlow has a GPU.

    Args:
        cpu_flags: iterable of str. The `flags` of `/proc/cpuinfo` (kept as a frozenset).
        gpu: bool. Whether Keras' backend sees a GPU.

    Example:
    ```python
    Host(cpu_flags={"avx2", "fma"}).auto_precision()  # "float32"
    Host(cpu_flags={"avx512_bf16"}).bf16  # True
    Host(cpu_flags={"avx2", "fma"}).avx2_only  # True
    Host(cpu_flags={"avx2", "fma", "avx512f"}).avx2  # True
    ```
    """

    cpu_flags: frozenset = frozenset()
    gpu: bool = False

    def __post_init__(self):
        object.__setattr__(self, "cpu_flags", frozenset(self.cpu_flags))
        object.__setattr__(self, "gpu", bool(self.gpu))

    @property
    def bf16(self):
        """Whether the CPU has bf16 matmul instructions."""
        return bool(BF16_FLAGS & self.cpu_flags)

    @property
    def int8(self):
        """Whether the CPU has int8 dot-product instructions."""
        return bool(INT8_FLAGS & self.cpu_flags)

    @property
    def avx2(self):
        """Whether the CPU has AVX2 and FMA (with or without AVX-512)."""
        return AVX2_FLAGS <= self.cpu_flags

    @property
    def avx2_only(self):
        """Whether the CPU's widest vectors are AVX2's (with FMA): no AVX-512."""
        return self.avx2 and AVX512_FLAG not in self.cpu_flags

    def runnable_precision(self, precision):
        """`precision`, or what runs instead where it has no fast kernels (a resolved word, not `"auto"`).

        TensorFlow's CPU kernels have no fast float16 matmul: `"float16"`
        without a GPU is far slower than float32. It runs as `"bfloat16"` where the CPU has AVX512-BF16/AMX (the
        same 8-bit-exponent speed-up, and the same self-check gate), else as
        `"float32"`.

        Args:
            precision: str. A resolved precision word.

        Example:
        ```python
        Host(cpu_flags={"avx512_bf16"}).runnable_precision("float16")  # "bfloat16"
        Host(gpu=True).runnable_precision("float16")  # "float16"
        ```
        """
        if precision == "float16" and not self.gpu:
            return "bfloat16" if self.bf16 else "float32"
        return precision

    def auto_precision(self):
        """`"float16"` on a GPU, `"bfloat16"` on a CPU with AVX512-BF16/AMX, else `"float32"`."""
        if self.gpu:
            return "float16"
        return "bfloat16" if self.bf16 else "float32"


@functools.lru_cache(maxsize=1)
def cpu_flags():
    """The `flags` of the first processor in `/proc/cpuinfo`, a frozenset (empty if unreadable)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


@functools.lru_cache(maxsize=1)
def has_gpu():
    """Whether Keras' backend sees a GPU (asked once per process; JAX and torch are optional, imported here)."""
    backend = backends.keras_backend()
    if backend == "jax":
        import jax

        return any(device.platform == "gpu" for device in jax.devices())
    if backend == "torch":
        import torch

        return torch.cuda.is_available()
    with console.startup_lines_held():  # `E0000 ... failed call to cuInit` on a machine without a GPU
        return bool(tf.config.list_physical_devices("GPU"))


def current_host():
    """The `Host` of this process (`cpu_flags()`, `has_gpu()`)."""
    return Host(cpu_flags(), has_gpu())


def has_bf16():
    """Whether this machine's CPU has bf16 matmul instructions."""
    return current_host().bf16


def has_int8():
    """Whether this machine's CPU has int8 dot-product instructions."""
    return current_host().int8


def auto_precision():
    """`current_host().auto_precision()`: float16 on a GPU, bfloat16 with AVX512-BF16/AMX, else float32."""
    return current_host().auto_precision()
