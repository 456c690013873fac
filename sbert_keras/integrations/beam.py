"""Corpus encoding on Apache Beam: `RunInference` with a `SentenceEncoder`.

`embed_corpus` embeds text lines or JSON lines (a file or glob) into Parquet
shards with columns `id` (string) and `embedding` (fixed-size list of
float32) on any Beam runner (DirectRunner, Dataflow, Flink, Spark);
`read_embeddings(folder)` loads them back as `(ids, float32 matrix)`.

Why hand-written: Beam's handlers (TensorFlow, PyTorch, ONNX, Hugging Face)
cannot call `SentenceEncoder.encode`, whose length-sorted batching and
fused, self-checked graph are the fast path. `SentenceEncoderModelHandler`
is a thin `ModelHandler` (the pattern of Beam's `tensorflow_inference.py`);
loading per worker, batching, workers, sharding and writes are Beam's.

Ids: a JSON line's `"id"` (string or integer, stored as a string); for plain
text the 1-based line number (`"7"`), or `"<file name>:<line>"` when the
input matches several files (`sbert_keras.data.corpus`). Before the
pipeline, the input is read once: bad lines and duplicate ids are refused,
and the free space for the shards is checked. Blank lines are skipped.
Shard rows are not in input order. The output folder is built as
`<output>.partial` and renamed into place after its `complete.json` marker
(`sbert_keras.utils.atomic_io`), which lists the shards and rows that
`read_embeddings` (`sbert_keras.data.embedding_shards`) holds them to.

Example:
```python
from sbert_keras.integrations import beam

beam.embed_corpus("all-MiniLM-L6-v2/", "corpus.jsonl", "corpus-emb",
                  pipeline_args=["--direct_num_workers", "2",
                                 "--direct_running_mode", "multi_processing"])
ids, vectors = beam.read_embeddings("corpus-emb")  # list of str, (n, 384) float32
```
"""

import logging
import os
import re
import shutil
import time

import apache_beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.ml.inference.base import KeyedModelHandler
from apache_beam.ml.inference.base import ModelHandler
from apache_beam.ml.inference.base import PredictionResult
from apache_beam.ml.inference.base import RunInference
from apache_beam.options.pipeline_options import PipelineOptions

from sbert_keras.data.corpus import id_prefixes
from sbert_keras.data.corpus import is_jsonl
from sbert_keras.data.corpus import match_input
from sbert_keras.data.corpus import read_records
from sbert_keras.data.corpus import scan_input
from sbert_keras.data.embedding_shards import SHARD_PREFIX
from sbert_keras.data.embedding_shards import SHARD_SUFFIX
from sbert_keras.data.embedding_shards import estimated_bytes
from sbert_keras.data.embedding_shards import prepare_output
from sbert_keras.data.embedding_shards import read_embeddings  # noqa: F401 (part of this module's API)
from sbert_keras.data.embedding_shards import shard_checksums
from sbert_keras.data.embedding_shards import shard_files
from sbert_keras.encoder import SentenceEncoder
from sbert_keras.integrations.beam_arguments import add_arguments  # noqa: F401 (part of this module's API)
from sbert_keras.training import objectives  # noqa: F401 (registers every model and loss a `.keras` file may hold)
from sbert_keras.utils import atomic_io
from sbert_keras.utils import backends
from sbert_keras.utils import disk_space
from sbert_keras.utils.checks import check_positive_int
from sbert_keras.utils.defaults import BEAM_BATCH_SIZE
from sbert_keras.utils.defaults import COMPUTES
from sbert_keras.utils.defaults import ENCODE_BATCH_SIZE
from sbert_keras.utils.defaults import ENCODE_COMPUTE

# A bad input line fails a worker; runners re-raise it as a RuntimeError whose
# text holds the original "DataFormatError: <file>, line <n>: <reason>".
BAD_LINE = re.compile(r"DataFormatError: (.+?)(?: \[while running .*)?$", re.MULTILINE)
BEAM_STEP_LOGGER = "apache_beam.runners.common"  # logs a failing step's exception and traceback


