"""Inference on a `SentenceEncoder`: `encode`, `similarity`, `predict` and `__call__` on raw strings.

`EncodingMixin` is the part of `SentenceEncoder` that hands inference to
its `sbert_keras.runtime.engine.InferenceEngine`. Its bases: `EngineMixin`
creates that engine on first use and keeps it in step with the weights
(`load_weights`, `quantize`; the writes of the backbone's variables are
counted from the moment the encoder is built, `runtime.weight_writes`);
`RawTextMixin` sends text given to `predict` or `encoder(...)` to `encode`;
`SimilarityMixin` scores embeddings as sentence-transformers'
`model.similarity` does. `encode` also takes sentence-transformers' keyword
names (`resolve_aliases`), so code written for it runs unchanged.
The model itself (graph, config, `from_preset`) stays in `sbert_keras.encoder`.

`encode` reads top to bottom: the texts are checked and the prompt
prepended here; the engine selects a runner and runs it (one call for a
few texts, length-sorted batches otherwise); the truncation is reported and
the vectors cut to `truncate_dim` and normalised (`runtime.batching.finish`),
then quantized when `precision` asks for it
(`retrieval.quantization.quantize_embeddings`, as sentence-transformers).
`compute` picks how the matmuls run; `precision` what comes back.
"""

import inspect

import keras
import numpy as np

from sbert_keras.compat.keras import flatten_layers
from sbert_keras.model.preprocessor import check_texts
from sbert_keras.model.preprocessor import is_raw_text
from sbert_keras.model.preprocessor import is_single_text
from sbert_keras.model.prompts import check_truncate_dim
from sbert_keras.retrieval.quantization import check_precision
from sbert_keras.retrieval.quantization import quantize_embeddings
from sbert_keras.retrieval.scores import as_matrix
from sbert_keras.retrieval.scores import normalize as normalize_rows
from sbert_keras.retrieval.scores import similarity_matrix
from sbert_keras.runtime import batching
from sbert_keras.runtime import self_check
from sbert_keras.runtime import weight_writes
from sbert_keras.runtime.engine import InferenceEngine
from sbert_keras.runtime.host_engine import HostEngine
from sbert_keras.utils import backends
from sbert_keras.utils.checks import check_positive_int
from sbert_keras.utils.defaults import ENCODE_BATCH_SIZE
from sbert_keras.utils.defaults import ENCODE_COMPUTE
from sbert_keras.utils.defaults import ENCODE_PRECISION


class RawTextMixin:
    """`predict` and `__call__` of `SentenceEncoder`: text goes to `encode`, token ids to Keras.

    Example:
    ```python
    encoder.predict(["A man is playing a guitar."])  # encoder.encode(...)'s vectors
    encoder("A man is playing a guitar.")  # a (dim,) float32 tensor
    ```
    """

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None, **kwargs):
        """Keras `predict`; raw strings go through `encode`'s engine.

        Text (see `is_raw_text`) returns what `encode(x, batch_size=batch_size
        or 32)` returns with the model's `normalize` setting: length-sorted
        batches, each padded to its longest text; one string gives a `(dim,)`
        vector, `[]` a `(0, dim)` array, and input `encode` refuses (a `None`
        or non-string item, 2-D or ragged input, bytes that are not UTF-8)
        raises `encode`'s error naming the item. A dict of token-id tensors
        runs Keras' `predict` on the functional graph (no preprocessor); a
        `tf.data.Dataset` runs KerasHub's `Task.predict`.

        Args:
            x: text (as `encode` takes it), a dict of token ids, or a dataset.
            batch_size: int or None. Texts per padded batch (32 when None).
            verbose: `"auto"`, 0 or 1. For text: a progress bar when truthy
                (`"auto"`: as `encode` decides).
            steps: int or None. Keras' `steps` (token ids and datasets only).
            callbacks: list or None. Keras callbacks (token ids and datasets only).
            **kwargs: passed on to Keras' `predict`.
        """
        if is_raw_text(x):
            show_progress = None if verbose == "auto" else bool(verbose)
            return self.encode(x, batch_size=batch_size or 32, show_progress=show_progress)
        if isinstance(x, dict):  # already token ids: skip the preprocessor
            return keras.Model.predict(
                self, x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks, **kwargs
            )
        return super().predict(x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks, **kwargs)

    def __call__(self, *args, **kwargs):
        """Calls the model; text is encoded by the engine, as `encode` does (a float32 tensor).

        Args:
            *args: the inputs first: text (a string gives `(dim,)`, a list
                `(n, dim)`, `[]` `(0, dim)`; see `is_raw_text`), or token ids
                for the Keras graph.
            **kwargs: Keras call arguments (ignored for text).
        """
        if args and is_raw_text(args[0]):
            return keras.ops.convert_to_tensor(self.encode(args[0], show_progress=False))
        return super().__call__(*args, **kwargs)


