"""The one SHA-256 of a file: index files, embedding shards and a run's training file.

Example:
```python
from sbert_keras.utils.checksums import file_sha256

file_sha256("out/embeddings/shard-00000.parquet")  # "9f86d0..."
```
"""

import hashlib

BLOCK_BYTES = 1 << 20


def file_sha256(path):
    """The SHA-256 (hex) of the file `path`, read in 1 MiB blocks.

    Args:
        path: str or path-like. A regular file.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(BLOCK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()
