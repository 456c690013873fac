"""Approximate-nearest-neighbour search of sentence embeddings, on faiss.

`EmbeddingIndex` wraps one faiss index over a corpus of embeddings with
string ids: build it from a float array or from the Parquet shards of
`sbert-keras embed-corpus`, search it, save it to a folder and load it back.
The search engine is faiss's (`IndexFlatIP`, `IndexHNSWFlat`, `IndexIVFFlat`,
`IndexScalarQuantizer`, `IndexBinaryFlat`); nothing here builds a k-NN graph or
clusters vectors by hand. faiss was chosen over ScaNN (see the README's
"Approximate search" section): ScaNN's TensorFlow ops pin TensorFlow 2.20
(`scann[tf]` needs `tensorflow~=2.20.0`; we run 2.21), while faiss-cpu has no
TensorFlow or protobuf dependency at all and reached the recall target at a
higher QPS on our data.

Scores are cosine similarities: embeddings and queries are L2-normalised
(float32 copies; zero vectors stay zero) and compared by inner product.

Kinds:
- `"flat"`: exact search (`IndexFlatIP`), the reference.
- `"hnsw"`: an HNSW graph (`IndexHNSWFlat`, inner product), the default.
- `"ivf"`: an inverted file (`IndexIVFFlat`, k-means cells from faiss).
- `"int8"`: 8-bit scalar quantization (`IndexScalarQuantizer` `QT_8bit`,
  faiss calibrates each dimension's range), exhaustive, 4x smaller codes.
- `"binary"`: the sign bit of each dimension (`IndexBinaryFlat`, Hamming
  distance), exhaustive, 32x smaller codes.

The quantized kinds rescore, like sentence-transformers' `quantize_embeddings`
+ `semantic_search_faiss(rescore=True)`: they fetch `rescore_multiplier *
top_k` candidates, then rank them by the float cosine. The rescoring (a gather
and a dot product) is written here because faiss's `IndexRefineFlat` does not
exist for binary indexes. The float vectors for it are kept in memory after a
build; `load` memory-maps them from `vectors.npy`, so they stay on disk (the
page cache) and only the candidates' rows are read.

Example:
```python
import numpy as np
from sbert_keras.index import EmbeddingIndex
corpus = np.random.default_rng(0).normal(size=(1000, 32)).astype("float32")
index = EmbeddingIndex.build(corpus, ids=[f"doc{i}" for i in range(1000)], kind="hnsw")
ids, scores = index.search(corpus[:2], top_k=3)
assert ids[0, 0] == "doc0"
index.save("/tmp/my_index", overwrite=True)
assert EmbeddingIndex.load("/tmp/my_index").search(corpus[:2], 3)[0].tolist() == ids.tolist()
```
"""

import glob
import json
import os
import shutil

import numpy as np

from sbert_keras import outputs
from sbert_keras.checks import check_finite
from sbert_keras.checks import check_positive_int

try:
    import faiss
except ImportError:  # the optional `sbert_keras[index]` extra
    faiss = None

KINDS = ("flat", "hnsw", "ivf", "int8", "binary")
QUANTIZED_KINDS = ("int8", "binary")
FORMAT = "sbert_keras.EmbeddingIndex"
INDEX_FILE, IDS_FILE, VECTORS_FILE, CONFIG_FILE = "index.faiss", "ids.npy", "vectors.npy", "config.json"
DEFAULTS = {"hnsw_m": 32, "ef_construction": 128, "ef_search": 64, "nlist": None, "nprobe": 16, "rescore_multiplier": 4}
EPSILON = 1e-12
RESCORE_CHUNK = 64  # queries rescored at once


def _require_faiss():
    if faiss is None:
        raise ImportError("sbert_keras.index needs faiss: `pip install sbert_keras[index]` (faiss-cpu).")


def _normalized(x, name, dim=None):
    """`x` as a finite, L2-normalised float32 `(n, dim)` array (a vector is one row)."""
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
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.ascontiguousarray(x / np.maximum(norms, EPSILON), dtype=np.float32)


def _sign_bits(x):
    """The sign bits of `x` packed into uint8 codes (dimension padded to a multiple of 8)."""
    return np.packbits(x > 0, axis=1)


def _string_ids(ids, n):
    """`ids` as a unicode array of `n` distinct strings (`None`: the row numbers)."""
    ids = np.arange(n).astype(str) if ids is None else np.asarray([str(i) for i in ids], dtype=str)
    if ids.shape != (n,):
        raise ValueError(f"`ids` must hold one id per embedding: {n} embeddings, {ids.size} ids.")
    unique, counts = np.unique(ids, return_counts=True)
    if len(unique) != n:
        raise ValueError(f"`ids` must be distinct; {str(unique[counts > 1][0])!r} appears {counts.max()} times.")
    return ids


