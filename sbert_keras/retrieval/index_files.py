"""The folder of a saved `EmbeddingIndex`: written atomically, read back checked.

A folder holds `index.faiss` (faiss's own format), `ids.npy`, `vectors.npy`
(the quantized kinds' float rows for rescoring), `config.json` and the
completion marker of `sbert_keras.utils.atomic_io`. It is built as `<path>.partial`
and renamed into place, so a failed save (a full disk included) leaves
nothing behind.

`config.json` records the sha256 of each data file, hashed as it is
written; `read_folder` compares them before faiss parses a byte, so a file
corrupted or changed after the save is refused with its name instead of
serving scores such as 4.3e+37 (faiss trusts its input; a damaged graph can
also crash it). `estimated_bytes` is the folder's size from the row count,
dimension and kind, for a free-space check before the work.
"""

import hashlib
import json
import os
import shutil

import numpy as np

from sbert_keras.utils import atomic_io
from sbert_keras.utils import disk_space
from sbert_keras.utils.checksums import file_sha256

try:
    import faiss
except ImportError:  # the optional `sbert_keras[index]` extra; `sbert_keras.retrieval.index` says so
    faiss = None

KINDS = ("flat", "hnsw", "ivf", "int8", "binary")
QUANTIZED_KINDS = ("int8", "binary")
FORMAT = "sbert_keras.EmbeddingIndex"
INDEX_FILE, IDS_FILE, VECTORS_FILE, CONFIG_FILE = "index.faiss", "ids.npy", "vectors.npy", "config.json"
HEADROOM_BYTES = 64 * 1024  # file headers, config.json and the marker


