"""Corpus encoding on Apache Beam: `RunInference` with a `SentenceEncoder`.

`embed_corpus` embeds text lines or JSON lines (a file or a glob) into
Parquet shards with the columns `id` (string) and `embedding` (fixed-size
list of float32), on any Beam runner: locally on the DirectRunner (one
process, or `--direct_num_workers 2 --direct_running_mode
multi_processing`), or on Dataflow, Flink or Spark with their pipeline
options. `read_embeddings(folder)` loads the shards back as
`(ids, float32 matrix)`.

Why hand-written: Beam ships handlers for TensorFlow SavedModels, PyTorch,
ONNX and Hugging Face pipelines, but none calls `SentenceEncoder.encode`,
whose length-sorted batching and fused, self-checked graph are the fast
path. So `SentenceEncoderModelHandler` is a thin `ModelHandler` (the pattern
of Beam's `tensorflow_inference.py`): Beam loads it once per worker, batches
with `BatchElements`, and the workers, sharding and writes are Beam's own;
there is no worker pool here.

Ids: a JSON line gives its `"id"` (string or integer, stored as a string);
a plain-text line's id is its 1-based line number (`"7"`), or
`"<file name>:<line>"` when the input matches several files. Empty lines
are skipped (their line numbers are not reused). Shard rows are not in input
order; use the ids.

The output folder is built as `<output>.partial` and renamed into place after
its `complete.json` marker is written (`sbert_keras.outputs`), so a killed
run never leaves a folder that looks complete; `read_embeddings` refuses one
without the marker.

Example:
```python
from sbert_keras import beam

beam.embed_corpus("all-MiniLM-L6-v2/", "corpus.jsonl", "corpus-emb",
                  pipeline_args=["--direct_num_workers", "2",
                                 "--direct_running_mode", "multi_processing"])
ids, vectors = beam.read_embeddings("corpus-emb")  # list of str, (n, 384) float32
```
"""

import argparse
import fnmatch
import json
import os
import re
import shutil
import time

import apache_beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems
from apache_beam.ml.inference.base import KeyedModelHandler
from apache_beam.ml.inference.base import ModelHandler
from apache_beam.ml.inference.base import PredictionResult
from apache_beam.ml.inference.base import RunInference
from apache_beam.options.pipeline_options import PipelineOptions

import sbert_keras
from sbert_keras import data
from sbert_keras import outputs
from sbert_keras.checks import check_positive_int
from sbert_keras.defaults import ENCODE_BATCH_SIZE
from sbert_keras.defaults import PRECISIONS

# Texts per Beam batch (`BatchElements`): `encode` sorts each batch by length
# and cuts it into `batch_size` forward passes, so a large batch pads little.
BEAM_BATCH_SIZE = 1024
SHARD_PREFIX = "part"
SHARD_SUFFIX = ".parquet"
SHARD_PATTERN = f"{SHARD_PREFIX}-*-of-*{SHARD_SUFFIX}"
JSONL_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")
INPUT_FORMATS = ("auto", "text", "jsonl")
# A bad input line fails a worker; runners re-raise it as a RuntimeError whose
# text holds the original "DataFormatError: <file>, line <n>: <reason>".
BAD_LINE = re.compile(r"DataFormatError: (.+?)(?: \[while running .*)?$", re.MULTILINE)