def _faiss_index(kind, vectors, params):
    """A filled faiss index of `kind` over normalised `vectors`."""
    n, dim = vectors.shape
    if kind == "binary":
        index = faiss.IndexBinaryFlat(8 * ((dim + 7) // 8))
        index.add(_sign_bits(vectors))
        return index
    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, params["hnsw_m"], faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = params["ef_construction"]
    elif kind == "ivf":
        index = faiss.index_factory(dim, f"IVF{params['nlist']},Flat", faiss.METRIC_INNER_PRODUCT)
    else:
        index = faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
    if not index.is_trained:
        index.train(vectors)
    index.add(vectors)
    return index


class EmbeddingIndex:
    """A faiss index over cosine-normalised embeddings with string ids.

    Build one with `EmbeddingIndex.build` or `from_parquet`, or `load` a saved
    one; the constructor takes the parts as they are.

    Args:
        index: a faiss `Index` (or `IndexBinary` for `"binary"`).
        ids: np.ndarray. One distinct string id per indexed row.
        kind: str. One of `KINDS`.
        params: dict. Build and search parameters (`DEFAULTS` keys).
        vectors: np.ndarray or None. The normalised float32 rows, needed by
            the quantized kinds for rescoring.
    """

    def __init__(self, index, ids, kind, params, vectors=None):
        self.index, self.ids, self.kind, self.params, self.vectors = index, ids, kind, dict(params), vectors

    @property
    def dim(self):
        """The embedding dimension (of the float vectors)."""
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
                `ef_search` (64, raised to `top_k` when smaller), `nlist` (IVF
                cells, default 4 sqrt(n) capped at n / 39), `nprobe` (cells
                searched, 16), `rescore_multiplier` (candidates per hit for
                the quantized kinds, 4).

        Returns:
            An `EmbeddingIndex`.

        Raises:
            ValueError: an empty or non-finite array, ids that do not match,
                an unknown `kind` or parameter.
        """
        _require_faiss()
        if kind not in KINDS:
            raise ValueError(f"`kind` must be one of {KINDS}. Received {kind!r}.")
        unknown = sorted(set(params) - set(DEFAULTS))
        if unknown:
            raise ValueError(f"Unknown index parameter(s) {unknown}; known: {sorted(DEFAULTS)}.")
        vectors = _normalized(embeddings, "embeddings")
        if not vectors.size:
            raise ValueError("`embeddings` is empty: an index needs at least one embedding.")
        ids = _string_ids(ids, len(vectors))
        params = {**DEFAULTS, **params, "dim": int(vectors.shape[1])}
        if params["nlist"] is None:
            params["nlist"] = int(max(1, min(4 * np.sqrt(len(vectors)), len(vectors) // 39)))
        for key in ("hnsw_m", "ef_construction", "ef_search", "nlist", "nprobe", "rescore_multiplier"):
            params[key] = check_positive_int(params[key], key)
        index = _faiss_index(kind, vectors, params)
        return cls(index, ids, kind, params, vectors if kind in QUANTIZED_KINDS else None)

    @classmethod
    def from_parquet(cls, directory, kind="hnsw", **params):
        """Indexes the Parquet shards (`id`, `embedding`) of `embed-corpus` in `directory`.

        Args:
            directory: str. The folder of `*.parquet` shards.
            kind: str. See `build`.
            **params: see `build`.
        """
        ids, embeddings = read_parquet_embeddings(directory)
        return cls.build(embeddings, ids=ids, kind=kind, **params)

    def _search_rows(self, queries, k):
        """Row numbers and scores `(q, k)` from faiss, widened to exhaustive where a row came back short."""
        if self.kind == "binary":
            return self.index.search(_sign_bits(queries), k)
        if self.kind == "hnsw":
            self.index.hnsw.efSearch = max(self.params["ef_search"], k)
        elif self.kind == "ivf":
            self.index.nprobe = self.params["nprobe"]
        scores, rows = self.index.search(queries, k)
        short = np.flatnonzero((rows < 0).any(axis=1))
        if len(short):  # too few neighbours reached: search those queries exhaustively
            if self.kind == "hnsw":
                self.index.hnsw.efSearch = len(self)
            else:
                self.index.nprobe = self.params["nlist"]
            scores[short], rows[short] = self.index.search(queries[short], k)
        return scores, rows

    def _rescore(self, queries, rows, k):
        """Ranks the candidate `rows` of each query by float cosine; keeps `k`."""
        scores = np.empty(rows.shape, np.float32)
        for s in range(0, len(rows), RESCORE_CHUNK):  # bounds the gathered copy of candidate rows
            part = rows[s : s + RESCORE_CHUNK]
            gathered = np.asarray(self.vectors[part.ravel()], dtype=np.float32).reshape(*part.shape, -1)
            scores[s : s + RESCORE_CHUNK] = np.einsum("qd,qcd->qc", queries[s : s + RESCORE_CHUNK], gathered)
        order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(scores, order, 1), np.take_along_axis(rows, order, 1)

    def search_rows(self, queries, top_k=10):
        """Like `search`, with row numbers (int64 `(q, k)`) in place of ids."""
        top_k = check_positive_int(top_k, "top_k")
        queries = _normalized(queries, "queries", self.dim)
        k = min(top_k, len(self))
        if not len(queries):
            return np.zeros((0, k), np.int64), np.zeros((0, k), np.float32)
        if self.kind not in QUANTIZED_KINDS:
            scores, rows = self._search_rows(queries, k)
            return rows, scores.astype(np.float32)
        _, rows = self._search_rows(queries, min(k * self.params["rescore_multiplier"], len(self)))
        scores, rows = self._rescore(queries, rows, k)
        return rows, scores.astype(np.float32)

    def search(self, queries, top_k=10):
        """The `top_k` nearest ids of each query by cosine, best first.

        Args:
            queries: array-like. Float embeddings `(q, dim)` (a vector is one
                query); normalised inside.
            top_k: int. Hits per query; more than the corpus returns all of it.

        Returns:
            `(ids, scores)`: a str array and a float32 array `(q, k)`, k =
            min(top_k, len(index)). Quantized kinds return float cosines.

        Raises:
            ValueError: `top_k` < 1, a dimension mismatch or non-finite query.
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
        """Writes the index folder atomically (`<path>.partial`, then a rename).

        It holds `index.faiss` (faiss `write_index`), `ids.npy`, `config.json`,
        `vectors.npy` (quantized kinds) and the completion marker.

        Args:
            path: str. The folder.
            overwrite: bool. Replace an index saved there before.

        Raises:
            ValueError: `path` holds something else, or an index without `overwrite`.
        """
        target = outputs.check_writable(path, "path")
        if os.path.lexists(target) and (not os.path.isdir(target) or os.listdir(target)):
            if not os.path.isfile(os.path.join(target, CONFIG_FILE)):
                raise ValueError(f"path {target} already holds something that is not an index; choose another.")
            if not overwrite:
                raise ValueError(f"path {target} already holds an index; pass overwrite=True (--overwrite).")
        work = target + outputs.PARTIAL_SUFFIX
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        try:
            write = faiss.write_index_binary if self.kind == "binary" else faiss.write_index
            write(self.index, os.path.join(work, INDEX_FILE))
            np.save(os.path.join(work, IDS_FILE), self.ids)
            if self.vectors is not None:
                np.save(os.path.join(work, VECTORS_FILE), np.asarray(self.vectors))
            config = {"format": FORMAT, "kind": self.kind, "count": len(self), "faiss": faiss.__version__}
            outputs.write_json(os.path.join(work, CONFIG_FILE), {**config, "params": self.params})
            outputs.finalize_dir(work, target, {"command": "index build", "kind": self.kind})
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return target

    @classmethod
    def load(cls, path, mmap=True):
        """Reads a folder written by `save`.

        Args:
            path: str. The folder.
            mmap: bool. Memory-map the rescoring vectors (quantized kinds)
                instead of reading them into memory.

        Raises:
            ValueError: naming the path, when it is absent, incomplete or corrupt.
        """
        _require_faiss()
        path = os.fspath(path)
        if not os.path.isdir(path):
            raise ValueError(f"index path {path} is not a folder (absent or a file).")
        if not outputs.is_complete(path):
            raise ValueError(f"index path {path} has no {outputs.MARKER}: not a finished index folder.")
        try:
            with open(os.path.join(path, CONFIG_FILE), encoding="utf-8") as f:
                config = json.load(f)
            kind, params = config["kind"], config["params"]
            if config.get("format") != FORMAT or kind not in KINDS:
                raise ValueError(f"format {config.get('format')!r}, kind {kind!r}")
            read = faiss.read_index_binary if kind == "binary" else faiss.read_index
            index = read(os.path.join(path, INDEX_FILE))
            ids = np.load(os.path.join(path, IDS_FILE), allow_pickle=False)
            vectors = None
            if kind in QUANTIZED_KINDS:
                vectors = np.load(os.path.join(path, VECTORS_FILE), mmap_mode="r" if mmap else None)
        except (OSError, RuntimeError, ValueError, KeyError, TypeError) as error:
            raise ValueError(f"index path {path} is corrupt or incomplete: {' '.join(str(error).split())}") from None
        shapes = (index.ntotal, len(ids), config["count"]) + ((len(vectors),) if vectors is not None else ())
        if len(set(shapes)) != 1 or (vectors is not None and vectors.shape[1] != params["dim"]):
            raise ValueError(f"index path {path} is inconsistent: row counts {shapes} differ.")
        return cls(index, ids, kind, params, vectors)


def read_parquet_embeddings(directory):
    """`(ids, embeddings)` from the `*.parquet` shards in `directory`.

    Columns `id` (string) and `embedding` (fixed-size list of float32).
    A stand-in for `sbert_keras.beam.read_embeddings` until that module lands.

    Raises:
        ValueError: no shards, a missing column or ragged embeddings (naming the file).
    """
    import pyarrow.compute as pc  # optional: installed with the `beam` extra
    import pyarrow.parquet as pq

    files = sorted(glob.glob(os.path.join(os.fspath(directory), "*.parquet")))
    if not files:
        raise ValueError(f"--embeddings {directory}: no *.parquet shards there.")
    ids, blocks = [], []
    for file in files:
        table = pq.read_table(file)
        if not {"id", "embedding"} <= set(table.column_names):
            raise ValueError(f"{file}: needs columns 'id' and 'embedding'; found {table.column_names}.")
        column = table.column("embedding").combine_chunks()
        try:
            lengths = set(pc.list_value_length(column).to_pylist()) if len(column) else {0}
        except NotImplementedError:  # pyarrow's ArrowNotImplementedError: not a list column
            lengths = set()
        if column.null_count or len(lengths) != 1:
            raise ValueError(f"{file}: 'embedding' must hold non-null float lists of one length.")
        ids.extend(str(i) for i in table.column("id").to_pylist())
        blocks.append(column.flatten().to_numpy(zero_copy_only=False).astype(np.float32).reshape(len(column), -1))
    return ids, np.concatenate(blocks)


# === CLI: `sbert-keras index build` and `sbert-keras index search` ===


def add_arguments(index_parser):
    """Adds the `build` and `search` subcommands to the `index` parser (`args.index_command`)."""
    sub = index_parser.add_subparsers(dest="index_command", required=True)
    build = sub.add_parser("build", help="index Parquet shards (embed-corpus output) or a .npy file")
    build.add_argument("--embeddings", required=True, help="folder of *.parquet shards, or a .npy (ids = row numbers)")
    build.add_argument("--output", required=True, help="index folder (appears when complete)")
    build.add_argument("--kind", default="hnsw", choices=KINDS)
    build.add_argument("--rescore-multiplier", type=int, default=DEFAULTS["rescore_multiplier"])
    build.add_argument("--overwrite", action="store_true", help="replace an index saved in --output")
    search = sub.add_parser("search", help="print one JSON line per query: its top-k ids and cosines")
    search.add_argument("--index", required=True, help="index folder written by `index build`")
    search.add_argument("--model", required=True, help="the model that encoded the corpus")
    group = search.add_mutually_exclusive_group(required=True)
    group.add_argument("--query", action="append")
    group.add_argument("--queries", help="file of lines")
    search.add_argument("--top-k", type=int, default=10)
    search.add_argument("--batch-size", type=int, default=32)


def run_build(args):
    """`index build`: returns a JSON-able summary of the saved index."""
    path = os.fspath(args.embeddings)
    if path.endswith(".npy") and os.path.isfile(path):
        ids, embeddings = None, np.load(path, allow_pickle=False)
    else:
        ids, embeddings = read_parquet_embeddings(path)
    outputs.check_writable(args.output)
    index = EmbeddingIndex.build(embeddings, ids, kind=args.kind, rescore_multiplier=args.rescore_multiplier)
    index.save(args.output, overwrite=args.overwrite)
    return {"index": args.output, "kind": index.kind, "count": len(index), "dim": index.dim, "bytes": index.nbytes()}


def run_search(args, load_encoder):
    """`index search`: one `{"query", "hits": [{"id", "score"}]}` dict per query.

    Args:
        args: the parsed arguments.
        load_encoder: callable. `cli.load_encoder` (returns `(encoder, model)`).
    """
    top_k = check_positive_int(args.top_k, "--top-k")
    batch_size = check_positive_int(args.batch_size, "--batch-size")
    if args.query:
        queries = args.query
    else:
        with open(args.queries, encoding="utf-8") as f:
            queries = [line.rstrip("\r\n") for line in f if line.strip()]
        if not queries:
            raise ValueError(f"--queries {args.queries} has no text lines.")
    index = EmbeddingIndex.load(args.index)  # a bad index fails before the model loads
    encoder = load_encoder(args.model)[0]
    ids, scores = index.search(encoder.encode(queries, batch_size=batch_size), top_k)
    return [
        {"query": q, "hits": [{"id": i, "score": s} for i, s in zip(qi.tolist(), qs.tolist())]}
        for q, qi, qs in zip(queries, ids, scores)
    ]
