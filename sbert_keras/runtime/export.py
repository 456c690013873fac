"""Export a `SentenceEncoder` as a SavedModel that TF Serving feeds raw text.

`keras.Model.export` would expose the token-id inputs and the generic Keras
graph; TF Serving clients send strings and want `encode`'s speed. So the
graph is assembled here with `keras.export.ExportArchive`:
`serving_default` takes a 1-D string tensor `text` (its rank and UTF-8
are checked in the graph, `checked_request`), tokenises it in the graph,
sorts the request by token length, cuts it into batches (one long text no
longer pads all the others), runs each batch padded to its longest text
(two batches a call where `encode` sends them so) through the same
forward pass as `encode` (the exportable route the
engine picks asks for its forward, `Route.forward`: the self-checked fused
graph, with its weights stored in their cast and fused form, or the Keras
graph), and returns `embeddings` (float32, `(n, dim)`) in request order.
As in `encode`, a prompt (the encoder's default one, or `prompt=`) is
prepended to every text inside the graph and `truncate_dim` cuts (and
re-normalises) the vectors, so a TF Serving client sends the bare texts.
The folder appears only when complete (`atomic_io.write_dir`: written beside
it, then renamed); a full disk leaves nothing and raises
`disk_space.DiskFullError` naming the space needed.

A SavedModel runs float matmuls only (`defaults.EXPORT_COMPUTES`): int8
stays with `encode`, whose XNNPACK route TF Serving cannot run.
"""

import keras

from sbert_keras.model.prompts import check_truncate_dim
from sbert_keras.utils import atomic_io
from sbert_keras.utils import backends
from sbert_keras.utils.backends import tensorflow as tf
from sbert_keras.utils.checks import check_export_compute
from sbert_keras.utils.checks import check_positive_int
from sbert_keras.utils.defaults import CONCURRENT_BATCHES
from sbert_keras.utils.defaults import ENCODE_BATCH_SIZE
from sbert_keras.utils.defaults import ENCODE_COMPUTE

# What a Python client imports before `tf.saved_model.load`, recorded in the export's `complete.json`.
CLIENT_REQUIRES = ("tensorflow", "tensorflow_text")
CLIENT_NOTE = (
    "Run `import tensorflow_text` before `tf.saved_model.load(path)`: the tokenizer inside the graph uses "
    "TensorFlow Text ops (pip install tensorflow-text, the version matching tensorflow)."
)


def sorted_batches(forward, ids, pad_id, batch_size, dim, groups=1):
    """Graph-safe: `forward` over length-sorted batches of ragged `ids`, in input order.

    `defaults.CONCURRENT_BATCHES` calls run at once (the while loop's
    `parallel_iterations`), as in `encode`; with `groups=2` consecutive
    batches go two a call, each padded to its own longest text (an odd
    last one with an empty second batch), as `encode` sends them through
    the fused graph (`batching.run_batches`).

    Args:
        forward: callable `(token_ids, padding_mask)` -> `(batch, dim)`
            float32; with `groups=2`, `(token_ids, padding_mask, token_ids,
            padding_mask)` -> the vectors of both batches, stacked.
        ids: tf.RaggedTensor `(n, None)` of token ids.
        pad_id: int. The padding token id.
        batch_size: int. Rows per batch.
        dim: int. The output width.
        groups: int. Batches per call of `forward`.
    """
    lengths = tf.cast(ids.row_lengths(), tf.int32)
    n = tf.shape(lengths)[0]
    order = tf.argsort(lengths, direction="DESCENDING", stable=True)
    lengths = tf.gather(lengths, order)
    padded = tf.cast(tf.gather(ids, order).to_tensor(pad_id), tf.int32)
    rows = batch_size * groups
    num_calls = (n + rows - 1) // rows

    def body(i, results):
        inputs = []
        for group in range(groups):
            start = tf.minimum(i * rows + group * batch_size, n)
            stop = tf.minimum(start + batch_size, n)
            # Sorted: a batch's first text is its longest; an empty batch is 0 wide.
            width = tf.where(start < n, lengths[tf.minimum(start, n - 1)], 0)
            inputs += [padded[start:stop, :width], tf.sequence_mask(lengths[start:stop], width, tf.int32)]
        return i + 1, results.write(i, forward(*inputs))

    def run():
        results = tf.TensorArray(
            tf.float32, size=num_calls, infer_shape=False, element_shape=tf.TensorShape([None, dim])
        )
        loop = tf.while_loop(lambda i, _: i < num_calls, body, (0, results), parallel_iterations=CONCURRENT_BATCHES)
        results = loop[1]
        return tf.gather(results.concat(), tf.math.invert_permutation(order))

    return tf.cond(n > 0, run, lambda: tf.zeros([0, dim], tf.float32))


