"""How the XNNPACK routes answer: a query in two calls, and what they hand to the fused graph.

An XNNPACK query is tokenised, padded and checked for weights written
behind Keras' back in one TensorFlow graph call (the strings graph
`padded_ids`), then run by the TFLite interpreter. Where the float32 route
`builds_on` the fused graph (a CPU with AVX-512), a call of more padded
tokens than its races allow (`Races.token_bound`) runs the fused
graph instead: on the ids the first call padded, in a second call that
checks that graph's weights too (`checked_forward`), or at once, without
the first call, where the words alone show the call too large
(`fewest_tokens`). Deciding inside one graph call (`tf.cond`, as the XLA
query does) made every single query pay for the branch it did not take
(benchmarks/HISTORY.md), so the decision is made here, between calls.

Example:
```python
runner = XnnpackRunner(route, "bfloat16", max_tokens=256)  # `RouteChoice.build` gives its `token_bound`
pooled, num_truncated, changed = runner.query(["a text", "another"])
```
"""

from sbert_keras.runtime.routes import base
from sbert_keras.utils.backends import tensorflow as tf


def padded_ids(token_ids, padding_mask):
    """What an XNNPACK query's strings function returns: the padded ids and mask, stacked (one tensor)."""
    return tf.stack([token_ids, padding_mask])


def checked_forward(fused, weights=None):
    """A concrete function: padded ids -> `(fused(ids) as float32, whether `weights` changed)`, one graph call.

    Args:
        fused: a traced fused graph.
        weights: the `FusedWeights` it reads, checked for writes behind Keras' back in the same call
            (`FusedWeights.changed`), or None when the query's first call checked them already.
    """
    spec = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[spec, spec], autograph=False)
    def forward(token_ids, padding_mask):
        changed = tf.constant(False) if weights is None else weights.changed()
        return tf.cast(fused(token_ids, padding_mask), tf.float32), changed

    return forward.get_concrete_function()


def fewest_tokens(texts, sequence_length):
    """A lower bound of the padded tokens of `texts`, without tokenising them.

    Each whitespace-separated word gives at least one token (WordPiece,
    byte-level BPE and SentencePiece alike), and the preprocessor adds a
    start and an end token. A word its normaliser drops entirely (control
    characters alone) makes the bound too high, which only sends a call to
    the fused graph that the interpreter could have taken.
    """
    return len(texts) * min(2 + max(len(text.split()) for text in texts), sequence_length)


class XnnpackRunner(base.Runner):
    """Queries in two calls (one graph tokenises, pads and checks the weights; one interpreter call); batches.

    Where the route `builds_on` the fused graph (a CPU with AVX-512), its
    batches run that graph in `precision`, and so does a query of more than
    `max_tokens` padded tokens: in one call of its own where the words
    alone show it (`fewest_tokens`), else on the ids the first call padded
    (`XnnpackRoute.handed_off`, which checks that graph's weights too).

    Args:
        route: the `XnnpackRoute` it runs.
        precision: the compute path it serves.
        max_tokens: int, a callable returning one, or None. Where the route
            builds on the fused graph, the most padded tokens (texts times
            padded length) of a query it runs itself; a callable is asked at
            each query (`Races.token_bound`, which a later race may
            move); None: every query.
    """

    def __init__(self, route, precision, max_tokens=None):
        self.route, self.precision, self.bound = route, precision, max_tokens
        self.fused = None if max_tokens is None else base.fused_runner(route.graphs, precision)

    @property
    def max_tokens(self):
        """The most padded tokens of a query it runs itself (None: every query)."""
        return self.bound() if callable(self.bound) else self.bound

    def query(self, texts):
        graphs = self.route.graphs
        length = self.route.encoder.preprocessor.sequence_length
        max_tokens = self.max_tokens
        if self.fused is not None and fewest_tokens(texts, length) > max_tokens:
            return self.fused.query(texts)  # one graph call: the fused graph's own query
        weights = graphs.current_weights("float32")  # made by the check; the fused graph's only if handed off
        padded, num_truncated, changed = graphs.strings.get(padded_ids, (weights,))(tf.constant(texts))
        if bool(changed):
            return None, int(num_truncated), True
        token_ids, mask = padded.numpy()
        if self.fused is None or token_ids.size <= max_tokens:
            return self.route.runner(weights)(token_ids, mask), int(num_truncated), False
        pooled, changed = self.route.handed_off(self.precision)(tf.constant(token_ids), tf.constant(mask))
        return pooled.numpy(), int(num_truncated), bool(changed)

    def batch(self):
        return self.route.graphs.fused_function(self.precision) if self.route.builds_on else self.route.runner()

    def refresh(self):
        """Syncs float32's weights, and the fused graph's where a query may hand off (either call finds them stale)."""
        paths = ["float32"] + ([self.precision] if self.fused is not None else [])
        for path in dict.fromkeys(paths):
            self.route.graphs.fused_weights(path, force=True)
