"""Free space for outputs: checked before the work, and a full disk as one clear error.

An output whose size is known ahead (an index: rows x dim x 4 bytes, a corpus
of embeddings) is checked against the free space of its file system before
the long work starts (`check_free_space`). A full disk met while writing
anyway (an estimate too low, another writer) surfaces from NumPy, faiss or
Beam as an `OSError` or a `RuntimeError` holding "No space left on device";
`disk_full_as_error` turns each into one `DiskFullError` that names the
path and the space needed, which the CLI prints as one line. The writers
use `sbert_keras.utils.atomic_io`' temporary names, so nothing half-written stays.

Example:
```python
disk_space.check_free_space("index-dir", needed=rows * dim * 4)
with disk_space.disk_full_as_error("index-dir", needed=rows * dim * 4):
    index.save("index-dir")
```
"""

import contextlib
import errno
import os
import shutil

NO_SPACE_TEXT = os.strerror(errno.ENOSPC)  # "No space left on device"


class DiskFullError(OSError):
    """Not enough free space to write an output (errno `ENOSPC`); its text is one line.

    The line names the path, the space needed and the space free, and says
    that nothing was left behind (the writers use temporary names); the CLI
    prints it as it is.

    Args:
        path: str or path-like. The file or folder being written.
        needed: int or None. Bytes the output needs (an estimate), if known.
        free: int or None. Bytes free on its file system, if known.
    """

    def __init__(self, path, needed=None, free=None):
        self.path, self.needed, self.free = os.fspath(path), needed, free
        if needed is not None and free is not None and needed > free:
            what = f"it needs about {format_bytes(needed)} and {format_bytes(free)} are free"
        else:  # the estimate fitted (or there was none); the write did not
            what = "the disk filled up while writing"
            known = [f"{format_bytes(free)} were free"] if free is not None else []
            known += [f"estimated {format_bytes(needed)}"] if needed else []
            what += f" ({', '.join(known)})" if known else ""
        super().__init__(
            errno.ENOSPC,
            f"not enough disk space for {self.path}: {what}; nothing was written. "
            "Free some space or choose another folder.",
        )

    def __str__(self):
        return self.strerror


def format_bytes(n):
    """`n` bytes as a short text: `"512 B"`, `"3.2 MB"`, `"1.5 GB"` (powers of 1000)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def free_bytes(path):
    """Free bytes on the file system of `path` (or of its nearest existing parent folder)."""
    folder = os.path.abspath(os.fspath(path))
    while not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    return shutil.disk_usage(folder).free


def check_free_space(path, needed):
    """Raises `DiskFullError` before the work when `path`'s file system has fewer than `needed` bytes free.

    Args:
        path: str or path-like. The output about to be written (it may not exist yet).
        needed: int. The bytes it will take (an estimate).
    """
    free = free_bytes(path)
    if free < needed:
        raise DiskFullError(path, needed, free)


def is_disk_full(error):
    """Whether `error` is a full disk: `ENOSPC`, or an error whose text carries it
    (faiss and Beam workers re-raise an `OSError` as a `RuntimeError`)."""
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        return True
    return NO_SPACE_TEXT in str(error)


@contextlib.contextmanager
def disk_full_as_error(path, needed=None):
    """Turns a full disk met inside the block into one `DiskFullError` naming `path` and `needed`.

    Args:
        path: str or path-like. The output being written.
        needed: int or None. The bytes it needs (an estimate), if known.
    """
    try:
        yield
    except DiskFullError:
        raise
    except Exception as error:
        if not is_disk_full(error):
            raise
        raise DiskFullError(path, needed, free_bytes(path)) from None
