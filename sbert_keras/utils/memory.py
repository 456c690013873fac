"""Heap memory a finished job freed, handed back to the system.

Why this exists: glibc's allocator keeps the pages of freed heap blocks
mapped, so a process's resident memory stays near its peak after a job
that allocated gigabytes in small blocks and freed them. TensorFlow Lite's
converter is such a job: converting all-mpnet-base-v2 (440 MB of float32
weights) takes a process from 2.3 GB to 7.3 GB, and 6.0 GB stay resident
after the converter has returned and its objects are gone; glibc's
`malloc_trim(0)` hands 3.9 GB of them back. Neither Python nor
TensorFlow calls it, hence this function. On another C library (macOS,
musl) it does nothing.

Example:
```python
model = converter.convert()
memory.release_freed()  # True on glibc
```
"""

import ctypes
import ctypes.util
import functools


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's `malloc_trim`, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


def release_freed():
    """Returns the freed pages of the C heap to the system (glibc's `malloc_trim(0)`); whether it could.

    Nothing in use moves or is freed: only pages no allocation holds are
    unmapped, so it is safe at any time; it costs a pass over the heap,
    so it is called after large jobs, not per call.
    """
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
