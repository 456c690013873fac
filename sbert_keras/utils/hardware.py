"""What this machine offers: CPU flags, a GPU, and the precision `"auto"` picks.

The one place that asks the hardware. Everything else (the precision
vocabulary, the inference routes, the oneDNN and XNNPACK int8 kernels, the
cold-start cache key) calls these functions through this module, so a test
that fakes a CPU patches one place.
"""

import functools

import tensorflow as tf

# CPU flags that give bf16 matmuls (AVX512-BF16, AMX).
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
# CPU flags that give int8 dot products (VNNI, AMX); without them int8 is slower than float32.
INT8_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})


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
    """Whether TensorFlow sees a GPU (asked once per process)."""
    return bool(tf.config.list_physical_devices("GPU"))


def has_bf16():
    """Whether the CPU has bf16 matmul instructions."""
    return bool(BF16_FLAGS & cpu_flags())


def has_int8():
    """Whether the CPU has int8 dot-product instructions."""
    return bool(INT8_FLAGS & cpu_flags())


def auto_precision():
    """`"float16"` on a GPU, `"bfloat16"` on a CPU with AVX512-BF16/AMX, else `"float32"`."""
    if has_gpu():
        return "float16"
    return "bfloat16" if has_bf16() else "float32"