def checked_request(text):
    """Graph-safe: the request `text`, checked to be a 1-D tensor of UTF-8 strings.

    TensorFlow enforces neither a signature's declared input shape when it
    is called (a loaded signature function, TF Serving) nor a rank check
    inside the graph once grappler has folded the rank of a declared
    `[None]` input to 1: a `(1, 2)` request would be served as two texts.
    So `serving_default` declares `text` of unknown rank and checks it here.
    Bytes that are not UTF-8, which `encode` refuses, are refused too
    (`tf.strings.unicode_transcode` replaces them, so the text changes).

    Args:
        text: string tensor of any rank.

    Returns:
        `text` with static shape `[None]`; running it raises
        `tf.errors.InvalidArgumentError` naming the bad shape or the first
        bad item.
    """
    rank_ok = tf.debugging.Assert(
        tf.equal(tf.rank(text), 1),
        [tf.strings.format("`text` must be a 1-D string tensor, one text per item; received shape {}", tf.shape(text))],
    )
    with tf.control_dependencies([rank_ok]):
        # Not `tf.ensure_shape`: grappler infers the rank from it and folds the check away.
        text = tf.reshape(text, [-1])
    repaired = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace")
    bad = tf.where(tf.not_equal(repaired, text))[:, 0]
    utf8_ok = tf.debugging.Assert(
        tf.equal(tf.size(bad), 0),
        [tf.strings.format("`text[{}]` is bytes that are not valid UTF-8; send UTF-8 text", tf.reduce_min(bad))],
    )
    with tf.control_dependencies([utf8_ok]):
        return tf.identity(text)


def serving_forward(engine, compute=ENCODE_COMPUTE):
    """`(forward, trackables, route, compute, groups)` for a SavedModel from an `InferenceEngine`.

    The engine picks the route a SavedModel serves (`engine.select(...,
    exportable=True)`, what `engine.plan(compute)` reports); the route gives
    its untraced forward function and the objects holding the variables it
    reads (`Route.forward`). `groups`: batches a call of `forward`, 2 where
    `encode` sends them so (`InferenceEngine.groups_pass`), else 1.
    """
    route, resolved = engine.select(compute, "batch", exportable=True)
    forward, trackables = route.forward(resolved)
    return forward, trackables, route, resolved, 2 if engine.groups_pass(route, resolved) else 1


def saved_model_bytes(endpoint):
    """A lower bound of a SavedModel's size: its endpoint's variables and graph, in bytes.

    The written folder is larger (the saved object graph and functions):
    by 0.1 MB for the 2-layer test encoder, by 2.1 MB for
    all-MiniLM-L6-v2 in float32 and in bfloat16 (measured).

    Args:
        endpoint: the `tf.function` `ExportArchive.add_endpoint` returned.
    """
    concrete = endpoint.get_concrete_function()  # traced once: `write_out` reuses it
    weights = sum(v.shape.num_elements() * v.dtype.size for v in concrete.variables)
    return weights + concrete.graph.as_graph_def().ByteSize()


def _write(archive, endpoint, path, overwrite, marker):
    """Writes the archive to `path` (the one place that touches the disk); `marker` goes to `complete.json`.

    Raises `atomic_io.DiskFullError` (before writing when the estimate does
    not fit) when the disk is full; nothing is left behind.
    """
    needed = saved_model_bytes(endpoint)
    atomic_io.write_dir(lambda work: archive.write_out(work, verbose=False), path, overwrite, marker, needed=needed)


