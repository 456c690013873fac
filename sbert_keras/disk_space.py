"""Disk space: free bytes, and one clear error when an output does not fit.

A full disk surfaces as many different errors (`OSError` with `ENOSPC`,
TensorFlow's `ResourceExhaustedError`, a C++ library's `RuntimeError`
text); `is_disk_full` recognises them and `DiskFullError` says it in one
line naming the path, the space needed and the space free.

Example:
```python
needed = 90_000_000
free = free_bytes("serving/sbert/1")
if needed > free:
    raise DiskFullError("serving/sbert/1", needed, free)
```
"""

import errno
import os
import shutil


class DiskFullError(OSError):
    """Not enough disk space for an output; nothing of it was left behind.

    An `OSError` with `errno.ENOSPC` whose message is one line naming the
    path, the space needed and the space free (the CLI prints it as is).

    Args:
        path: str. The output that could not be written.
        needed: int. Bytes it needs at least (an estimate, or 0 when unknown).
        free: int. Bytes that were free on its file system.
    """

    def __init__(self, path, needed, free):
        self.path, self.needed, self.free = os.fspath(path), needed, free
        if needed > free:
            need = f"it needs at least {format_bytes(needed)} and {format_bytes(free)} are free"
        else:  # the estimate fitted (or there was none), the write did not
            need = f"it needs more than the {format_bytes(free)} that were free"
            need += f" (estimated {format_bytes(needed)})" if needed else ""
        super().__init__(
            f"not enough disk space for {self.path}: {need}; nothing was written. "
            "Free some space or choose another folder."
        )
        self.errno = errno.ENOSPC


def format_bytes(size):
    """`size` in bytes as a short readable string (`"1.5 MB"`, decimal units)."""
    units = ("bytes", "kB", "MB", "GB", "TB")
    power = 0
    while size >= 1000 and power < len(units) - 1:
        size, power = size / 1000, power + 1
    return f"{size:.0f} bytes" if power == 0 else f"{size:.1f} {units[power]}"


def free_bytes(path):
    """Free bytes (for this user) on the file system that holds `path` or its first existing parent."""
    folder = os.path.abspath(path)
    while not os.path.exists(folder):
        folder = os.path.dirname(folder)
    return shutil.disk_usage(folder).free


def is_disk_full(error):
    """Whether `error` says the disk is full (an `OSError` with `ENOSPC`, or a TensorFlow or C++ error's text)."""
    return getattr(error, "errno", None) == errno.ENOSPC or os.strerror(errno.ENOSPC) in str(error)