class SimilarityMixin:
    """`similarity` and `similarity_pairwise`, as sentence-transformers' `model.similarity(a, b)`.

    Example:
    ```python
    scores = encoder.similarity(encoder.encode(["a cat"]), encoder.encode(["a dog", "a car"]))  # (1, 2)
    ```
    """

    def _embeddings(self, x, name):
        return self.encode(x, show_progress=False) if is_raw_text(x) else as_matrix(x, name)

    def similarity(self, a, b):
        """Cosine similarity of every row of `a` with every row of `b`, in float32.

        Args:
            a: embeddings `(n, dim)` (a 1-D vector is one row), or texts,
                which are encoded first.
            b: embeddings `(m, dim)`, or texts.

        Returns:
            A float32 NumPy array `(n, m)` (`sbert_keras.similarity_matrix`).
        """
        return similarity_matrix(self._embeddings(a, "a"), self._embeddings(b, "b"))

    def similarity_pairwise(self, a, b):
        """Cosine similarity of row `i` of `a` with row `i` of `b`, in float32: shape `(n,)`.

        Args:
            a: embeddings `(n, dim)`, or texts.
            b: embeddings `(n, dim)`, or texts.
        """
        a, b = normalize_rows(self._embeddings(a, "a")), normalize_rows(self._embeddings(b, "b"))
        if a.shape != b.shape:
            raise ValueError(f"`a` and `b` must have the same shape. Received {a.shape} and {b.shape}.")
        return np.sum(a * b, axis=1, dtype=np.float32)


class EngineMixin:
    """The inference engine of `SentenceEncoder`, kept in step with its weights (`load_weights`, `quantize`)."""

    @property
    def engine(self):
        """This encoder's `sbert_keras.runtime.engine.InferenceEngine` (created on first use)."""
        cache = self._inference_cache
        if getattr(cache, "engine", None) is None:
            cache.engine = InferenceEngine(self) if backends.uses_tensorflow() else HostEngine(self)
        return cache.engine

    def _count_weight_writes(self):
        """Hooks the writes of the backbone's own variables (`runtime.weight_writes`; TensorFlow only).

        Called when the encoder is built, so a training graph traced later
        counts its steps, and after `quantize` (new variables).
        """
        if backends.uses_tensorflow():
            weight_writes.install(self.backbone.weights)

    def project(self, pooled):
        """Applies the `projections` (float32 `Dense` layers) to pooled vectors.

        The identity when there are none. The model's graph and the fast
        inference path both call it after pooling, so `encode` and the Keras
        graph agree.

        Args:
            pooled: float tensor `(batch, hidden)` (symbolic or eager).

        Returns:
            float32 tensor `(batch, embedding_dim)`.
        """
        for layer in self.projections:
            pooled = layer(pooled)
        return pooled

    def warmup(self, compute=ENCODE_COMPUTE, verbose=True):
        """Runs the first-use self-checks and compilations of the `compute` path now; returns the seconds taken.

        For a server: call it at start-up so that the first request runs at
        full speed. Verdicts and XLA graphs are also cached on disk
        (`sbert_keras.runtime.cold_start`), so a second process with the same model
        warms up faster.

        Args:
            compute: str. As in `encode`.
            verbose: bool. Write a status line on stderr.

        Example:
        ```python
        seconds = encoder.warmup()  # then encoder.encode("query") is fast
        ```
        """
        return self.engine.warmup(compute, verbose)

    def load_weights(self, *args, **kwargs):
        result = super().load_weights(*args, **kwargs)
        self.engine.invalidate()
        return result

    def quantize(self, mode=None, config=None, filters=None, **kwargs):
        """Keras' `Model.quantize` (e.g. `"int8"`), checked against the float weights, then a fresh inference engine.

        The preprocessor's layers are skipped (they hold no weights, and Keras
        refuses to quantize an unbuilt tokenizer layer), and so are layers with
        no quantized form (normalisation, pooling), which Keras would warn
        about one by one. `filters` as in Keras. The Keras graph's vectors of
        the self-check's probe sentences are compared before and after
        (`runtime.self_check.QuantizationCheck`): under int8's gate (a min
        cosine of 0.99), one warning says so. The result is also in
        `self.quantization_passed`.

        Args:
            mode: str. Keras' quantization mode (`"int8"`, `"float8"`, `"int4"`, ...).
            config: a Keras quantization config, or None.
            filters: None, a callable `layer -> bool`, or Keras' regex filters.
            **kwargs: passed to Keras' `Model.quantize`.

        Example:
        ```python
        encoder.quantize("int8")
        encoder.quantization_passed  # True: within 0.99 min cosine of the float model
        ```
        """
        skip = set()
        if self.preprocessor is not None:
            skip = {id(layer) for layer in flatten_layers(self.preprocessor)}
        if filters is None or callable(filters):
            user_filter = filters

            def filters(layer):
                quantizable = type(layer).quantize is not keras.layers.Layer.quantize
                return quantizable and id(layer) not in skip and (user_filter is None or user_filter(layer))

        check = self_check.QuantizationCheck(self)
        super().quantize(mode, config=config, filters=filters, **kwargs)
        self._inference_cache.engine = None
        self._count_weight_writes()
        self.quantization_passed = check.passes(mode)


