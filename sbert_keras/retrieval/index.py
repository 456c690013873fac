"""Approximate-nearest-neighbour search of sentence embeddings, on faiss.

`EmbeddingIndex` wraps one faiss index over embeddings with string ids,
built from an array or the Parquet shards of `sbert-keras embed-corpus`,
saved to and loaded from a folder. faiss indexes and searches; nothing here
builds a k-NN graph by hand. Why not ScaNN (on par in recall and QPS here):
`import scann` fails next to TensorFlow 2.21 (its TF ops are built for 2.20;
`scann[tf]` pins `tensorflow~=2.20.0`). See docs/scaling.md, "Approximate search".

Saved folders (`sbert_keras.retrieval.index_files`) record each file's sha256 and are
refused on load when a file no longer matches; every search also checks that
the scores are cosines, in [-1, 1], so a damaged index fails instead of
returning scores such as 4.3e+37.

Scores are cosines: embeddings and queries are L2-normalised (float32 copies;
zero vectors stay zero) and compared by inner product. Kinds: `"flat"` (exact),
`"hnsw"` (`IndexHNSWFlat`, the default), `"ivf"` (`IndexIVFFlat`), and, scanning
all codes, `"int8"` (faiss `SQ8`, per-dimension ranges; 4x smaller) and
`"binary"` (sign bits, `IndexBinaryFlat`, Hamming; 32x smaller).

The quantized kinds rescore, like sentence-transformers' `quantize_embeddings`
+ `semantic_search_faiss(rescore=True)`, but against the float vectors: they
fetch `rescore_multiplier * top_k` candidates, then rank them by the float
cosine. That gather and dot product is written here because faiss's
`IndexRefineFlat` has no binary counterpart. The float vectors are in memory
after `build`; `load` memory-maps `vectors.npy`, so they stay on disk (the
page cache) and only the candidates' rows are read.

Example:
```python
import numpy as np
from sbert_keras.retrieval.index import EmbeddingIndex
corpus = np.random.default_rng(0).normal(size=(1000, 32)).astype("float32")
index = EmbeddingIndex.build(corpus, ids=[f"doc{i}" for i in range(1000)], kind="hnsw")
ids, scores = index.search(corpus[:2], top_k=3)
assert ids[0, 0] == "doc0"
index.save("/tmp/my_index", overwrite=True)
assert EmbeddingIndex.load("/tmp/my_index").search(corpus[:2], 3)[0].tolist() == ids.tolist()
```
"""

import os

import numpy as np

from sbert_keras.data.embedding_shards import read_embeddings
from sbert_keras.retrieval.index_files import KINDS
from sbert_keras.retrieval.index_files import QUANTIZED_KINDS
from sbert_keras.retrieval.index_files import read_folder
from sbert_keras.retrieval.index_files import write_folder
from sbert_keras.retrieval.quantization import refuse_quantized
from sbert_keras.utils.arrays import l2_normalize
from sbert_keras.utils.checks import check_finite
from sbert_keras.utils.checks import check_positive_int

try:
    import faiss
except ImportError:  # the optional `sbert_keras[index]` extra
    faiss = None

DEFAULTS = dict(hnsw_m=32, ef_construction=128, ef_search=32, nlist=None, nprobe=16, rescore_multiplier=None)
RESCORE_CHUNK = 64  # queries rescored at once: bounds the gathered candidate rows
# Cosines of unit vectors lie in [-1, 1]; float32 rounding stays far inside this margin.
SCORE_TOLERANCE = 1e-3
PROBE_QUERIES = 8  # random unit queries searched once at load: a sanity check of the data


def _require_faiss():
    if faiss is None:
        raise ImportError("sbert_keras.retrieval.index needs faiss: `pip install sbert_keras[index]` (faiss-cpu).")