def export_saved_model(
    encoder,
    path,
    overwrite=False,
    compute=ENCODE_COMPUTE,
    batch_size=ENCODE_BATCH_SIZE,
    prompt=None,
    prompt_name=None,
    truncate_dim=None,
    precision=None,
):
    """Writes a SavedModel with a `serving_default(text: string[None])` signature.

    The signature declares `text` with unknown rank and the graph refuses
    a request of another rank, or with bytes that are not UTF-8, with an
    `InvalidArgumentError` naming the shape or the item (`checked_request`).

    The served vectors are `encoder.encode(text, prompt=prompt,
    prompt_name=prompt_name, truncate_dim=truncate_dim)`: the prompt is
    prepended inside the graph (`tf.strings.join`), so clients send the bare
    texts; the vectors are cut to `truncate_dim` and L2-normalised again if
    the encoder normalises. Both are recorded in the folder's
    `complete.json` (`"prompt"`, `"truncate_dim"`), with the compute path the
    graph runs (`"compute"`: what `"auto"` chose) and what a Python client imports before loading
    it (`"client_requires"`, `"client_note"`). One prompt per SavedModel: export the query and the
    document side of an asymmetric model as two models.

    Args:
        encoder: a `SentenceEncoder` with a preprocessor.
        path: str. The output directory (TF Serving wants `.../NAME/VERSION`).
            It appears only once complete, with a `complete.json` marker.
        overwrite: bool. Replace an earlier export in `path` (else refused).
        compute: str. The dtype the served graph's matmuls run in, as in
            `encode`: `"auto"` (default) picks the fastest one that passes
            the self-check on the exporting machine (bfloat16 on CPUs with
            AVX512-BF16/AMX, float16 on a GPU). A bfloat16 SavedModel served
            on a CPU without bf16 instructions is slow: pass `"float32"` to
            export for such servers. Not `"int8"`: int8 stays with `encode`
            (`defaults.EXPORT_COMPUTES`); an encoder quantized by Keras
            exports its Keras graph (Keras' own int8 layers), what
            `encode(compute="float32")` runs for it.
        batch_size: int. Texts per forward pass inside the graph.
        prompt: str or None. A prefix prepended to every request text
            (`""` for none); wins over `prompt_name`.
        prompt_name: str or None. A key of `encoder.prompts`. With neither,
            the encoder's default prompt (`encoder.default_prompt_name`), if any.
        truncate_dim: int or None. Serve the first `truncate_dim`
            dimensions (1 to `encoder.embedding_dim`); `None` for all.
        precision: refused: a SavedModel serves float32 vectors (`encode`'s
            `precision` quantizes them); `compute` names the matmuls' dtype.

    Returns:
        `path`.

    Raises:
        sbert_keras.utils.backends.TensorFlowRequired: TensorFlow is not
            installed or not Keras' backend (load the `.keras` file under
            TensorFlow to export a model trained on JAX or PyTorch).
        ValueError: no preprocessor; `compute="int8"` or an unknown word; an
            unknown `prompt_name`; `truncate_dim` out of range.
        TypeError: `precision=` (what `encode` returns), naming `compute`.
        sbert_keras.utils.disk_space.DiskFullError: not enough disk space (checked
            before writing against an estimate, and during the write);
            nothing is left behind.

    Example:
    ```python
    export_saved_model(encoder, "serving/sbert/1", compute="float32")
    export_saved_model(encoder, "serving/query/1", prompt_name="query", truncate_dim=256)
    # saved_model_cli show --dir serving/sbert/1 --tag_set serve \\
    #     --signature_def serving_default
    # REST: POST /v1/models/sbert:predict  {"instances": ["a text", ...]}
    ```
    """
    backends.require_tensorflow("export_saved_model")
    if precision is not None:
        raise TypeError(
            f"export_saved_model() serves float32 vectors and takes no `precision` (received {precision!r}); "
            "the matmuls' dtype is `compute`, and encode(precision=...) quantizes stored vectors."
        )
    compute = check_export_compute(compute)
    atomic_io.prepare_dir(path, overwrite, flag="path")  # before the tracing work
    if encoder.preprocessor is None:
        raise ValueError("The encoder has no preprocessor; strings cannot be served.")
    batch_size = check_positive_int(batch_size, "batch_size")
    prompt = encoder.resolve_prompt(prompt, prompt_name) or ""
    truncate_dim = check_truncate_dim(truncate_dim, encoder.embedding_dim)
    preprocessor = encoder.preprocessor
    forward, trackables, _, resolved, groups = serving_forward(encoder.engine, compute)
    pad_id = preprocessor.tokenizer.pad_token_id
    dim, normalize = encoder.embedding_dim, encoder.normalize

    def serve(text):
        text = checked_request(text)
        if prompt:
            text = tf.strings.join([prompt, text])
        ids, _ = preprocessor.ragged_token_ids(text)
        embeddings = sorted_batches(forward, ids, pad_id, batch_size, dim, groups)
        if truncate_dim is not None:
            embeddings = embeddings[:, :truncate_dim]
        if normalize:
            norms = tf.norm(embeddings, axis=1, keepdims=True)
            embeddings = embeddings / tf.maximum(norms, 1e-12)
        return {"embeddings": embeddings}

    archive = keras.export.ExportArchive()
    for trackable in [*trackables, preprocessor]:
        archive.track(trackable)
    endpoint = archive.add_endpoint(
        name="serving_default",
        fn=serve,
        input_signature=[tf.TensorSpec(None, tf.string, name="text")],  # rank: `checked_request`
    )
    marker = {"command": "export", "compute": resolved, "prompt": prompt, "truncate_dim": truncate_dim}
    marker.update(client_requires=list(CLIENT_REQUIRES), client_note=CLIENT_NOTE)
    _write(archive, endpoint, path, overwrite, marker)
    return path
