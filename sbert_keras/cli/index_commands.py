"""`sbert-keras index build` and `sbert-keras index search`: the CLI of `sbert_keras.retrieval.index`.

`add_arguments` adds the two subcommands to the parser (`sbert_keras.cli.parser`);
`run_build` indexes an `embed-corpus` folder of Parquet shards or a `.npy`
file after checking the output folder and the free disk space, and
`run_search` encodes the queries and prints their hits. This module imports
faiss (when installed) but no TensorFlow: the parser imports it for `--help`.
"""

import numpy as np

from sbert_keras.data import readers as data
from sbert_keras.retrieval import index
from sbert_keras.retrieval.index import EmbeddingIndex
from sbert_keras.retrieval.index_files import KINDS
from sbert_keras.retrieval.index_files import estimated_bytes
from sbert_keras.utils import atomic_io as outputs
from sbert_keras.utils import disk_space
from sbert_keras.utils.checks import check_positive_int


def add_arguments(index_parser):
    """Adds the `build` and `search` subcommands to the `index` parser (`args.index_command`)."""
    sub = index_parser.add_subparsers(dest="index_command", required=True)
    build = sub.add_parser("build", help="index Parquet shards (embed-corpus output) or a .npy file")
    build.add_argument("--embeddings", required=True, help="folder of *.parquet shards, or a .npy (ids = row numbers)")
    build.add_argument("--output", required=True, help="index folder (appears when complete)")
    build.add_argument("--kind", default="hnsw", choices=KINDS)
    build.add_argument("--rescore-multiplier", type=int, help="candidates per hit (default: 4 int8, 10 binary)")
    build.add_argument("--overwrite", action="store_true", help="replace an index saved in --output")
    search = sub.add_parser("search", help="print one JSON line per query: its top-k ids and cosines")
    search.add_argument("--index", required=True, help="index folder written by `index build`")
    search.add_argument("--model", required=True, help="the model that encoded the corpus")
    group = search.add_mutually_exclusive_group(required=True)
    group.add_argument("--query", action="append")
    group.add_argument("--queries", help="file of lines")
    search.add_argument("--top-k", type=int, default=10)
    search.add_argument("--batch-size", type=int, default=32)


def check_free_space(path, kind, embeddings, ids):
    """Raises `DiskFullError` when `path`'s disk cannot hold the index of `embeddings` (`estimated_bytes`).

    Args:
        path: str. The index folder to write.
        kind: str. The index kind.
        embeddings: np.ndarray. `(n, dim)`; other shapes are left to `EmbeddingIndex.build` to refuse.
        ids: list or None. The ids (`None`: row numbers).
    """
    if np.ndim(embeddings) != 2:
        return
    n, dim = np.shape(embeddings)
    longest = max((len(str(i)) for i in ids), default=1) if ids is not None else len(str(n))
    disk_space.check_free_space(path, estimated_bytes(kind, n, dim, 4 * longest, index.DEFAULTS["hnsw_m"]))


def run_build(args):
    """`index build`: returns a JSON-able summary of the saved index."""
    if str(args.embeddings).endswith(".npy"):  # `sbert-keras encode` output: ids are the row numbers
        ids, embeddings = None, np.load(args.embeddings, allow_pickle=False)
    else:
        ids, embeddings = index.read_parquet_embeddings(args.embeddings)
    outputs.check_writable(args.output)
    check_free_space(args.output, args.kind, embeddings, ids)  # before the build, which can take minutes
    built = EmbeddingIndex.build(embeddings, ids, kind=args.kind, rescore_multiplier=args.rescore_multiplier)
    built.save(args.output, overwrite=args.overwrite)
    return {"index": args.output, "kind": built.kind, "count": len(built), "dim": built.dim, "bytes": built.nbytes()}


def run_search(args, load_encoder):
    """`index search`: one `{"query", "hits": [{"id", "score"}]}` dict per query.

    Args:
        args: the parsed `index search` arguments.
        load_encoder: callable. `spec -> (encoder, model)`, `sbert_keras.cli.commands.load_encoder`
            (passed in: that module imports TensorFlow, this one is imported by the parser).
    """
    top_k = check_positive_int(args.top_k, "--top-k")
    batch_size = check_positive_int(args.batch_size, "--batch-size")
    queries = args.query or [line for _, line in data.iter_text_lines(args.queries) if line.strip()]
    if not queries:
        raise ValueError(f"--queries {args.queries} has no text lines.")
    loaded = EmbeddingIndex.load(args.index)  # a bad index fails before the model loads
    encoder = load_encoder(args.model)[0]
    ids, scores = loaded.search(encoder.encode(queries, batch_size=batch_size), top_k)
    hits = ([{"id": i, "score": s} for i, s in zip(qi, qs)] for qi, qs in zip(ids.tolist(), scores.tolist()))
    return [{"query": q, "hits": h} for q, h in zip(queries, hits)]