class SentenceEncoderModelHandler(ModelHandler):
    """A Beam `ModelHandler`: texts in, float32 embeddings out, via `encode`.

    Wrap it in `KeyedModelHandler` to carry ids (`(id, text)` ->
    `(id, PredictionResult)`). Each worker process loads the encoder once
    (`load_model`); Beam's `BatchElements` groups `min_batch_size` to
    `max_batch_size` texts, which `encode` sorts by length and runs in
    passes of `batch_size`. The model is not shared across processes
    (`large_model=False`): a shared model serves every process from one
    copy, which on a 2-core machine serialises the two workers' inference,
    and one all-MiniLM-L6-v2 worker needs well under 1 GB.

    Args:
        model: str. What `SentenceEncoder.from_preset` loads: a
            sentence-transformers / Hugging Face folder, a `.keras` file or
            the output folder of `sbert-keras train`.
        batch_size: int. Texts per forward pass of `encode`.
        precision: str. `encode`'s precision (`"auto"`, `"float32"`, ...).
        normalize: bool or None. `encode`'s `normalize`.
        min_batch_size: int. Smallest Beam batch.
        max_batch_size: int. Largest Beam batch.
        **kwargs: passed to Beam's `ModelHandler` (`large_model`,
            `model_copies`, `env_vars`, ...).

    Example:
    ```python
    handler = KeyedModelHandler(SentenceEncoderModelHandler("model.keras", precision="float32"))
    pairs | RunInference(handler)  # (id, PredictionResult(text, vector))
    ```
    """

    def __init__(
        self,
        model,
        batch_size=ENCODE_BATCH_SIZE,
        precision="auto",
        normalize=None,
        min_batch_size=BEAM_BATCH_SIZE,
        max_batch_size=BEAM_BATCH_SIZE,
        **kwargs,
    ):
        check_positive_int(batch_size, "batch_size")
        check_positive_int(min_batch_size, "min_batch_size")
        check_positive_int(max_batch_size, "max_batch_size")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, received {precision!r}.")
        super().__init__(min_batch_size=min_batch_size, max_batch_size=max(min_batch_size, max_batch_size), **kwargs)
        self.model = os.fspath(model)
        self.batch_size = batch_size
        self.precision = precision
        self.normalize = normalize

    def load_model(self):
        """Loads the encoder (once per worker process)."""
        return sbert_keras.SentenceEncoder.from_preset(self.model)

    def run_inference(self, batch, model, inference_args=None):
        """`PredictionResult(text, float32 vector)` for each text of `batch`."""
        texts = list(batch)
        vectors = model.encode(
            texts,
            batch_size=self.batch_size,
            precision=self.precision,
            normalize=self.normalize,
            show_progress=False,
        )
        return [PredictionResult(text, vector, self.model) for text, vector in zip(texts, vectors)]

    def get_num_bytes(self, batch):
        return sum(len(text.encode("utf-8")) for text in batch)

    def get_metrics_namespace(self):
        return "SentenceEncoder"


# === Input ===


def match_input(pattern):
    """The files `pattern` (a path or glob, local or any Beam file system) matches.

    Raises:
        FileNotFoundError: nothing matches.
        ValueError: every matched file is empty.
    """
    pattern = os.fspath(pattern)
    files = [m for result in FileSystems.match([pattern]) for m in result.metadata_list]
    files = sorted((m for m in files if not m.path.endswith("/")), key=lambda m: m.path)
    if not files:
        raise FileNotFoundError(f"--input {pattern}: no file matches.")
    if all(m.size_in_bytes == 0 for m in files):
        raise ValueError(f"--input {pattern}: empty input ({len(files)} empty file(s)); nothing to encode.")
    return [m.path for m in files]


def is_jsonl(path, input_format="auto"):
    """Whether `path` is read as JSON lines (`auto`: by its ending)."""
    if input_format not in INPUT_FORMATS:
        raise ValueError(f"input_format must be one of {INPUT_FORMATS}, received {input_format!r}.")
    return input_format == "jsonl" or (input_format == "auto" and path.lower().endswith(JSONL_SUFFIXES))


