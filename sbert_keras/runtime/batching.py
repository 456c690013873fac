"""Smart batching for `encode`: length-sorted padded batches, the truncation report, the final vectors.

Texts are tokenised once, sorted by token length and cut into batches, each
padded only to its longest text, so a batch of short texts does not pay for
a long one (`run_batches`). tf.data's `bucket_by_sequence_length` buckets by
fixed boundaries and reorders the output; `encode` wants the exact longest
length per batch and the input order back, so the plan is written here.
`finish` cuts the vectors to `truncate_dim` and L2-normalises them.

Batches run `defaults.CONCURRENT_BATCHES` calls at a time from a thread
pool (a TensorFlow graph call releases the GIL): TensorFlow runs each small
op of one call on one core, and a second call in flight keeps the other
busy. Where the engine has a graph of two batches a call (`grouped`, the
fused graph's), consecutive batches go two a call, each padded to its own
longest text: their rows share each matmul, which a small model's batch
of short texts leaves short of rows. Every batch is computed as it would
be alone; results are written back in the main thread. On a GPU batches
run one at a time: TensorFlow's device scopes (`with tf.device(...)`) are
per thread and would not reach the pool's threads.
"""

import collections
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from tqdm.auto import tqdm

from sbert_keras.model.host_tokenizer import pad_rows
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


def lengths_and_matrix(ids, pad_id):
    """`(lengths (n,), token ids (n, longest) int32 padded with pad_id)` of ragged ids or a list of 1-D rows."""
    if isinstance(ids, list):
        return np.array([len(row) for row in ids], "int64"), pad_rows(ids, pad_id)
    return ids.row_lengths().numpy(), ids.to_tensor(pad_id).numpy().astype("int32", copy=False)


def run_batches(
    run, ids, pad_id, batch_size, out, show_progress=False, concurrency=CONCURRENT_BATCHES, width=None, grouped=None
):
    """Writes `run` of `ids` into `out`, in length-sorted padded batches.

    Args:
        run: callable `(token_ids, padding_mask)` -> `(batch, dim)` tensor or
            array, safe to call from several threads (a traced `tf.function`,
            an `xnnpack.Runner`).
        ids: tf.RaggedTensor `(n, None)` of token ids, or a list of 1-D
            int32 arrays (the host tokenizer's rows).
        pad_id: int. The padding token id.
        batch_size: int. Texts per padded batch (one call of `run`).
        out: float32 array `(n, dim)`, filled in the original order.
        show_progress: bool. Show a tqdm progress bar.
        concurrency: int. Calls of `run` in flight at once.
        width: callable `longest -> padded length` or None (pad to the
            longest text of each batch). A compiler that specialises on
            shapes (XLA under JAX) sees few lengths when it rounds up.
        grouped: callable `(token_ids, padding_mask, token_ids, padding_mask)`
            -> the vectors of both batches, stacked, or None. Consecutive
            batches go through it two a call (an odd last one with an empty
            second batch, so `run` is not traced for it).
    """
    lengths, flat = lengths_and_matrix(ids, pad_id)
    if width is not None and len(lengths):
        flat = np.pad(flat, ((0, 0), (0, max(0, width(int(lengths.max())) - flat.shape[1]))), constant_values=pad_id)
    order = np.argsort(-lengths, kind="stable")
    progress = tqdm(total=len(lengths), desc="encode", unit="text") if show_progress else None

    def call(*token_ids_and_masks):
        return np.asarray((run if len(token_ids_and_masks) == 2 else grouped)(*token_ids_and_masks))

    def collect(index, future):
        out[index] = future.result()
        if progress is not None:
            progress.update(len(index))

    def batch(start):
        index = order[start : start + batch_size]
        longest = int(lengths[index].max())
        columns = longest if width is None else width(longest)
        return index, flat[index, :columns], (np.arange(columns)[None, :] < lengths[index, None]).astype("int32")

    step = batch_size * (1 if grouped is None else 2)
    empty = np.zeros((0, 0), "int32")
    pending = collections.deque()
    with ThreadPoolExecutor(max(1, concurrency), thread_name_prefix="encode") as pool:
        for start in range(0, len(lengths), step):
            if grouped is None:
                index, token_ids, mask = batch(start)
                pending.append((index, pool.submit(call, token_ids, mask)))
            else:
                first = batch(start)
                second = batch(start + batch_size) if start + batch_size < len(lengths) else (order[:0], empty, empty)
                index = np.concatenate([first[0], second[0]])
                pending.append((index, pool.submit(call, *first[1:], *second[1:])))
            if len(pending) >= concurrency:
                collect(*pending.popleft())
        while pending:
            collect(*pending.popleft())
    if progress is not None:
        progress.close()