def _normalized(x, name, dim=None):
    """`x` as a finite, L2-normalised float32 `(n, dim)` array (a vector is one row); int8 codes are refused."""
    refuse_quantized(x, name)
    try:
        x = np.asarray(x, dtype=np.float32)
    except (TypeError, ValueError) as error:
        raise ValueError(f"`{name}` must be a float array (n, dim). {error}") from None
    if x.ndim == 1 and x.size:
        x = x[None, :]
    if x.ndim != 2:
        raise ValueError(f"`{name}` must be a 2-D array (n, dim). Received shape {x.shape}.")
    if dim is not None and x.shape[1] != dim and len(x):
        raise ValueError(f"`{name}` has dimension {x.shape[1]}, the index has {dim}.")
    check_finite(x, name)
    return np.ascontiguousarray(l2_normalize(x, axis=1))


def _string_ids(ids, n):
    """`ids` as a unicode array of `n` distinct strings (`None`: the row numbers)."""
    ids = np.arange(n).astype(str) if ids is None else np.asarray([str(i) for i in ids], dtype=str)
    if ids.shape != (n,):
        raise ValueError(f"`ids` must hold one id per embedding: {n} embeddings, {ids.size} ids.")
    unique, counts = np.unique(ids, return_counts=True)
    if len(unique) != n:
        raise ValueError(f"`ids` must be distinct; {str(unique[counts > 1][0])!r} appears {counts.max()} times.")
    return ids