class SentenceEncoderModelHandler(ModelHandler):
    """A Beam `ModelHandler`: texts in, float32 embeddings out, via `encode`.

    Wrap it in `KeyedModelHandler` for `(id, text)` -> `(id, PredictionResult)`.
    Each worker loads the encoder once; `BatchElements` groups
    `min_batch_size`..`max_batch_size` texts, which `encode` sorts by length
    and runs in passes of `batch_size`. Not shared across processes by
    default: one shared copy would serialise the workers' inference, and a
    MiniLM worker needs ~1.3 GB.

    Args:
        model: str. For `SentenceEncoder.from_preset`: a sentence-transformers
            folder, a `.keras` file or a `sbert-keras train` output folder.
        batch_size: int. Texts per forward pass of `encode`.
        compute: str. `encode`'s compute path (`"auto"`, `"float32"`, ...).
        normalize: bool or None. `encode`'s `normalize`.
        min_batch_size: int. Smallest Beam batch.
        max_batch_size: int. Largest Beam batch.
        **kwargs: for Beam's `ModelHandler` (`model_copies`, `env_vars`, ...).

    Example:
    ```python
    handler = KeyedModelHandler(SentenceEncoderModelHandler("model.keras", compute="float32"))
    pairs | RunInference(handler)  # (id, PredictionResult(text, vector))
    ```
    """

    def __init__(
        self,
        model,
        batch_size=ENCODE_BATCH_SIZE,
        compute=ENCODE_COMPUTE,
        normalize=None,
        min_batch_size=BEAM_BATCH_SIZE,
        max_batch_size=BEAM_BATCH_SIZE,
        **kwargs,
    ):
        backends.require_tensorflow("SentenceEncoderModelHandler (Apache Beam)")
        check_positive_int(batch_size, "batch_size")
        check_positive_int(min_batch_size, "min_batch_size")
        check_positive_int(max_batch_size, "max_batch_size")
        if compute not in COMPUTES:
            raise ValueError(f"`compute` must be one of {COMPUTES}. Received {compute!r}.")
        super().__init__(min_batch_size=min_batch_size, max_batch_size=max(min_batch_size, max_batch_size), **kwargs)
        self.model = os.fspath(model)
        self.batch_size = batch_size
        self.compute = compute
        self.normalize = normalize

    def load_model(self):
        """Loads the encoder (once per worker process)."""
        return SentenceEncoder.from_preset(self.model)

    def run_inference(self, batch, model, inference_args=None):
        """`PredictionResult(text, float32 vector)` for each text of `batch`."""
        texts, options = list(batch), {"compute": self.compute, "normalize": self.normalize}
        vectors = model.encode(texts, batch_size=self.batch_size, show_progress=False, **options)
        return [PredictionResult(text, vector, self.model) for text, vector in zip(texts, vectors)]

    def get_num_bytes(self, batch):
        return sum(len(text.encode("utf-8")) for text in batch)

    def get_metrics_namespace(self):
        return "SentenceEncoder"


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
        dim: int. The embedding size.
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


class _DropDiskFull(logging.Filter):
    """Drops the log record (with its traceback) of a step that met a full disk."""

    def filter(self, record):
        return disk_space.NO_SPACE_TEXT not in record.getMessage()


def run_pipeline(pipeline):
    """Runs `pipeline` to the end; a bad input line becomes a `ValueError` naming file and line.

    Beam logs each failing step's exception with its traceback before re-raising it; for a
    full disk, which `embed_corpus` reports as one line, that record is dropped.
    """
    step_logger, drop = logging.getLogger(BEAM_STEP_LOGGER), _DropDiskFull()
    step_logger.addFilter(drop)
    try:
        return pipeline.run().wait_until_finish()
    except Exception as error:
        bad_line = BAD_LINE.search(str(error))
        if bad_line:
            raise ValueError(bad_line.group(1)) from error
        raise
    finally:
        step_logger.removeFilter(drop)


