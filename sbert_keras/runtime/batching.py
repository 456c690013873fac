"""Smart batching for `encode`: length-sorted padded batches, progress bar, truncation report.

Texts are tokenised once, sorted by token length and cut into batches, each
padded only to its longest text, so a batch of short texts does not pay for
a long one; a few texts (a query) run strings-to-vectors in one graph call
(`strings_function`). tf.data's `bucket_by_sequence_length` buckets by fixed
boundaries and reorders the output; `encode` wants the exact longest length
per batch and the input order back, so the plan is written here.

Batches run `defaults.CONCURRENT_BATCHES` at a time from a thread pool (a
TensorFlow graph call releases the GIL): TensorFlow runs each small op of
one batch on one core, and a second batch in flight keeps the other busy.
Every batch is computed as it would be alone; results are written back in
the main thread. On a GPU batches run one at a time, as before: TensorFlow's
device scopes (`with tf.device(...)`) are per thread and would not reach the
pool's threads.
"""

import collections
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import tensorflow as tf
from tqdm.auto import tqdm

from sbert_keras.model.preprocessor import check_texts
from sbert_keras.runtime import cold_start
from sbert_keras.utils import hardware
from sbert_keras.utils.checks import check_positive_int
from sbert_keras.utils.defaults import CONCURRENT_BATCHES

# Texts of different lengths for `warmup`: a single query, then batches of two.
WARMUP_TEXTS = (
    "A man is playing a guitar.",
    "A dog runs in the park.",
    "Two women are sitting on a bench in the park, talking about the weather and the news.",
)


def encode_texts(engine, texts, batch_size, normalize, show_progress, precision, prompt=None, truncate_dim=None):
    """`SentenceEncoder.encode` on an `InferenceEngine`: float32 `(n, dim)`, or `(dim,)` for one string.

    `prompt` (str or None) is prepended to every text once they are checked;
    `truncate_dim` (a checked int or None) keeps the first dimensions before
    the normalisation.
    """
    single = isinstance(texts, (str, bytes))
    batch_size = check_positive_int(batch_size, "batch_size")
    texts = check_texts(texts)
    if prompt:
        texts = [prompt + text for text in texts]
    encoder = engine.encoder
    out = np.zeros((len(texts), encoder.embedding_dim), "float32")
    show = show_progress or (show_progress is None and len(texts) > 8 * batch_size)
    first = bool(texts) and precision not in engine.prepared  # self-checks and compilation ahead
    with cold_start.status(encoder, precision, first and show_progress is not False):
        out, num_truncated = run_texts(engine, texts, batch_size, show, precision, out)
    if first:
        engine.prepared.add(precision)
    if texts:
        report_truncation(encoder, num_truncated, len(texts))
    if truncate_dim is not None and truncate_dim < out.shape[1]:
        out = np.ascontiguousarray(out[:, :truncate_dim])
    if encoder.normalize if normalize is None else normalize:
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return out[0] if single else out


def run_texts(engine, texts, batch_size, show, precision, out):
    """Fills `out` with the pooled vectors of the checked `texts`; returns `(out, number truncated)`.

    A few texts without a progress bar go through `engine.query` (one
    call); more go in length-sorted batches (`run_batches`).
    """
    if not texts:
        return out, 0
    if len(texts) <= batch_size and not show:
        return engine.query(texts, precision)
    encoder = engine.encoder
    ids, num_truncated = encoder.preprocessor.tokenize(texts)
    pad = encoder.preprocessor.tokenizer.pad_token_id

    run = engine.runner(precision)
    # An `xnnpack.Runner` spreads each call over all cores itself (`max_concurrency` 1).
    concurrency = 1 if hardware.has_gpu() else getattr(run, "max_concurrency", CONCURRENT_BATCHES)
    run_batches(run, ids, pad, batch_size, out, show, concurrency)
    return out, num_truncated


def warmup(engine, precision="auto", verbose=True):
    """Runs every first-use self-check and compilation of `precision` now; returns the seconds taken.

    One single query and one batch of `WARMUP_TEXTS` go through the engine as
    `encode` would send them (see `SentenceEncoder.warmup`).
    """
    start = time.perf_counter()
    with cold_start.status(engine.encoder, precision, verbose and precision not in engine.prepared):
        engine.query(list(WARMUP_TEXTS[:1]), precision)
        out = np.zeros((len(WARMUP_TEXTS), engine.encoder.embedding_dim), "float32")
        run_texts(engine, list(WARMUP_TEXTS), 2, False, precision, out)
    engine.prepared.add(precision)
    return time.perf_counter() - start


def strings_function(preprocessor, run, changed=None):
    """A `tf.function`: strings -> `(run` of the padded token ids, number truncated, changed).

    `changed`: None, or a function returning a boolean tensor (e.g.
    `FusedWeights.changed`), computed in the same graph call.
    """
    pad_id = preprocessor.tokenizer.pad_token_id

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def embed(texts):
        ids, truncated = preprocessor.ragged_token_ids(texts)
        token_ids = tf.cast(ids.to_tensor(pad_id), tf.int32)
        mask = tf.sequence_mask(ids.row_lengths(), tf.shape(token_ids)[1], tf.int32)
        stale = tf.constant(False) if changed is None else changed()
        return run(token_ids, mask), tf.reduce_sum(tf.cast(truncated, tf.int32)), stale

    return embed


def report_truncation(encoder, num_truncated, num_texts):
    """Stores `encoder.last_num_truncated` and warns when texts were cut."""
    encoder.last_num_truncated = num_truncated
    if num_truncated:
        warnings.warn(
            f"{num_truncated} of {num_texts} texts were longer than {encoder.sequence_length} "
            "tokens and were truncated (see `encoder.last_num_truncated`).",
            stacklevel=5,
        )


def run_batches(run, ids, pad_id, batch_size, out, show_progress=False, concurrency=CONCURRENT_BATCHES):
    """Writes `run` of `ids` (ragged) into `out`, in length-sorted padded batches.

    Args:
        run: callable `(token_ids, padding_mask)` -> `(batch, dim)` tensor or
            array, safe to call from several threads (a traced `tf.function`,
            an `xnnpack.Runner`).
        ids: tf.RaggedTensor `(n, None)` of token ids.
        pad_id: int. The padding token id.
        batch_size: int. Rows per call of `run`.
        out: float32 array `(n, dim)`, filled in the original order.
        show_progress: bool. Show a tqdm progress bar.
        concurrency: int. Calls of `run` in flight at once.
    """
    lengths = ids.row_lengths().numpy()
    flat = ids.to_tensor(pad_id).numpy().astype("int32", copy=False)
    order = np.argsort(-lengths, kind="stable")
    progress = tqdm(total=len(lengths), desc="encode", unit="text") if show_progress else None

    def call(token_ids, mask):
        return np.asarray(run(token_ids, mask))

    def collect(index, future):
        out[index] = future.result()
        if progress is not None:
            progress.update(len(index))

    pending = collections.deque()
    with ThreadPoolExecutor(max(1, concurrency), thread_name_prefix="encode") as pool:
        for start in range(0, len(lengths), batch_size):
            index = order[start : start + batch_size]
            width = int(lengths[index].max())
            mask = (np.arange(width)[None, :] < lengths[index, None]).astype("int32")
            pending.append((index, pool.submit(call, flat[index, :width], mask)))
            if len(pending) >= concurrency:
                collect(*pending.popleft())
        while pending:
            collect(*pending.popleft())
    if progress is not None:
        progress.close()
