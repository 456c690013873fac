"""Free space checked before a write whose size is known, and one error for a full disk.

A write that runs out of space half way leaves a truncated file and, with
h5py, a cascade of errors at garbage collection that can end in a
segmentation fault. So where the size of a write is
known beforehand (a model's weights, an index), the caller checks it with
`check_free_space`; a write that fails with `ENOSPC` anyway is reported as
the same `DiskFullError` by `outputs.replace_atomically`.

Example:
```python
diskspace.check_free_space("runs/sts.partial/encoder.keras", needed=450_000_000)
```
"""

import errno
import os
import shutil


class DiskFullError(OSError):
    """Not enough free space to write `path` (errno `ENOSPC`).

    Args:
        path: str. The file that was about to be written.
        needed: int or None. The bytes it needs (None: the write failed
            with `ENOSPC` though no size was known or checked beforehand).
        free: int. The bytes free on its file system.
    """

    def __init__(self, path, needed, free):
        self.path, self.needed, self.free = os.fspath(path), needed, free
        if needed is None:
            what = f"the disk filled up during the write ({_size(free)} free without it)"
        else:
            what = f"it needs about {_size(needed)} and {_size(free)} are free there"
        super().__init__(
            errno.ENOSPC,
            f"No space left to write {self.path}: {what}. Free some space (or choose another folder) "
            f"and rerun the command.",
        )

    def __str__(self):
        return self.strerror


def _size(num_bytes):
    """`num_bytes` in readable units (`"1.5 MB"`).

    Args:
        num_bytes: int. A size in bytes.
    """
    for unit in ("bytes", "KB", "MB", "GB"):
        if num_bytes < 1000 or unit == "GB":
            return f"{num_bytes:.0f} {unit}" if unit == "bytes" else f"{num_bytes:.1f} {unit}"
        num_bytes /= 1000


def free_bytes(path):
    """The free bytes on the file system that holds `path` (or its nearest existing parent)."""
    folder = os.path.abspath(os.fspath(path))
    while not os.path.exists(folder):
        folder = os.path.dirname(folder)
    return shutil.disk_usage(folder).free


def check_free_space(path, needed):
    """Raises `DiskFullError` before a write of `needed` bytes to `path` that cannot fit.

    Args:
        path: str or path-like. The file about to be written.
        needed: int. Its size (an estimate that errs on the large side).
    """
    free = free_bytes(path)
    if free < needed:
        raise DiskFullError(path, int(needed), free)