def estimated_bytes(kind, n, dim, id_itemsize, hnsw_m=32):
    """The bytes a saved index of `n` rows takes: codes, graph or lists, ids and rescoring vectors.

    Args:
        kind: str. One of `KINDS`.
        n: int. Rows.
        dim: int. Embedding dimension.
        id_itemsize: int. Bytes per id in `ids.npy` (4 per character of the longest id).
        hnsw_m: int. HNSW graph degree (level 0 keeps `2 * hnsw_m` int32 neighbours a row).
    """
    code = {"int8": dim, "binary": (dim + 7) // 8}.get(kind, 4 * dim)
    extra = {"hnsw": 8 * hnsw_m + 12, "ivf": 8}.get(kind, 0)
    vectors = 4 * dim if kind in QUANTIZED_KINDS else 0
    return n * (code + extra + vectors + id_itemsize) + HEADROOM_BYTES


class _HashingWriter:
    """A binary file that hashes (sha256) what is written to it; write errors surface as `OSError`."""

    def __init__(self, file):
        self.file, self.digest = file, hashlib.sha256()

    def write(self, data):
        self.digest.update(data)
        return self.file.write(data)


def _write_hashed(path, write):
    """Writes the file `path` with `write(file)`, flushed to disk; returns its sha256 (hex)."""
    with open(path, "wb") as f:
        hashing = _HashingWriter(f)
        write(hashing)
        f.flush()
        os.fsync(f.fileno())
    return hashing.digest.hexdigest()


def _write_index(index, kind):
    """`write(file)` for `_write_hashed`: faiss serialises through Python, so a full disk raises."""
    write_index = faiss.write_index_binary if kind == "binary" else faiss.write_index
    return lambda f: write_index(index, faiss.PyCallbackIOWriter(f.write))


def check_target(target, overwrite, flag="path"):
    """Raises a `ValueError` naming `flag` unless `target` is free for an index (or holds one, and `overwrite`)."""
    if os.path.lexists(target) and (not os.path.isdir(target) or os.listdir(target)):
        if not os.path.isfile(os.path.join(target, CONFIG_FILE)):
            raise ValueError(f"{flag} {target} already holds something that is not an index; choose another.")
        if not overwrite:
            raise ValueError(f"{flag} {target} already holds an index; pass overwrite=True (--overwrite).")


def write_folder(path, overwrite, index, kind, ids, params, vectors):
    """Writes the index files into `<path>.partial`, then renames it to `path`; returns the absolute path.

    The free space is checked first (`estimated_bytes`); a full disk met anyway is one
    `DiskFullError` naming `path`, and the working folder is removed.
    """
    target = atomic_io.check_writable(path, "path")
    check_target(target, overwrite)
    needed = estimated_bytes(kind, len(ids), params["dim"], ids.itemsize, params["hnsw_m"])
    disk_space.check_free_space(target, needed)
    work = target + atomic_io.PARTIAL_SUFFIX
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    try:
        with disk_space.disk_full_as_error(target, needed):
            files = {INDEX_FILE: _write_index(index, kind), IDS_FILE: lambda f: np.save(f, ids)}
            if vectors is not None:
                files[VECTORS_FILE] = lambda f: np.save(f, np.asarray(vectors))
            sha256 = {name: _write_hashed(os.path.join(work, name), write) for name, write in files.items()}
            config = {"format": FORMAT, "kind": kind, "count": len(ids), "faiss": faiss.__version__}
            config.update(params=params, sha256=sha256)
            atomic_io.write_json(os.path.join(work, CONFIG_FILE), config)
            return atomic_io.finalize_dir(work, target, {"command": "index build", "kind": kind})
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _read_config(path):
    """`config.json` of the folder `path`, checked for format, kind and checksums."""
    with open(os.path.join(path, CONFIG_FILE), encoding="utf-8") as f:
        config = json.load(f)
    kind = config["kind"]
    if config.get("format") != FORMAT or kind not in KINDS:
        raise ValueError(f"format {config.get('format')!r}, kind {kind!r}")
    names = (INDEX_FILE, IDS_FILE) + ((VECTORS_FILE,) if kind in QUANTIZED_KINDS else ())
    if not isinstance(config.get("sha256"), dict) or not set(names) <= set(config["sha256"]):
        raise ValueError(f"{CONFIG_FILE} records no sha256 of {', '.join(names)}; rebuild the index")
    return config


def _check_sha256(path, config):
    """Raises a `ValueError` naming the first data file that is missing or whose sha256 differs from the saved one."""
    for name, expected in config["sha256"].items():
        file = os.path.join(path, name)
        if not os.path.isfile(file):
            raise ValueError(f"index path {path} is incomplete: {name} is missing.")
        if file_sha256(file) != expected:
            raise ValueError(
                f"index path {path} is corrupt: {name} does not match the sha256 recorded in {CONFIG_FILE} "
                "when it was saved (damaged or changed since). Rebuild the index."
            )


def _corrupt(path, error):
    return ValueError(f"index path {path} is corrupt or incomplete: {' '.join(str(error).split())}")


def read_folder(path, mmap):
    """`(index, ids, kind, params, vectors)` from a folder `write_folder` wrote; errors name `path`."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise ValueError(f"index path {path} is not a folder (absent or a file).")
    if not atomic_io.is_complete(path):
        raise ValueError(f"index path {path} has no {atomic_io.MARKER}: not a finished index folder.")
    try:
        config = _read_config(path)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise _corrupt(path, error) from None
    _check_sha256(path, config)  # before faiss parses the file
    kind, params = config["kind"], config["params"]
    try:
        index = (faiss.read_index_binary if kind == "binary" else faiss.read_index)(os.path.join(path, INDEX_FILE))
        ids = np.load(os.path.join(path, IDS_FILE), allow_pickle=False)
        vectors = None
        if kind in QUANTIZED_KINDS:
            vectors = np.load(os.path.join(path, VECTORS_FILE), mmap_mode="r" if mmap else None)
    except (OSError, RuntimeError, ValueError, KeyError, TypeError) as error:
        raise _corrupt(path, error) from None
    counts = (index.ntotal, len(ids), config["count"]) + ((len(vectors),) if vectors is not None else ())
    if len(set(counts)) != 1 or (vectors is not None and vectors.shape[1] != params["dim"]):
        raise ValueError(f"index path {path} is inconsistent: row counts {counts} differ.")
    return index, ids, kind, params, vectors