class EncodingMixin(RawTextMixin, SimilarityMixin, EngineMixin):
    """`encode` and the inference overrides of `SentenceEncoder` (a Keras `Model`).

    Example:
    ```python
    encoder = SentenceEncoder.from_preset("path/to/all-MiniLM-L6-v2")
    encoder.encode(["A man is playing a guitar."]).shape  # (1, 384)
    encoder.predict(["A man is playing a guitar."])  # the same vectors
    ```
    """

    def encode(
        self,
        texts,
        batch_size=ENCODE_BATCH_SIZE,
        normalize=None,
        show_progress=None,
        precision=ENCODE_PRECISION,
        compute=ENCODE_COMPUTE,
        prompt=None,
        prompt_name=None,
        truncate_dim=None,
        **aliases,
    ):
        """Embeds texts with smart batching; returns float32 `(n, dim)` (or quantized: `precision`).

        Texts are tokenised once, sorted by token length, batched and padded
        only to each batch's longest text, run through one traced function
        with dynamic shapes (RoBERTa/BERT-layout backbones use the fused,
        self-checked graph of `sbert_keras.runtime.fused_graph`), and put back in their
        original order. Texts longer than `sequence_length` are truncated;
        their count is warned about and kept in `self.last_num_truncated`.

        Args:
            texts: a string, a list or tuple of strings, a 1-D numpy array
                of `str`/`bytes` or a 1-D string tensor (bytes are UTF-8). A
                single string (or a 0-d string array or tensor) returns a
                `(dim,)` vector; an empty list returns `(0, dim)`.
            batch_size: int. Texts per batch, each padded to its longest text (the fused graph takes two a call).
            normalize: bool or None. `True` L2-normalises, `False` returns the
                pooled vectors unnormalised, `None` keeps the model's setting.
            show_progress: bool or None. Show a progress bar; `None` shows it
                for more than 8 batches.
            precision: str. What comes back, as in sentence-transformers:
                `"float32"` (default), or the float32 vectors quantized by
                `sbert_keras.quantize_embeddings` after normalising and
                `truncate_dim`: `"int8"` / `"uint8"` (`(n, dim)`, buckets
                from these texts' own per-dimension ranges: a warning below
                100 texts, an error for one text; quantize with
                `calibration_embeddings` yourself for stable buckets) or
                `"binary"` / `"ubinary"` (one bit per dimension packed into
                int8 / uint8 `(n, ceil(dim / 8))`). `None` is `"float32"`.
            compute: str. The dtype the matmuls run in (unrelated to
                `precision`): `"auto"` (default: bfloat16 on CPUs with
                AVX512-BF16/AMX, float16 on a GPU, else float32; always the
                fastest that passes the self-check), `"float32"` (exact,
                whatever the training policy), `"bfloat16"` or `"float16"`
                (low-precision matmuls, float32 elsewhere; `"float16"` without
                a GPU runs as bfloat16, or float32 on CPUs without
                AVX512-BF16/AMX, with one warning), or `"int8"` (int8 matmuls
                with float32 output vectors).
            prompt: str or None. A prefix prepended to every text (e.g.
                `"query: "`); `""` for none. Wins over `prompt_name`.
            prompt_name: str or None. A key of `encoder.prompts`. With
                neither, the encoder's `default_prompt_name` prompt, if any
                (see `sbert_keras.model.prompts`; `encode_query` and
                `encode_document` pick the query / document prompt).
            truncate_dim: int or None. Keep the first `truncate_dim`
                dimensions (for Matryoshka-trained models), then L2-normalise
                again if normalising; `None` keeps them all.
            **aliases: sentence-transformers' names, for code written for it:
                `show_progress_bar` (`show_progress`), `normalize_embeddings`
                (`normalize`), `convert_to_tensor=True` or
                `convert_to_numpy=False` (a tensor of Keras' backend, of the
                output's dtype, instead of a NumPy array).

        Raises:
            ValueError / TypeError: an unknown `precision` or `compute` (a
                compute word given as `precision`, e.g. `"bfloat16"`, names
                `compute=`); an item is `None`, not a string, or bytes
                that are not UTF-8, or `texts` is 2-D or ragged; the message
                names the item's position and type. An unknown `prompt_name` (the
                known ones are listed); `truncate_dim` not in
                `[1, embedding_dim]`. An unknown keyword (TypeError listing
                the accepted ones), or an alias that contradicts its own name.

        Example:
        ```python
        encoder.encode(["A man is playing a guitar."], compute="float32").shape  # (1, dim)
        encoder.encode(["A man is playing a guitar."], precision="ubinary").dtype  # uint8, (1, ceil(dim / 8))
        encoder.encode(["A man is playing a guitar."], normalize_embeddings=True, show_progress_bar=False)
        encoder.encode(["A man is playing a guitar."], prompt="query: ", truncate_dim=64).shape  # (1, 64)
        ```
        """
        normalize, show_progress, as_tensor = resolve_aliases(aliases, normalize, show_progress)
        precision = check_precision(precision, compute_hint=True)
        if is_single_text(texts) and not isinstance(texts, str):
            texts = check_texts(texts)[0]  # a str, so that one vector comes back
        prompt = self.resolve_prompt(prompt, prompt_name)
        truncate_dim = check_truncate_dim(truncate_dim, self.embedding_dim)
        single = isinstance(texts, (str, bytes))
        batch_size = check_positive_int(batch_size, "batch_size")
        texts = check_texts(texts)
        if prompt:
            texts = [prompt + text for text in texts]
        pooled, num_truncated = self.engine.encode(texts, batch_size, show_progress, compute)
        if texts:
            batching.report_truncation(self, num_truncated, len(texts))
        out = batching.finish(pooled, truncate_dim, self.normalize if normalize is None else normalize)
        out = quantize_embeddings(out, precision) if precision != "float32" else out
        out = out[0] if single else out
        return keras.ops.convert_to_tensor(out) if as_tensor else out