def _build_params(kind, params, n, dim):
    """`DEFAULTS` updated with `params`, checked, and `nlist` set from `n`."""
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {KINDS}. Received {kind!r}.")
    unknown = sorted(set(params) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"Unknown index parameter(s) {unknown}; known: {sorted(DEFAULTS)}.")
    params = {**DEFAULTS, **params, "dim": int(dim)}
    if params["rescore_multiplier"] is None:  # recall@10 >= 0.95 on our 132k SNLI embeddings
        params["rescore_multiplier"] = 10 if kind == "binary" else 4
    if params["nlist"] is None:  # faiss wants >= 39 training points per cell
        params["nlist"] = int(max(1, min(4 * np.sqrt(n), n // 39)))
    for key in DEFAULTS:
        params[key] = check_positive_int(params[key], key)
    return params


def _faiss_index(kind, vectors, params):
    """A filled faiss index of `kind` over normalised `vectors`."""
    dim = vectors.shape[1]
    if kind == "binary":
        index = faiss.IndexBinaryFlat(8 * ((dim + 7) // 8))  # sign bits, padded to whole bytes
        index.add(np.packbits(vectors > 0, axis=1))
        return index
    spec = {"flat": "Flat", "hnsw": f"HNSW{params['hnsw_m']},Flat", "ivf": f"IVF{params['nlist']},Flat", "int8": "SQ8"}
    index = faiss.index_factory(dim, spec[kind], faiss.METRIC_INNER_PRODUCT)
    if kind == "hnsw":
        index.hnsw.efConstruction = params["ef_construction"]
    index.train(vectors)  # k-means cells (ivf), per-dimension ranges (int8); a no-op otherwise
    index.add(vectors)
    return index


def _faiss_search(index, kind, params, queries, k):
    """`(scores, rows)` `(q, k)` from faiss; queries that came back short (-1) are searched exhaustively."""
    if kind == "binary":
        return index.search(np.packbits(queries > 0, axis=1), k)  # Hamming distances, for the candidates only
    if kind == "hnsw":
        narrow = faiss.SearchParametersHNSW(efSearch=max(params["ef_search"], k))
        wide = faiss.SearchParametersHNSW(efSearch=index.ntotal)
    elif kind == "ivf":
        narrow, wide = (faiss.SearchParametersIVF(nprobe=p) for p in (params["nprobe"], params["nlist"]))
    else:
        narrow = wide = None
    scores, rows = index.search(queries, k, params=narrow)
    short = np.flatnonzero((rows < 0).any(axis=1))
    if len(short):
        scores[short], rows[short] = index.search(queries[short], k, params=wide)
    return scores, rows


def _check_scores(scores):
    """Raises a `ValueError` unless every score is a cosine: finite and in [-1, 1]."""
    bad = ~(np.abs(scores) <= 1 + SCORE_TOLERANCE)  # NaN is bad too
    if bad.any():
        raise ValueError(
            f"the index returned the score {scores[bad][0]:.4g}, outside the cosine range [-1, 1]: "
            "its data is corrupt. Rebuild the index."
        )


def _rescore(vectors, queries, rows, k):
    """`(scores, rows)`: the candidate `rows` of each query ranked by float cosine, `k` kept."""
    scores = np.empty(rows.shape, np.float32)
    for s in range(0, len(rows), RESCORE_CHUNK):
        part = rows[s : s + RESCORE_CHUNK]
        gathered = np.asarray(vectors[part.ravel()], dtype=np.float32).reshape(*part.shape, -1)
        scores[s : s + RESCORE_CHUNK] = np.einsum("qd,qcd->qc", queries[s : s + RESCORE_CHUNK], gathered)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, order, 1), np.take_along_axis(rows, order, 1)


class EmbeddingIndex:
    """A faiss index over cosine-normalised embeddings with string ids.

    Make one with `build`, `from_parquet` or `load`; the constructor takes the parts as they are.

    Args:
        index: a faiss `Index` (or `IndexBinary` for `"binary"`).
        ids: np.ndarray. One distinct string id per indexed row.
        kind: str. One of `KINDS`.
        params: dict. Build and search parameters (`DEFAULTS` keys and `dim`);
            the search settings (`ef_search`, `nprobe`, `rescore_multiplier`)
            may be changed between searches.
        vectors: np.ndarray or None. The normalised float32 rows (quantized kinds: for rescoring).
    """

    def __init__(self, index, ids, kind, params, vectors=None):
        self.index, self.ids, self.kind, self.params, self.vectors = index, ids, kind, dict(params), vectors

    @property
    def dim(self):
        return self.params["dim"]

    def __len__(self):
        return len(self.ids)

    @classmethod
    def build(cls, embeddings, ids=None, kind="hnsw", **params):
        """Indexes `embeddings` (normalised inside) under `ids`.

        Args:
            embeddings: array-like. Float embeddings `(n, dim)`, n >= 1.
            ids: list or None. One id per row, kept as distinct strings;
                `None` uses the row numbers (`"0"`, `"1"`, ...).
            kind: str. `"flat"`, `"hnsw"` (default), `"ivf"`, `"int8"` or `"binary"`.
            **params: `hnsw_m` (graph degree, 32), `ef_construction` (128),
                `ef_search` (32, raised to `top_k` when smaller), `nlist` (IVF
                cells, default 4 sqrt(n) capped at n / 39), `nprobe` (cells
                searched, 16), `rescore_multiplier` (candidates per hit for
                the quantized kinds; 4 for int8, 10 for binary).

        Raises `ValueError` for an empty or non-finite array, ids that do not
        match, an unknown `kind` or parameter.
        """
        _require_faiss()
        vectors = _normalized(embeddings, "embeddings")
        if not vectors.size:
            raise ValueError("`embeddings` is empty: an index needs at least one embedding.")
        params = _build_params(kind, params, *vectors.shape)
        ids = _string_ids(ids, len(vectors))
        index = _faiss_index(kind, vectors, params)
        return cls(index, ids, kind, params, vectors if kind in QUANTIZED_KINDS else None)

    @classmethod
    def from_parquet(cls, directory, kind="hnsw", **params):
        """Indexes the Parquet shards (`id`, `embedding`) that `embed-corpus` wrote to the folder `directory`."""
        ids, embeddings = read_parquet_embeddings(directory)
        return cls.build(embeddings, ids=ids, kind=kind, **params)

    def search_rows(self, queries, top_k=10):
        """Like `search`, with row numbers (int64 `(q, k)`) in place of ids."""
        top_k = check_positive_int(top_k, "top_k")
        queries = _normalized(queries, "queries", self.dim)
        k = min(top_k, len(self))
        if not len(queries):
            return np.zeros((0, k), np.int64), np.zeros((0, k), np.float32)
        if self.kind not in QUANTIZED_KINDS:
            scores, rows = _faiss_search(self.index, self.kind, self.params, queries, k)
        else:
            candidates = min(k * self.params["rescore_multiplier"], len(self))
            _, rows = _faiss_search(self.index, self.kind, self.params, queries, candidates)
            scores, rows = _rescore(self.vectors, queries, rows, k)
        _check_scores(scores)
        return rows, scores.astype(np.float32)

    def search(self, queries, top_k=10):
        """`(ids, scores)`: the `top_k` nearest ids of each query by cosine, best first.

        Args:
            queries: array-like. Float embeddings `(q, dim)`, normalised inside (a vector is one query).
            top_k: int. Hits per query; more than the corpus returns all of it.

        Returns a str array and a float32 array `(q, min(top_k, len(index)))`
        (float cosines for the quantized kinds too). Raises `ValueError` for
        `top_k` < 1, a dimension mismatch or a non-finite query.
        """
        rows, scores = self.search_rows(queries, top_k)
        return self.ids[rows], scores

    def hits(self, queries, top_k=10):
        """`search` in `search.semantic_search`'s format: per query, a list of
        `{"corpus_id": row, "id": id, "score": cosine}` dicts, best first."""
        rows, scores = self.search_rows(queries, top_k)
        return [
            [{"corpus_id": r, "id": str(self.ids[r]), "score": s} for r, s in zip(rr, ss)]
            for rr, ss in zip(rows.tolist(), scores.tolist())
        ]

    def nbytes(self):
        """Bytes of the serialized faiss index (the codes; rescoring vectors not counted)."""
        serialize = faiss.serialize_index_binary if self.kind == "binary" else faiss.serialize_index
        return int(serialize(self.index).nbytes)

    def save(self, path, overwrite=False):
        """Writes the folder `path` atomically (`<path>.partial`, then a rename): `index.faiss`
        (faiss `write_index`), `ids.npy`, `config.json`, `vectors.npy` (quantized kinds) and
        the completion marker; `config.json` records each file's sha256. Raises `ValueError` if
        `path` holds something else, or an index and not `overwrite`, and `DiskFullError`
        (naming `path` and the space needed, nothing left behind) on a full disk. Returns the
        absolute path."""
        return write_folder(path, overwrite, self.index, self.kind, self.ids, self.params, self.vectors)

    @classmethod
    def load(cls, path, mmap=True):
        """Reads a folder written by `save`; `mmap` memory-maps the rescoring vectors.

        The files must match the sha256 that `save` recorded, and a search of a few
        random queries must return cosines in [-1, 1]. Raises `ValueError` naming the
        path when it is absent, incomplete, corrupt or inconsistent."""
        _require_faiss()
        loaded = cls(*read_folder(path, mmap))
        probe = np.random.default_rng(0).normal(size=(PROBE_QUERIES, loaded.dim))
        try:
            loaded.search_rows(probe, top_k=10)
        except ValueError as error:
            raise ValueError(f"index path {os.fspath(path)}: {error}") from None
        return loaded


def read_parquet_embeddings(directory):
    """`(ids, embeddings)` of an `embed-corpus` output folder: `sbert_keras.data.embedding_shards.read_embeddings`.

    Needs pyarrow, not Apache Beam. Raises `ImportError` (no pyarrow), `FileNotFoundError` (no folder),
    `atomic_io.IncompleteOutputError` (unfinished run), or `ValueError` naming a missing shard (with the
    expected and found row counts) or a shard of another dimension.
    """
    return read_embeddings(directory)
