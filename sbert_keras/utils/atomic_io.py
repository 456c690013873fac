"""Atomic, checked outputs: nothing half-written, nothing silently replaced.

A command that writes results (`train`, `export`, `encode`) must never leave
a target that looks complete but is not. So:

- a single file is written to a temporary name in the same folder and moved
  into place with `os.replace` (atomic on POSIX and Windows);
- an output folder is built as `<target>.partial` beside the target, gets a
  completion marker (`complete.json`) as its last file, and only then is
  renamed to the target. A run killed at any point leaves either no target
  or the previous complete one; `<target>.partial` holds what can resume;
- a target that holds a completed result is replaced only when asked
  (`overwrite=True`, the CLI's `--overwrite`);
- targets are checked for writability before any work starts.

The standard library has no atomic folder write, and neither Keras
(`Model.save` writes in place) nor TensorFlow (`tf.saved_model.save`,
`ExportArchive.write_out` write in place) offers one, hence this module.
`check_complete(path)` is what a loader calls to refuse an incomplete run.

Example:
```python
target = outputs.prepare_dir("runs/sts", overwrite=False)   # checks, no writes
work = outputs.partial_dir(target)                          # runs/sts.partial
...  # write files into `work`
outputs.finalize_dir(work, target, {"command": "train"})    # marker + rename
outputs.check_complete("runs/sts")                          # passes
```
"""

import errno
import gc
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

from sbert_keras.utils.disk_space import DiskFullError
from sbert_keras.utils.disk_space import free_bytes
from sbert_keras.utils.disk_space import is_disk_full
from sbert_keras.utils.output_names import MARKER  # noqa: F401 (public here too)
from sbert_keras.utils.output_names import PARTIAL_SUFFIX  # noqa: F401
from sbert_keras.utils.output_names import REPLACEABLE  # noqa: F401
from sbert_keras.utils.output_names import RESUMABLE  # noqa: F401
from sbert_keras.utils.output_names import RUN_FILES  # noqa: F401
from sbert_keras.utils.output_names import RUN_README  # noqa: F401
from sbert_keras.utils.output_names import SENTENCE_TRANSFORMERS_FILES  # noqa: F401
from sbert_keras.utils.output_names import TRAINING_LOG  # noqa: F401

# Tests set this to a stage name (or part of one, e.g. "encoder.keras"): each
# save then logs its stage on stderr and sleeps at the matching one, so that
# the test can kill the process there.
PAUSE_ENV = "SBERT_KERAS_TEST_PAUSE_AT"


class IncompleteOutputError(ValueError):
    """A path is the output of a run that did not finish.

    Args:
        path: str. The folder or file.
        reason: str. What shows that it is incomplete.
    """

    def __init__(self, path, reason):
        self.path = os.fspath(path)
        super().__init__(
            f"{self.path} is the output of an incomplete run ({reason}); rerun the command "
            f"that wrote it to resume or finish it, or delete it."
        )


def pause_for_tests(stage):
    """With `$SBERT_KERAS_TEST_PAUSE_AT` set: logs `stage`, and sleeps if it matches."""
    pause_at = os.environ.get(PAUSE_ENV)
    if pause_at:
        paused = pause_at in stage
        print(f"sbert-keras test: {'paused at' if paused else 'passed'} {stage}", file=sys.stderr, flush=True)
        if paused:
            time.sleep(600)


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _existing_file_ancestor(path):
    """The first existing non-folder among `path`'s ancestors, or None."""
    parent = os.path.dirname(os.path.abspath(path))
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    return parent if parent and not os.path.isdir(parent) else None


def check_writable(path, flag="--output", create_parents=True):
    """Raises a clear error unless `path` can be created, before any work.

    Args:
        path: str or path-like. The output file or folder.
        flag: str. The argument name used in messages.
        create_parents: bool. Whether missing parent folders will be made;
            if False, the parent folder must exist.

    Returns:
        The absolute path.
    """
    path = os.path.abspath(os.fspath(path))
    blocker = _existing_file_ancestor(path)
    if blocker:
        raise ValueError(f"{flag} {path}: {blocker} is a file, not a folder.")
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        if not create_parents:
            raise ValueError(f"{flag} {path}: the folder {parent} does not exist.")
        while not os.path.isdir(parent):
            parent = os.path.dirname(parent)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {path}: the folder {parent} is not writable.")
    if os.path.isdir(path) and not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {path}: the folder is not writable.")
    return path