# sentence-transformers' names of `encode`'s arguments -> ours.
ST_ALIASES = {"show_progress_bar": "show_progress", "normalize_embeddings": "normalize"}
OUTPUT_KEYWORDS = ("convert_to_numpy", "convert_to_tensor")


def resolve_aliases(aliases, normalize, show_progress):
    """`(normalize, show_progress, as_tensor)` from `encode`'s keywords and sentence-transformers' aliases.

    Args:
        aliases: dict. The keywords `encode` took beyond its own.
        normalize: bool or None. `encode`'s `normalize`.
        show_progress: bool or None. `encode`'s `show_progress`.

    Raises:
        TypeError: a keyword that is neither `encode`'s nor an alias; the
            message lists the accepted ones.
        ValueError: an alias and its own name both given, with different values.
    """
    unknown = sorted(set(aliases) - set(ST_ALIASES) - set(OUTPUT_KEYWORDS))
    if unknown:
        own = [name for name in inspect.signature(EncodingMixin.encode).parameters if name not in ("self", "aliases")]
        raise TypeError(
            f"encode() got an unexpected keyword argument {unknown[0]!r}. It accepts {', '.join(own)}, "
            f"and sentence-transformers' {', '.join([*ST_ALIASES, *OUTPUT_KEYWORDS])}."
        )
    values = {"normalize": normalize, "show_progress": show_progress}
    for alias, name in ST_ALIASES.items():
        if alias in aliases:
            if values[name] is not None and values[name] != aliases[alias]:
                raise ValueError(f"encode() got {name}={values[name]!r} and {alias}={aliases[alias]!r}; give one.")
            values[name] = aliases[alias]
    as_tensor = bool(aliases.get("convert_to_tensor", False)) or not aliases.get("convert_to_numpy", True)
    return values["normalize"], values["show_progress"], as_tensor
