"""The output folder of `embed-corpus`: Parquet shards, checked when read back.

`sbert_keras.integrations.beam.embed_corpus` writes shards `part-SSSSS-of-NNNNN.parquet`
(columns `id`, string, and `embedding`, a fixed-size list of float32) and a
`complete.json` marker that lists the shards, the row count (`texts`) and
the dimension (`dim`). `read_embeddings` holds the folder to that record: a
missing or extra shard, a row count that differs, or a shard of another
dimension is an error naming the file, never a silently smaller corpus.
The marker also records each shard's SHA-256 (`sha256`), and a shard that
changed after it was written (a flipped bit) is refused by name: Parquet
checks the page checksums only where the writer stored them, and a flipped
float is still a valid float. Folders written before the checksums were
recorded are read with one warning that their shards are not verified.
Reading needs pyarrow only (installed with the `beam` extra), not
Apache Beam; without it, `read_embeddings` raises an `ImportError` that says so.

Example:
```python
from sbert_keras.data.embedding_shards import read_embeddings
ids, vectors = read_embeddings("corpus-emb")  # list of str, (n, dim) float32
```
"""

import fnmatch
import json
import os
import warnings

import numpy as np

from sbert_keras.utils import atomic_io
from sbert_keras.utils.checksums import file_sha256

try:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
except ImportError:  # optional: installed with the `beam` extra
    pa = pc = pq = None

SHARD_PREFIX = "part"
SHARD_SUFFIX = ".parquet"
SHARD_PATTERN = f"{SHARD_PREFIX}-*-of-*{SHARD_SUFFIX}"
HEADROOM_BYTES = 1024 * 1024  # Parquet footers and the marker
ROW_OVERHEAD_BYTES = 8  # per row: the id's length and Parquet's levels


def estimated_bytes(rows, dim, id_bytes):
    """The bytes of the shards of `rows` float32 embeddings of `dim` values and `id_bytes` bytes of ids in all."""
    return rows * (4 * dim + ROW_OVERHEAD_BYTES) + id_bytes + HEADROOM_BYTES


def prepare_output(output, overwrite=False):
    """The absolute output folder, checked before any work (`ValueError` if unusable)."""
    output = os.fspath(output)
    if "://" in output:
        raise ValueError(f"--output {output}: give a local or mounted folder (it is renamed into place).")
    target = atomic_io.check_writable(output)
    if os.path.exists(target) and not os.path.isdir(target):
        raise ValueError(f"--output {target} is a file; give a folder.")
    entries = set(os.listdir(target)) if os.path.isdir(target) else set()
    ours = {name for name in entries if name == atomic_io.MARKER or fnmatch.fnmatch(name, SHARD_PATTERN)}
    if entries - ours:
        raise ValueError(f"--output {target} holds files that are not embedding shards: {min(entries - ours)!r}.")
    if entries and not overwrite:
        raise ValueError(f"--output {target} already holds embeddings; pass --overwrite to replace them.")
    return target


def shard_files(folder):
    """The Parquet shards of an output folder, sorted."""
    return sorted(name for name in os.listdir(folder) if fnmatch.fnmatch(name, SHARD_PATTERN))


def _read_marker(folder):
    """`(dim, shards, rows, sha256 or None)` that `complete.json` records for `folder`."""
    with open(os.path.join(folder, atomic_io.MARKER), encoding="utf-8") as f:
        marker = json.load(f)
    if not isinstance(marker.get("shards"), list) or not isinstance(marker.get("texts"), int) or "dim" not in marker:
        raise ValueError(
            f"embeddings folder {folder}: its {atomic_io.MARKER} records no shard list, row count (texts) and "
            "dim; rerun embed-corpus."
        )
    return marker["dim"], marker["shards"], marker["texts"], marker.get("sha256")


def _open_shard(path):
    """`pq.ParquetFile(path)`; a `ValueError` names the file when it is not Parquet."""
    try:
        return pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as error:
        raise ValueError(f"embeddings shard {path} is unreadable: {' '.join(str(error).split())}") from None


def _check_shards(folder, listed, rows):
    """Raises a `ValueError` naming the missing or extra shards and the expected and found row counts."""
    present = shard_files(folder)
    missing = [name for name in listed if name not in present]
    extra = [name for name in present if name not in listed]
    found = sum(_open_shard(os.path.join(folder, name)).metadata.num_rows for name in listed if name in present)
    if not (missing or extra or found != rows):
        return
    problems = [f"shard(s) {', '.join(missing)} listed in {atomic_io.MARKER} are missing"] if missing else []
    problems += [f"shard(s) {', '.join(extra)} are not listed in {atomic_io.MARKER}"] if extra else []
    problems.append(f"{atomic_io.MARKER} records {rows} rows, the listed shards hold {found}")
    raise ValueError(f"embeddings folder {folder} is not the output embed-corpus wrote: {'; '.join(problems)}.")


