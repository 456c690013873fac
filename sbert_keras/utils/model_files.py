"""The files of a model folder, opened only inside it, regular and bounded.

A model folder comes from anywhere (a download, a colleague, a shared
drive) and names further paths itself (`modules.json`). Every file the
loaders read goes through this module:

- `model_path` keeps a path inside the folder: absolute paths, `..` and
  symbolic links that resolve outside it are refused. The one exception is
  the Hugging Face hub cache, where `snapshots/<revision>/<file>` is a link
  to `../../blobs/<hash>` of the same cached model.
- `model_file` also refuses what is not a regular file (a link to
  `/dev/urandom`, a FIFO, a folder) and files over a size cap, before
  anything is read.
- `read_json` parses such a file, reading at most its cap, and checks the
  top-level JSON type; errors name the file (and line).

Example:
```python
config = read_json("path/to/all-MiniLM-L6-v2", "config.json")
```
"""

import json
import os
import stat

# Configuration files are a few KB; 4 MB leaves room for large prompt lists.
JSON_LIMIT = 4 * 2**20
# Vocabulary files: `tokenizer.json` of a 250k-token vocabulary is ~20 MB.
VOCABULARY_LIMIT = 100 * 2**20
LIMITS = {
    "tokenizer.json": VOCABULARY_LIMIT,
    "vocab.json": VOCABULARY_LIMIT,
    "vocab.txt": VOCABULARY_LIMIT,
    "merges.txt": VOCABULARY_LIMIT,
}
JSON_TYPES = {dict: "an object", list: "an array"}


def _allowed_roots(folder):
    real = os.path.realpath(folder)
    roots = [real]
    parent = os.path.dirname(real)
    if os.path.basename(parent) == "snapshots":  # Hugging Face hub cache
        roots.append(os.path.join(os.path.dirname(parent), "blobs"))
    return roots


def _is_within(path, root):
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def model_path(folder, *parts, source=None):
    """`folder/parts...`, refused unless it stays inside `folder`.

    Args:
        folder: str. The model folder.
        *parts: str. The path inside it (for example a `modules.json` entry).
        source: str or None. Where the path was read, for the error message
            (for example `"modules.json: module 2 path"`).

    Returns:
        str. The joined path (not resolved).

    Raises:
        ValueError: an absolute path, a path through `..` out of the folder,
            or one whose symbolic links resolve outside it.
    """
    folder = os.fspath(folder)
    relative = os.path.join(*parts) if parts else ""
    where = source or "path"
    if os.path.isabs(relative):
        raise ValueError(f"{where} {relative!r} must be relative to the model folder {folder}.")
    path = os.path.join(folder, relative)
    real = os.path.realpath(path)
    if not any(_is_within(real, root) for root in _allowed_roots(folder)):
        raise ValueError(
            f"{where} {relative!r} leads outside the model folder {folder} (it resolves to {real}); "
            "every file of a model must lie inside its folder."
        )
    return path


def model_file(folder, *parts, limit=None, source=None):
    """The path of a regular file inside `folder`, or `None` when it is absent.

    Args:
        folder: str. The model folder.
        *parts: str. The file's path inside it.
        limit: int or None. The largest size accepted, in bytes.
        source: str or None. Where the path was read (see `model_path`).

    Returns:
        str or None.

    Raises:
        ValueError: the path leaves the folder, is not a regular file (a
            folder, a device such as `/dev/urandom`, a FIFO), or is larger
            than `limit`; the message names the file.
    """
    path = model_path(folder, *parts, source=source)
    if not os.path.lexists(path):
        return None
    try:
        info = os.stat(path)
    except OSError as e:
        raise ValueError(f"{path} cannot be read: {e.strerror}.") from e
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{path} is not a regular file; a model folder holds only regular files.")
    if limit is not None and info.st_size > limit:
        raise ValueError(f"{path} is {info.st_size:,} bytes, more than the {limit:,} bytes accepted for it.")
    return path


def read_json(folder, *parts, limit=None, expect=dict):
    """The parsed JSON file `folder/parts...`, or `None` if it is absent.

    Args:
        folder: str. The model folder.
        *parts: str. The file's path inside it.
        limit: int or None. The size cap in bytes; by default
            `VOCABULARY_LIMIT` for `tokenizer.json`, else `JSON_LIMIT`.
        expect: `dict` or `list`. The type of the top-level JSON value.

    Raises:
        ValueError: a path outside the folder, not a regular file, too
            large, invalid JSON (the 1-based line is named), or a top-level
            value of another type; the message names the file.
    """
    name = os.path.basename(os.path.join(*parts)) if parts else ""
    limit = limit or LIMITS.get(name, JSON_LIMIT)
    path = model_file(folder, *parts, limit=limit)
    if path is None:
        return None
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:  # it grew after the size check
        raise ValueError(f"{path} is more than the {limit:,} bytes accepted for it.")
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text (byte {e.start}).") from e
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}, line {e.lineno}: invalid JSON ({e.msg}).") from e
    if not isinstance(value, expect):
        raise ValueError(f"{path}: the file must hold {JSON_TYPES[expect]}; found {type(value).__name__}.")
    return value
