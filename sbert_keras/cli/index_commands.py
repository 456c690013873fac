"""`sbert-keras index build` and `sbert-keras index search`: the CLI of `sbert_keras.retrieval.index`.

`add_arguments` adds the two subcommands to the parser (`sbert_keras.cli.parser`;
their flags are checked by `sbert_keras.cli.flag_checks`); `run_build`
indexes an `embed-corpus` folder of Parquet shards or a `.npy` file after
checking the free disk space, and `run_search` encodes the queries and
prints their hits. Ids are those of `embed-corpus` (for a text file, its
1-based line numbers) and, for a `.npy` written by `encode` (one row per
line of its input), the 1-based line numbers too: one convention for
`embed-corpus`, `index` and `search`. This module imports
faiss (when installed) but no TensorFlow: the parser imports it for `--help`.
"""

import numpy as np

from sbert_keras.cli.arguments import add_command
from sbert_keras.cli.flag_types import positive_int
from sbert_keras.data import readers
from sbert_keras.retrieval import index
from sbert_keras.retrieval.index import EmbeddingIndex
from sbert_keras.retrieval.index_files import KINDS
from sbert_keras.retrieval.index_files import estimated_bytes
from sbert_keras.utils import disk_space
from sbert_keras.utils.defaults import ENCODE_BATCH_SIZE
from sbert_keras.utils.defaults import SEARCH_TOP_K


def add_arguments(index_parser):
    """Adds the `build` and `search` subcommands to the `index` parser (`args.index_command`)."""
    sub = index_parser.add_subparsers(title="commands", dest="index_command", required=True, metavar="COMMAND")
    build = add_command(sub, "build", "index the vectors of `embed-corpus` (Parquet shards) or `encode` (a .npy)")
    build.add_argument(
        "--embeddings",
        required=True,
        help="an `embed-corpus` output folder (ids: its ids), or a .npy written by `encode` "
        "(ids: the 1-based line numbers of the file it encoded, row r is line r+1)",
    )
    build.add_argument("--output", required=True, help="index folder (appears when complete)")
    build.add_argument(
        "--kind",
        default="hnsw",
        choices=KINDS,
        help="flat: exact; hnsw: graph, approximate; ivf: inverted lists, approximate; int8 (4x smaller) and "
        "binary (32x smaller): quantized codes, candidates rescored with the float vectors",
    )
    build.add_argument(
        "--rescore-multiplier",
        type=positive_int,
        help="int8 and binary: candidates rescored per hit (default: 4 for int8, 10 for binary)",
    )
    build.add_argument("--overwrite", action="store_true", help="replace an index saved in --output")
    search = add_command(sub, "search", "print one JSON line per query: the ids and cosine similarities of its hits")
    search.add_argument("--index", required=True, help="index folder written by `index build`")
    search.add_argument("--model", required=True, help="the model that encoded the corpus: it encodes the queries")
    group = search.add_mutually_exclusive_group(required=True)
    group.add_argument("--query", action="append", help="a query; repeat the flag for several")
    group.add_argument("--queries", help="UTF-8 text file of queries, one per line (blank lines skipped)")
    search.add_argument("--top-k", type=positive_int, default=SEARCH_TOP_K, help="hits per query")
    search.add_argument("--batch-size", type=int, default=ENCODE_BATCH_SIZE, help="texts per forward pass")


def line_number_ids(count):
    """The ids of `count` rows read from a text file, one row per line: `"1"` to `str(count)`."""
    return [str(line) for line in range(1, count + 1)]


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
    if str(args.embeddings).endswith(".npy"):  # `sbert-keras encode` output: one row per line of its input
        embeddings = np.load(args.embeddings, allow_pickle=False)
        ids = line_number_ids(len(embeddings)) if np.ndim(embeddings) == 2 else None
    else:
        ids, embeddings = index.read_parquet_embeddings(args.embeddings)
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
    queries = args.query or [line for _, line in readers.iter_text_lines(args.queries) if line.strip()]
    if not queries:
        raise ValueError(f"--queries {args.queries} has no text lines.")
    loaded = EmbeddingIndex.load(args.index)  # a bad index fails before the model loads
    encoder = load_encoder(args.model)[0]
    ids, scores = loaded.search(encoder.encode(queries, batch_size=args.batch_size), args.top_k)
    hits = ([{"id": i, "score": s} for i, s in zip(qi, qs)] for qi, qs in zip(ids.tolist(), scores.tolist()))
    return [{"query": q, "hits": h} for q, h in zip(queries, hits)]
