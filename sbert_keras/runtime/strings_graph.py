"""Strings in, vectors out, in one graph call: how a few texts (a query) run.

A query pays per graph call, so tokenising, padding, the forward pass and
the check for changed weights (`FusedWeights.changed`) run as one
`tf.function` (`strings_function`). `StringsFunctions` keeps one concrete
function per forward pass, sequence length (tokenising bakes it in) and
the weights it checks: calling a concrete function skips `tf.function`'s
argument binding (hashing its captures), a cost a short query would
notice.
"""

from sbert_keras.utils.backends import tensorflow as tf


def strings_function(preprocessor, run, changed=None):
    """A `tf.function`: strings -> `(run` of the padded token ids, number truncated, changed).

    Args:
        preprocessor: a `SentenceEncoderPreprocessor`.
        run: callable `(token_ids, padding_mask)` -> tensor, traced into the graph.
        changed: None, or a function returning a boolean tensor (e.g.
            `FusedWeights.changed`), computed in the same graph call.
    """
    pad_id, tokenize = preprocessor.tokenizer.pad_token_id, preprocessor.traced_ragged_token_ids()

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def embed(texts):
        ids, truncated = tokenize(texts)  # one call of the tokenizer's graph, traced once per preprocessor
        token_ids = tf.cast(ids.to_tensor(pad_id), tf.int32)
        mask = tf.sequence_mask(ids.row_lengths(), tf.shape(token_ids)[1], tf.int32)
        stale = tf.constant(False) if changed is None else changed()
        return run(token_ids, mask), tf.reduce_sum(tf.cast(truncated, tf.int32)), stale

    return embed


class StringsFunctions:
    """Concrete `strings_function`s of one preprocessor, one per `(run, sequence length, weights)`.

    Args:
        preprocessor: a `SentenceEncoderPreprocessor`.

    Example:
    ```python
    embed = StringsFunctions(preprocessor).get(run, [weights])
    pooled, num_truncated, changed = embed(tf.constant(["a query"]))
    ```
    """

    def __init__(self, preprocessor):
        self.preprocessor = preprocessor
        self._functions = {}

    def get(self, run, weights=()):
        """The concrete strings function of `run`; `weights` (`FusedWeights`) are checked for changes in it."""
        key = (run, self.preprocessor.sequence_length, *weights)
        if key not in self._functions:
            changed = (lambda: weights[0].changed(others=weights[1:])) if weights else None
            self._functions[key] = strings_function(self.preprocessor, run, changed).get_concrete_function()
        return self._functions[key]

    def built(self, run):
        """Whether a concrete function of `run` is kept (its query graph was built in this process)."""
        return any(key[0] is run for key in self._functions)

    def drop(self, run):
        """Forgets the functions of `run` (a forward pass traced for weights that are gone)."""
        self._functions = {k: f for k, f in self._functions.items() if k[0] is not run}
