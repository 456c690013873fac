"""Byte-pair merges in TensorFlow ops, all occurrences of a word's best pair per step.

KerasHub's `BytePairTokenizer` merges one pair of one word per step of its
loop, on strings, so a word of n bytes takes n steps over the whole word:
n^2 work (a 20,000-letter word holds a request for seconds). Here a word
is a list of integer token ids and each step merges *every* occurrence of
the word's lowest-ranked pair (left to right, so "a a a" gives "aa a"), as
GPT-2's own `encoder.py` does. When every merge ranks after the merges that
build its two parts (true of any trained merge list, and checked by
`merge_table`), this is exactly what Hugging Face's BPE computes: a merge
of rank r only makes pairs that rank after r, so Hugging Face's priority
queue also takes all pairs of rank r, leftmost first, before any other.
The number of steps is the number of distinct merges a word uses, not its
length.

Example:
```python
keys, values = merge_table(vocabulary, merges)
```
"""

import numpy as np

from sbert_keras.utils.backends import tensorflow as tf

NO_MERGE = int(np.iinfo(np.int64).max)


def merge_table(vocabulary, merges, source="merges"):
    """`(pair keys, values)` of the merges: key `a * V + b`, value `rank * V + merged id`.

    Args:
        vocabulary: dict `{token: id}` (ids below `V = len(vocabulary)`).
        merges: list of `"a b"` strings, in rank order.
        source: str. How errors name the merges.

    Raises:
        ValueError: a merge of tokens outside the vocabulary, or one that
            ranks before a merge that builds one of its parts.
    """
    size = len(vocabulary)
    pairs = [m.split(" ") for m in merges if not m.lstrip().startswith("#version:")]
    last_built = {}
    for rank, (a, b) in enumerate(pairs):
        for part in (a, b, a + b):
            if part not in vocabulary:
                raise ValueError(
                    f"{source}: merge '{a} {b}' (rank {rank}) uses {part!r}, which is not in the vocabulary."
                )
        last_built[a + b] = rank
    table = {}
    for rank, (a, b) in enumerate(pairs):
        for part in (a, b):
            if last_built.get(part, -1) > rank:
                raise ValueError(
                    f"{source}: merge '{a} {b}' (rank {rank}) ranks before merge rank {last_built[part]}, which "
                    f"builds {part!r}; such merge lists are not supported."
                )
        # A pair listed twice keeps its last rank, as Hugging Face's BPE (a map filled in order) does.
        table[vocabulary[a] * size + vocabulary[b]] = rank * size + vocabulary[a + b]
    return list(table), list(table.values())


def _step(table, size, ids, row_ids, num_words):
    """One merge step of every word: `(ids, row_ids)` of the words still merging, and those of the finished."""
    count = tf.size(ids, out_type=tf.int64)
    same_word = tf.equal(row_ids[:-1], row_ids[1:])
    found = table.lookup(ids[:-1] * size + ids[1:])
    found = tf.where(same_word & (found >= 0), found, NO_MERGE)
    rank = tf.where(found == NO_MERGE, NO_MERGE, found // size)
    best = tf.math.unsorted_segment_min(rank, row_ids[:-1], num_words)
    done = tf.equal(tf.gather(best, row_ids), NO_MERGE)
    chosen = (rank == tf.gather(best, row_ids[:-1])) & (rank != NO_MERGE)
    # Runs of chosen pairs overlap only for pairs "a a": keep every other one, from the left.
    previous = tf.concat([[False], chosen[:-1]], axis=0)
    run_start = chosen & ~previous
    start_positions = tf.boolean_mask(tf.range(count - 1), run_start)
    run_index = tf.maximum(tf.cumsum(tf.cast(run_start, tf.int64)) - 1, 0)
    offset = tf.range(count - 1) - tf.gather(tf.concat([start_positions, [0]], 0), run_index)
    chosen = chosen & tf.equal(offset % 2, 0)
    merged_ids = tf.concat([tf.where(chosen, found % size, ids[:-1]), ids[-1:]], axis=0)
    keep = ~tf.concat([[False], chosen], axis=0) & ~done
    finished = (tf.boolean_mask(ids, done), tf.boolean_mask(row_ids, done))
    return (tf.boolean_mask(merged_ids, keep), tf.boolean_mask(row_ids, keep)), finished


def merge_words(table, size, words):
    """Byte-pair merges of `words`, a ragged `(num_words, None)` int64 tensor of token ids.

    Each step sets aside the words that no longer merge, so a step costs
    what the words still merging hold.

    Args:
        table: a `tf.lookup.StaticHashTable` from `merge_table`'s keys to its
            values (default -1).
        size: int. The vocabulary size `V`.
        words: `tf.RaggedTensor` of the words' byte token ids.

    Returns:
        a ragged `(num_words, None)` int64 tensor of the merged token ids.
    """
    num_words = words.nrows()
    empty = tf.zeros([0], tf.int64)

    def more(ids, row_ids, done_ids, done_rows):
        return tf.size(ids) > 0

    def step(ids, row_ids, done_ids, done_rows):
        (ids, row_ids), (new_ids, new_rows) = _step(table, size, ids, row_ids, num_words)
        return ids, row_ids, tf.concat([done_ids, new_ids], 0), tf.concat([done_rows, new_rows], 0)

    _, _, ids, row_ids = tf.while_loop(
        more,
        step,
        [words.flat_values, words.value_rowids(), empty, empty],
        shape_invariants=[tf.TensorShape([None])] * 4,
    )
    order = tf.argsort(row_ids, stable=True)
    # Valid by construction: no validation ops (`added_tokens`' module docstring).
    return tf.RaggedTensor.from_value_rowids(
        tf.gather(ids, order), tf.gather(row_ids, order), nrows=num_words, validate=False
    )