def embed_corpus(
    model,
    input,
    output,
    compute=ENCODE_COMPUTE,
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
        model: str. As in `SentenceEncoderModelHandler` (also loaded here
            once, for the embedding size of the Parquet schema).
        input: str. A file or glob of text lines or JSON lines `{"id", "text"}`.
        output: str. The local output folder; it appears when complete.
        compute: str. `encode`'s compute path.
        pipeline_args: list of str. Beam options (`--runner`, ...).
        batch_size: int. Texts per forward pass.
        beam_batch_size: int. Texts per Beam batch (sorted by `encode`).
        input_format: str. `"auto"`, `"text"` or `"jsonl"`.
        normalize: bool or None. L2-normalise (None: the model's setting).
        overwrite: bool. Replace an earlier result in `output`.
        worker_threads: int or None. `TF_NUM_INTRAOP_THREADS` per Beam
            worker (set by Beam before the load); None: TensorFlow's default.

    Returns:
        A dict: `texts`, `dim`, `shards`, `output`, `seconds`.

    Raises:
        FileNotFoundError / ValueError: no input file, empty input, a bad
            output folder, a bad input line or a duplicate id (naming file
            and 1-based line), all before the pipeline runs.
        sbert_keras.utils.disk_space.DiskFullError: too little free space for the
            shards (checked first), or a full disk met anyway.
        sbert_keras.utils.backends.TensorFlowRequired: Keras does not run on
            an installed TensorFlow.
    """
    backends.require_tensorflow("embed_corpus (Apache Beam)")
    env_vars = {}
    if worker_threads is not None:
        env_vars["TF_NUM_INTRAOP_THREADS"] = str(check_positive_int(worker_threads, "worker_threads"))
    sizes = {"min_batch_size": beam_batch_size, "max_batch_size": beam_batch_size}
    handler = SentenceEncoderModelHandler(model, batch_size, compute, normalize, env_vars=env_vars, **sizes)
    files = match_input(input)
    is_jsonl(files[0], input_format)  # checks `input_format` before any work
    target = prepare_output(output, overwrite)
    scanned = scan_input(files, input_format)  # bad lines and duplicate ids: before any model loads
    dim = SentenceEncoder.from_preset(model).embedding_dim
    needed = estimated_bytes(scanned.texts, dim, scanned.id_bytes)
    disk_space.check_free_space(target, needed)
    work = target + atomic_io.PARTIAL_SUFFIX
    shutil.rmtree(work, ignore_errors=True)  # a killed earlier run: Beam cannot resume it
    os.makedirs(work)
    start = time.perf_counter()
    try:
        with disk_space.disk_full_as_error(target, needed):
            shards = write_shards(pipeline_args, files, handler, work, dim, input_format, scanned.texts)
            marker = {"command": "embed-corpus", "model": os.fspath(model), "input": os.fspath(input)}
            marker.update(texts=scanned.texts, dim=dim, compute=compute, shards=shards)
            marker["sha256"] = shard_checksums(work, shards)  # `read_embeddings` refuses a shard changed since
            atomic_io.finalize_dir(work, target, marker)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    seconds = time.perf_counter() - start
    return {"texts": scanned.texts, "dim": dim, "shards": len(shards), "output": target, "seconds": seconds}


def write_shards(pipeline_args, files, handler, work, dim, input_format, texts):
    """Runs the pipeline into the folder `work`; returns the shard names.

    Args:
        pipeline_args: list of str. Beam options.
        files: list of str. The input files.
        handler: `SentenceEncoderModelHandler`.
        work: str. The working output folder.
        dim: int. The embedding size.
        input_format: str. See `read_records`.
        texts: int. The records `scan_input` counted: the rows the shards must hold.
    """
    pipeline = apache_beam.Pipeline(options=PipelineOptions(list(pipeline_args)))
    build_pipeline(pipeline, files, handler, os.path.join(work, SHARD_PREFIX), dim, input_format)
    state = run_pipeline(pipeline)
    if state != "DONE":
        raise RuntimeError(f"the Beam pipeline ended in state {state}")
    shards = shard_files(work)
    written = sum(pq.ParquetFile(os.path.join(work, name)).metadata.num_rows for name in shards)
    if written != texts:  # the input changed during the run
        raise ValueError(f"--input: {texts} texts read before the pipeline, {written} embedded; rerun.")
    return shards


# === CLI ===


def run(args):
    """Runs `embed_corpus` for the `args` parsed with `beam_arguments.add_arguments`.

    `args.pipeline_args`: the options the parser did not know, passed to Beam.
    """
    names = ("batch_size", "beam_batch_size", "input_format", "overwrite", "worker_threads")
    options = {name: getattr(args, name) for name in names}
    beam_args = getattr(args, "pipeline_args", None) or []
    return embed_corpus(
        args.model, args.input, args.output, args.compute, beam_args, normalize=args.normalize, **options
    )
