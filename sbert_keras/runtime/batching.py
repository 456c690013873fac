"""Smart batching for `encode`: length-sorted padded batches, the truncation report, the final vectors.

Texts are tokenised once, sorted by token length and cut into batches, each
padded only to its longest text, so a batch of short texts does not pay for
a long one (`run_batches`). tf.data's `bucket_by_sequence_length` buckets by
fixed boundaries and reorders the output; `encode` wants the exact longest
length per batch and the input order back, so the plan is written here.
`finish` cuts the vectors to `truncate_dim` and L2-normalises them.

Batches run `defaults.CONCURRENT_BATCHES` at a time from a thread pool (a
TensorFlow graph call releases the GIL): TensorFlow runs each small op of
one batch on one core, and a second batch in flight keeps the other busy.
Every batch is computed as it would be alone; results are written back in
the main thread. On a GPU batches run one at a time: TensorFlow's device
scopes (`with tf.device(...)`) are per thread and would not reach the
pool's threads.
"""

import collections
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from tqdm.auto import tqdm

from sbert_keras.utils.arrays import l2_normalize
from sbert_keras.utils.defaults import CONCURRENT_BATCHES


def finish(pooled, truncate_dim=None, normalize=False):
    """The vectors `encode` returns: `pooled` cut to its first `truncate_dim` dimensions, then L2-normalised.

    Args:
        pooled: float32 array `(n, dim)`.
        truncate_dim: int or None (checked). Keep the first dimensions.
        normalize: bool. L2-normalise each row (in place where possible).
    """
    if truncate_dim is not None and truncate_dim < pooled.shape[1]:
        pooled = np.ascontiguousarray(pooled[:, :truncate_dim])
    if normalize:
        pooled = l2_normalize(pooled, axis=1, out=pooled if pooled.dtype == np.float32 else None)
    return pooled


def report_truncation(encoder, num_truncated, num_texts):
    """Stores `encoder.last_num_truncated` and warns when texts were cut."""
    encoder.last_num_truncated = num_truncated
    if num_truncated:
        warnings.warn(
            f"{num_truncated} of {num_texts} texts were longer than {encoder.sequence_length} "
            "tokens and were truncated (see `encoder.last_num_truncated`).",
            stacklevel=3,
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