def is_complete(path):
    """True when the folder `path` holds the completion marker."""
    return os.path.isfile(os.path.join(path, MARKER))


def check_complete(path):
    """Raises `IncompleteOutputError` if `path` is from a run that did not finish.

    Accepts a folder or a file inside one. Folders that are not sbert_keras
    outputs (a sentence-transformers or KerasHub preset folder, or a folder
    holding only a `.keras` file a user saved: fewer than two of
    `encoder.keras`, `model.keras`, `metrics.json`) pass, as does any file
    outside such a folder.

    Args:
        path: str or path-like. What a loader is about to read.
    """
    path = os.fspath(path)
    folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    if folder.rstrip(os.sep).endswith(PARTIAL_SUFFIX):
        raise IncompleteOutputError(path, f"it lies in a {PARTIAL_SUFFIX} working folder")
    if is_complete(folder):
        return
    if os.path.isdir(os.path.join(folder, "backup")):
        raise IncompleteOutputError(path, f"a training backup and no {MARKER}")
    if path != folder and os.path.basename(path) not in RUN_FILES:
        return
    # A lone `encoder.keras` is any user's save, not a run: a run writes at
    # least two of its files.
    if sum(os.path.exists(os.path.join(folder, name)) for name in RUN_FILES) >= 2:
        raise IncompleteOutputError(path, f"no {MARKER} beside its files")


def prepare_dir(path, overwrite=False, flag="--output", replaceable=None):
    """Checks an output folder before the work: writable, not a finished result.

    Args:
        path: str or path-like. The target folder.
        overwrite: bool. Allow replacing a completed result.
        flag: str. The argument name used in messages.
        replaceable: set of str or None. More entry names than `REPLACEABLE`
            that an earlier result of this output may hold.

    Returns:
        The absolute target path.
    """
    path = check_writable(path, flag)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{flag} {path} is a file; give a folder.")
    entries = set(os.listdir(path)) if os.path.isdir(path) else set()
    allowed = REPLACEABLE | set(replaceable or ())
    if entries and not entries <= allowed:
        raise ValueError(
            f"{flag} {path} already holds files that are not an sbert_keras result "
            f"(e.g. {min(entries - allowed)!r}); choose another folder."
        )
    if entries and not overwrite:
        what = "a completed run" if is_complete(path) else "an earlier result"
        raise ValueError(
            f"{flag} {path} already holds {what}; pass --overwrite "
            f"(overwrite=True) to replace it, or choose another folder."
        )
    return path


def partial_dir(target):
    """The working folder `<target>.partial`, created if missing."""
    work = os.fspath(target).rstrip(os.sep) + PARTIAL_SUFFIX
    os.makedirs(work, exist_ok=True)
    return work


def finalize_dir(work, target, marker):
    """Writes the marker into `work`, then moves `work` to `target` atomically.

    An existing `target` (a result being overwritten) is moved aside first
    and deleted after the rename.

    Args:
        work: str. The finished working folder.
        target: str. The final folder.
        marker: dict. JSON-serialisable facts about the run (command, files).
    """
    pause_for_tests("finalize")
    for name in os.listdir(work):  # temporary files of a save killed earlier
        if name.startswith(".") and ".tmp-" in name:
            os.remove(os.path.join(work, name))
    write_json(os.path.join(work, MARKER), {"complete": True, **marker})
    old = None
    if os.path.lexists(target):
        old = tempfile.mkdtemp(prefix=os.path.basename(target) + ".old-", dir=os.path.dirname(os.path.abspath(target)))
        os.replace(target, os.path.join(old, "previous"))
    os.replace(work, target)
    if old:
        shutil.rmtree(old, ignore_errors=True)
    return target


