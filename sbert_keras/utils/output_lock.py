"""One writer per output folder: a lock file beside it that holds the owner's pid.

Two `sbert-keras train` runs into one `--output` would share one
`<output>.partial` and one backup: one result silently replaces the other,
or a run reads a backup file the other has just replaced. `OutputLock`
makes the second run stop with a clear error instead.

The lock is `flock` on `<output>.lock`, so the kernel releases it when its
owner exits in any way (SIGKILL included): a lock file left by a dead
process is taken over, never refused. The file holds the owner's pid, which
the refusal names. The owner deletes the file when it is done.

Example:
```python
with OutputLock("runs/sts"):     # runs/sts.lock holds this process's pid
    ...                          # build runs/sts.partial, rename it to runs/sts
```
"""

import fcntl
import os

LOCK_SUFFIX = ".lock"


class OutputInUseError(ValueError):
    """Another live process is writing the same output.

    Args:
        target: str. The output folder.
        lock_path: str. Its lock file.
        pid: int or None. The owner's pid, as its lock file says.
    """

    def __init__(self, target, lock_path, pid):
        self.target, self.lock_path, self.pid = target, lock_path, pid
        owner = f"pid {pid}" if pid else "a process that is starting"
        super().__init__(
            f"--output {target} is being written by another run ({owner}, lock file {lock_path}); "
            f"wait for it to finish or stop it, or choose another folder."
        )


def _read_pid(fd):
    """The pid written in the open lock file `fd`, or None."""
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None


def _is_current(fd, path):
    """Whether `path` still names the file open as `fd` (an owner deletes it when done)."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


class OutputLock:
    """Holds `<target>.lock` while a run writes `target`; refuses a second writer.

    Creates the target's parent folder if missing (the caller removes it
    again when the run fails: `atomic_io.remove_empty_folders`).

    Args:
        target: str. The output folder (absolute, as `atomic_io.prepare_dir` returns it).
    """

    def __init__(self, target):
        self.target = os.fspath(target).rstrip(os.sep)
        self.path = self.target + LOCK_SUFFIX
        self._fd = None

    def __enter__(self):
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = _read_pid(fd)
                os.close(fd)
                raise OutputInUseError(self.target, self.path, pid) from None
            if _is_current(fd, self.path):
                break
            os.close(fd)  # locked a file its owner deleted as it finished: lock the new one
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd
        return self

    def __exit__(self, *exc_info):
        try:
            os.remove(self.path)  # still locked: a waiting run then locks a fresh file
        except FileNotFoundError:
            pass
        os.close(self._fd)
        self._fd = None