def shard_checksums(folder, names):
    """`{name: sha256}` of the shards `names` of `folder`, for its `complete.json` (`sha256`)."""
    return {name: file_sha256(os.path.join(folder, name)) for name in names}


_UNVERIFIED = set()  # folders already warned about, once per process


def _checksums(folder, recorded):
    """`complete.json`'s `{shard: sha256}`, or None (with one warning per folder) for a folder written without them."""
    if recorded is None:
        if folder not in _UNVERIFIED:
            _UNVERIFIED.add(folder)
            warnings.warn(
                f"embeddings folder {folder}: its {atomic_io.MARKER} records no shard checksums (written by an "
                "earlier release); its shards are read unverified. Rerun `sbert-keras embed-corpus` to add them.",
                UserWarning,
                stacklevel=3,
            )
        return None
    if not isinstance(recorded, dict):
        raise ValueError(f"embeddings folder {folder}: its {atomic_io.MARKER} records `sha256` that is not a mapping.")
    return recorded


def _verify_shard(path, expected):
    """Raises a `ValueError` naming the shard when its SHA-256 is not the one `complete.json` records."""
    if expected != file_sha256(path):
        raise ValueError(
            f"embeddings shard {path} does not match the SHA-256 its {atomic_io.MARKER} records: "
            "it was changed or damaged after it was written."
        )


def _embedding_dims(column):
    """The dimension of each row of a Parquet `embedding` column (a list type), as NumPy."""
    if pa.types.is_fixed_size_list(column.type):
        return np.full(len(column), column.type.list_size)
    return pc.list_value_length(column).to_numpy(zero_copy_only=False)


def _read_shard(path, dim):
    """`(ids, (n, dim) float32)` of one shard; a `ValueError` names the file if it is unreadable or another dim."""
    try:
        table = _open_shard(path).read(columns=["id", "embedding"])
    except (pa.ArrowException, OSError) as error:
        raise ValueError(f"embeddings shard {path} is unreadable: {' '.join(str(error).split())}") from None
    column = table.column("embedding").combine_chunks()
    if not (pa.types.is_fixed_size_list(column.type) or pa.types.is_list(column.type)):
        raise ValueError(f"embeddings shard {path}: column 'embedding' is {column.type}, not a list of float32.")
    dims = _embedding_dims(column)
    if len(dims) and (dims != dim).any():
        row = int(np.flatnonzero(dims != dim)[0])
        raise ValueError(
            f"embeddings shard {path} holds embeddings of dimension {int(dims[row])} (row {row}), "
            f"the corpus has dimension {dim} ({atomic_io.MARKER})."
        )
    flat = column.flatten().to_numpy(zero_copy_only=False)
    return table.column("id").to_pylist(), flat.astype("float32", copy=False).reshape(-1, dim)


def read_embeddings(folder):
    """Loads the shards of `embed_corpus` back, checked against `complete.json`.

    Args:
        folder: str or path-like. The output folder.

    Returns:
        `(ids, embeddings)`: a list of str and a float32 `(n, dim)` array.

    Raises:
        FileNotFoundError: no such folder.
        sbert_keras.utils.atomic_io.IncompleteOutputError: no `complete.json` (unfinished run).
        ValueError: a shard missing, extra, unreadable or changed since it
            was written (its SHA-256), a row count or dimension other than
            `complete.json` records (naming the file).
    """
    if pq is None:
        raise ImportError("Reading Parquet embedding shards needs pyarrow (pip install pyarrow).")
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"No such embeddings folder: {folder}")
    if not atomic_io.is_complete(folder):
        raise atomic_io.IncompleteOutputError(folder, f"no {atomic_io.MARKER}")
    dim, listed, rows, checksums = _read_marker(folder)
    _check_shards(folder, listed, rows)
    checksums = _checksums(folder, checksums)
    ids, blocks = [], []
    for name in listed:
        shard_ids, block = _read_shard(os.path.join(folder, name), dim)
        if checksums is not None:  # after the shard's own checks, which name what is wrong more precisely
            _verify_shard(os.path.join(folder, name), checksums.get(name))
        ids.extend(shard_ids)
        blocks.append(block)
    return ids, np.concatenate(blocks) if blocks else np.zeros((0, dim), "float32")