def write_dir(write, target, overwrite=False, marker=None, flag="path", needed=0, replaceable=None):
    """Builds a folder with `write(work_folder)`, then moves it onto `target`.

    For outputs written in one go (a SavedModel): a leftover working folder
    from a killed earlier call is deleted first, and a failed `write` leaves
    neither a working folder, nor a target, nor the parent folders it made. A full disk, before the write
    (less free space than `needed`) or during it, raises `DiskFullError`.

    Args:
        write: callable taking the working folder (which exists, empty).
        target: str or path-like. The final folder.
        overwrite: bool. Allow replacing a completed result.
        marker: dict or None. Facts for the completion marker.
        flag: str. The argument name used in messages.
        needed: int. Bytes the folder needs at least (0: unknown).
        replaceable: set of str or None. Entry names an earlier result of
            this output holds besides `REPLACEABLE` (see `prepare_dir`).

    Returns:
        The absolute target path.

    Raises:
        DiskFullError: not enough free space.
    """
    target = prepare_dir(target, overwrite, flag, replaceable)
    free = free_bytes(target)
    if needed > free:
        raise DiskFullError(target, needed, free)
    work = target + PARTIAL_SUFFIX
    shutil.rmtree(work, ignore_errors=True)
    created = first_missing_folder(work)
    os.makedirs(work)
    try:
        write(work)
        return finalize_dir(work, target, marker or {})
    except Exception as error:
        remove_partial(work, created)  # and the parent folders this call made
        if is_disk_full(error):
            raise DiskFullError(target, needed, free) from None
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def first_missing_folder(path):
    """The outermost folder of `path`'s parents that does not exist yet, or None."""
    missing, parent = None, os.path.dirname(os.path.abspath(path))
    while parent and not os.path.exists(parent):
        missing, parent = parent, os.path.dirname(parent)
    return missing


def remove_partial(work, created=None):
    """Deletes a working folder that holds nothing worth resuming.

    Args:
        work: str. The working folder.
        created: str or None. The outermost parent folder this run created
            (`first_missing_folder` before the work): removed too if empty.
    """
    if not work or os.path.isfile(os.path.join(work, RESUMABLE)):
        return
    shutil.rmtree(work, ignore_errors=True)
    remove_empty_folders(os.path.dirname(os.path.abspath(work)), created)


def remove_empty_folders(folder, created):
    """Removes `folder` and its parents up to `created` while they are empty.

    Args:
        folder: str. The innermost folder.
        created: str or None. The outermost folder a run created (None: nothing).
    """
    while created and os.path.commonpath([folder, created]) == created:
        if not os.path.isdir(folder) or os.listdir(folder):
            break
        os.rmdir(folder)
        folder = os.path.dirname(folder)


def _temp_path(path, suffix=""):
    folder, name = os.path.split(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(prefix=f".{name}.tmp-", suffix=suffix, dir=folder)
    os.close(fd)
    return temp


def _write_or_release(write, temp):
    """`write(temp)`; False when the disk filled up (`ENOSPC`), after freeing what it took.

    h5py keeps a file whose write failed open, and each later flush of it
    fails again. Truncating the file gives its space back, so that the last
    flushes, when the failed write's objects are collected, can succeed.
    This is a fallback: when the disk fills inside HDF5's own metadata
    writes, h5py can still crash the interpreter, so callers that know the
    size check the free space first (`disk_space.check_free_space`).

    Args:
        write: callable taking the temporary path.
        temp: str. The temporary file.
    """
    try:
        write(temp)
        return True
    except OSError as error:  # h5py, zipfile and open() report a full disk with ENOSPC
        if error.errno != errno.ENOSPC:
            raise
        os.truncate(temp, 0)
    gc.collect()  # the failed write's objects, no longer held by the exception
    return False


def replace_atomically(write, path, suffix=""):
    """Calls `write(temp_path)`, then moves the temporary file onto `path`.

    Args:
        write: callable taking the temporary path (same folder as `path`).
        path: str. The final file.
        suffix: str. The temporary file's ending (Keras wants `.keras`,
            `.weights.h5`).
    """
    temp = _temp_path(path, suffix)
    try:
        if not _write_or_release(write, temp):
            os.remove(temp)
            raise DiskFullError(path, None, free_bytes(path))
        os.chmod(temp, 0o666 & ~_umask())  # mkstemp made it private
        pause_for_tests(f"write of {os.path.basename(path)}")
        os.replace(temp, path)
    finally:
        if os.path.exists(temp):
            os.remove(temp)
    return path


def write_json(path, value):
    """Writes `value` as JSON to `path` atomically."""

    def write(temp):
        with open(temp, "w", encoding="utf-8") as f:
            json.dump(value, f, indent=2)
            f.flush()
            os.fsync(f.fileno())

    return replace_atomically(write, path, ".json")


def npy_path(path):
    """The file `np.save(path)` writes: `path` with `.npy` added if missing."""
    path = os.fspath(path)
    return path if path.endswith(".npy") else path + ".npy"


def save_npy(path, array):
    """`np.save` to `npy_path(path)` atomically; returns the path written."""
    path = npy_path(path)

    def write(temp):
        with open(temp, "wb") as f:
            np.save(f, array)

    return replace_atomically(write, path, ".npy")