def parse_jsonl_line(path, line_number, line):
    """`(id, text)` of one JSON line, or a `DataFormatError` naming file and line."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise data.DataFormatError(path, line_number, f"invalid JSON ({error})") from None
    if not isinstance(record, dict):
        raise data.DataFormatError(path, line_number, f"expected a JSON object, found {type(record).__name__}")
    for key in ("id", "text"):
        if key not in record:
            raise data.DataFormatError(path, line_number, f'missing key {key!r} (expected {{"id": ..., "text": ...}})')
    text, key = record["text"], record["id"]
    if not isinstance(text, str):
        raise data.DataFormatError(path, line_number, f"'text' is not a string: {text!r}")
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise data.DataFormatError(path, line_number, f"'id' is not a string or an integer: {key!r}")
    return str(key), text


def read_records(path, input_format="auto", id_prefix=""):
    """Yields `(id, text)` of one input file; blank lines are skipped.

    Plain text: id `f"{id_prefix}{line_number}"` (1-based). JSON lines: the
    record's `"id"` as a string. Lines are decoded as in `sbert_keras.data`
    (UTF-8, errors name the file and line); `.gz` files are decompressed.

    Args:
        path: str. A file (local or any Beam file system).
        input_format: str. `"auto"` (JSON lines for `.jsonl`/`.json`),
            `"text"` or `"jsonl"`.
        id_prefix: str. Put before plain-text line numbers.

    Raises:
        sbert_keras.data.DataFormatError: a bad line, naming file and line.
    """
    jsonl = is_jsonl(path, input_format)
    with FileSystems.open(path) as f:
        for line_number, raw in enumerate(iter(f.readline, b""), start=1):
            line = data._decode_line(path, line_number, raw).removesuffix("\n").removesuffix("\r")
            if not line.strip():
                continue
            yield parse_jsonl_line(path, line_number, line) if jsonl else (f"{id_prefix}{line_number}", line)


def id_prefixes(files):
    """`{path: prefix}`: `""` for one file, else `"<file name>:"` (unique names)."""
    if len(files) == 1:
        return {files[0]: ""}
    names = [os.path.basename(path) for path in files]
    if len(set(names)) < len(names):
        names = files  # same base names in different folders: the full paths
    return {path: f"{name}:" for path, name in zip(files, names)}


# === Output ===


def prepare_output(output, overwrite=False):
    """Checks the output folder before any work; returns its absolute path.

    Raises:
        ValueError: not a local path, a file, or a folder holding files;
            without `overwrite`, also an earlier result.
    """
    output = os.fspath(output)
    if "://" in output:
        raise ValueError(
            f"--output {output}: give a local (or mounted) folder; the atomic rename of the finished "
            "folder needs a POSIX file system."
        )
    target = outputs.check_writable(output)
    if os.path.exists(target) and not os.path.isdir(target):
        raise ValueError(f"--output {target} is a file; give a folder.")
    entries = set(os.listdir(target)) if os.path.isdir(target) else set()
    ours = {name for name in entries if name == outputs.MARKER or fnmatch.fnmatch(name, SHARD_PATTERN)}
    if entries - ours:
        raise ValueError(
            f"--output {target} holds files that are not embedding shards (e.g. {min(entries - ours)!r}); "
            "choose another folder."
        )
    if entries and not overwrite:
        raise ValueError(f"--output {target} already holds embeddings; pass --overwrite to replace them.")
    return target


def shard_files(folder):
    """The Parquet shards of an output folder, sorted."""
    return sorted(name for name in os.listdir(folder) if fnmatch.fnmatch(name, SHARD_PATTERN))


def read_embeddings(folder):
    """Loads the shards of `embed_corpus` back.

    Args:
        folder: str or path-like. The output folder.

    Returns:
        `(ids, embeddings)`: a list of str and a float32 `(n, dim)` array,
        in shard order (not input order).

    Raises:
        FileNotFoundError: no such folder.
        sbert_keras.IncompleteOutputError: the run did not finish
            (no `complete.json`).

    Example:
    ```python
    ids, vectors = read_embeddings("corpus-emb")
    ```
    """
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"No such embeddings folder: {folder}")
    if not outputs.is_complete(folder):
        raise outputs.IncompleteOutputError(folder, f"no {outputs.MARKER}")
    with open(os.path.join(folder, outputs.MARKER), encoding="utf-8") as f:
        dim = json.load(f)["dim"]
    ids, blocks = [], []
    for name in shard_files(folder):
        table = pq.read_table(os.path.join(folder, name), columns=["id", "embedding"])
        ids.extend(table.column("id").to_pylist())
        flat = table.column("embedding").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        blocks.append(flat.astype("float32", copy=False).reshape(-1, dim))
    embeddings = np.concatenate(blocks) if blocks else np.zeros((0, dim), "float32")
    return ids, embeddings


def count_rows(folder):
    """Rows of all shards in `folder`, from the Parquet footers."""
    return sum(pq.ParquetFile(os.path.join(folder, name)).metadata.num_rows for name in shard_files(folder))


# === Pipeline ===


def to_row(keyed):
    """`(id, PredictionResult)` -> the Parquet row `{"id", "embedding"}`."""
    key, result = keyed
    return {"id": key, "embedding": np.asarray(result.inference, dtype="float32")}


def build_pipeline(pipeline, files, handler, output_prefix, dim, input_format="auto"):
    """Adds read -> `RunInference` -> `WriteToParquet` to `pipeline`.

    Args:
        pipeline: `apache_beam.Pipeline`.
        files: list of str. The input files (`match_input`).
        handler: `SentenceEncoderModelHandler`.
        output_prefix: str. Shards are `{output_prefix}-SSSSS-of-NNNNN.parquet`.
        dim: int. The embedding size (the schema's fixed list size).
        input_format: str. See `read_records`.
    """
    schema = pa.schema([("id", pa.string()), ("embedding", pa.list_(pa.float32(), dim))])
    prefixes = id_prefixes(files)
    return (
        pipeline
        | "Files" >> apache_beam.Create(files)
        | "Read" >> apache_beam.FlatMap(lambda path: read_records(path, input_format, prefixes[path]))
        | "Spread" >> apache_beam.Reshuffle()  # one file's lines to every worker
        | "Encode" >> RunInference(KeyedModelHandler(handler))
        | "Rows" >> apache_beam.Map(to_row)
        | "Write" >> apache_beam.io.WriteToParquet(output_prefix, schema, file_name_suffix=SHARD_SUFFIX)
    )


def run_pipeline(pipeline):
    """Runs `pipeline` to the end; a bad input line becomes a `ValueError` naming file and line."""
    try:
        return pipeline.run().wait_until_finish()
    except Exception as error:
        bad_line = BAD_LINE.search(str(error))
        if bad_line:
            raise ValueError(bad_line.group(1)) from error
        raise


def embed_corpus(
    model,
    input,
    output,
    precision="auto",
    pipeline_args=(),
    batch_size=ENCODE_BATCH_SIZE,
    beam_batch_size=BEAM_BATCH_SIZE,
    input_format="auto",
    normalize=None,
    overwrite=False,
    worker_threads=None,
):
    """Embeds a corpus with a Beam pipeline into Parquet shards in `output`.

    Args:
        model: str. A sentence-transformers folder, `.keras` file or train
            output folder (loaded here once for its embedding size, then once
            per Beam worker).
        input: str. A file or glob of text lines or JSON lines
            (`{"id": ..., "text": ...}`).
        output: str. The output folder (local); it appears when complete.
        precision: str. `encode`'s precision.
        pipeline_args: list of str. Beam pipeline options
            (`--runner`, `--direct_num_workers`, ...).
        batch_size: int. Texts per forward pass.
        beam_batch_size: int. Texts per Beam batch (sorted by `encode`).
        input_format: str. `"auto"`, `"text"` or `"jsonl"`.
        normalize: bool or None. L2-normalise (None: the model's setting).
        overwrite: bool. Replace an earlier result in `output`.
        worker_threads: int or None. TensorFlow intra-op threads per Beam
            worker (`TF_NUM_INTRAOP_THREADS`, set by Beam before the model
            loads); None keeps TensorFlow's default (all cores).

    Returns:
        A dict: `texts`, `dim`, `shards`, `output`, `seconds`.

    Raises:
        FileNotFoundError / ValueError: no input file, empty input, a bad
            output folder, or (from the pipeline) a bad input line naming
            its file and 1-based line.
    """
    env_vars = {}
    if worker_threads is not None:
        env_vars["TF_NUM_INTRAOP_THREADS"] = str(check_positive_int(worker_threads, "worker_threads"))
    handler = SentenceEncoderModelHandler(
        model,
        batch_size,
        precision,
        normalize,
        min_batch_size=beam_batch_size,
        max_batch_size=beam_batch_size,
        env_vars=env_vars,
    )
    files = match_input(input)
    for path in files:
        is_jsonl(path, input_format)
    target = prepare_output(output, overwrite)
    dim = sbert_keras.SentenceEncoder.from_preset(model).embedding_dim
    work = target + outputs.PARTIAL_SUFFIX
    shutil.rmtree(work, ignore_errors=True)  # a killed earlier run: Beam cannot resume it
    os.makedirs(work)
    start = time.perf_counter()
    try:
        pipeline = apache_beam.Pipeline(options=PipelineOptions(list(pipeline_args)))
        build_pipeline(pipeline, files, handler, os.path.join(work, SHARD_PREFIX), dim, input_format)
        state = run_pipeline(pipeline)
        if state != "DONE":
            raise RuntimeError(f"the Beam pipeline ended in state {state}")
        texts = count_rows(work)
        if texts == 0:
            raise ValueError(f"--input {input}: empty input (only blank lines); nothing to encode.")
        shards = shard_files(work)
        marker = {"command": "embed-corpus", "model": os.fspath(model), "input": os.fspath(input)}
        marker.update(texts=texts, dim=dim, precision=precision, shards=shards)
        outputs.finalize_dir(work, target, marker)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    seconds = time.perf_counter() - start
    return {"texts": texts, "dim": dim, "shards": len(shards), "output": target, "seconds": seconds}


# === CLI ===


def add_arguments(parser):
    """The options of `sbert-keras embed-corpus` (Beam's own options are passed through)."""
    parser.add_argument("--model", required=True, help="sentence-transformers folder, .keras file or train output")
    parser.add_argument("--input", required=True, help="file or glob: text lines, or JSON lines {'id', 'text'}")
    parser.add_argument("--output", required=True, help="output folder of Parquet shards (appears when complete)")
    parser.add_argument("--precision", default="auto", choices=list(PRECISIONS), help="encode's matmul precision")
    parser.add_argument("--batch-size", type=int, default=ENCODE_BATCH_SIZE, help="texts per forward pass")
    parser.add_argument("--beam-batch-size", type=int, default=BEAM_BATCH_SIZE, help="texts per Beam batch")
    parser.add_argument("--input-format", default="auto", choices=list(INPUT_FORMATS), help="auto: .jsonl/.json")
    parser.add_argument("--normalize", action="store_true", help="L2-normalise the embeddings")
    parser.add_argument("--worker-threads", type=int, default=None, help="TensorFlow threads per Beam worker")
    parser.add_argument("--overwrite", action="store_true", help="replace earlier embeddings in --output")
    return parser


def run(args):
    """Runs `embed_corpus` for parsed `args` (`args.pipeline_args`: Beam options)."""
    return embed_corpus(
        args.model,
        args.input,
        args.output,
        precision=args.precision,
        pipeline_args=getattr(args, "pipeline_args", None) or [],
        batch_size=args.batch_size,
        beam_batch_size=args.beam_batch_size,
        input_format=args.input_format,
        normalize=args.normalize or None,
        overwrite=args.overwrite,
        worker_threads=args.worker_threads,
    )


def main(argv=None):
    """`python -m sbert_keras.beam --model M --input F --output D [Beam options]`."""
    parser = add_arguments(argparse.ArgumentParser(prog="sbert-keras embed-corpus", description=__doc__))
    args, args.pipeline_args = parser.parse_known_args(argv)
    print(json.dumps(run(args), indent=2))


if __name__ == "__main__":
    main()
