"""int8 and float32 inference through TensorFlow Lite's XNNPACK, converted from the fused forward pass.

Why this route: `encode` is matmul-bound, and on two kinds of CPU the fastest
matmuls TensorFlow ships are XNNPACK's, inside its TFLite runtime:

- int8, on a CPU with VNNI/AMX: the TFLite converter's dynamic-range
  quantization of the fused graph (`fused_graph.build_forward`, float32
  weights) stores per-output-channel int8 weights, and XNNPACK quantizes each
  matmul's activations per row at run time (its QD8 kernels, `vpdpbusd` with
  VNNI): every matmul runs in int8, the vectors stay within the int8
  self-check gate of float32, and it runs faster than oneDNN's int8 inside
  TensorFlow (`sbert_keras.runtime.kernels.onednn_int8`), where quantizing
  activations, LayerNorm and attention are separate TensorFlow ops
  (benchmarks/RESULTS.md);
- float32 and int8, on a CPU with AVX2 and FMA but no AVX-512: the same
  graph converted without quantization runs its float32 matmuls in XNNPACK's
  AVX2 kernels with the float32 Keras graph's results (max |diff| 1.3e-6 on
  all-MiniLM-L6-v2), and the quantized one its int8 matmuls (16-bit
  multiply-adds, no VNNI); there, oneDNN has no exact int8 matmul and
  TensorFlow's float32 is slower than both. Under `compute="auto"` float32
  takes a size of request (a batch, a few texts, one) only where it outran
  the fused graph, and for one text the XLA query too, in a race on this
  machine (`races`): a query takes two calls here (tokenise, then the
  interpreter), one through the fused graph, so a small model's query can
  answer sooner there;
- float32 for one text and a few, on a CPU with AVX-512: XNNPACK's
  interpreter has less to do per op than TensorFlow's graph, so for a call
  of few tokens its float32 answers before oneDNN's bf16 fused graph (and
  the XLA query); for many, bf16's matmuls, twice as fast, answer first.
  Where they cross depends on the model and the CPU, and it is a
  function of the call's padded tokens (texts times padded length), not
  of how they are split into texts: all-mpnet-base-v2 crosses between 32
  and 64 tokens, all-MiniLM-L6-v2 between 256 and 512 (benchmarks/RESULTS.md,
  single queries and a few texts on the Zen 5 EPYC). So the route races the
  fused graph it `builds_on` at each of `TOKEN_STEPS` (`token_steps`), once
  per model and machine, and its runner hands a call of more tokens than it
  won at to the fused graph (`xnnpack_runner`). It serves one text and a
  few (`sizes`), in float32 and in the bfloat16 path (`computes`: the
  vector is float32's, as the XLA query's is), only where it won its
  races.

The token embeddings are looked up outside the converted model, in float32
(`signature`): converted, the table would be stored in int8 with one scale.

The converter and the runtime come with TensorFlow (`tf.lite`), so nothing is
added; `ai_edge_litert`'s interpreter, its successor, is used where it is
installed. The converted model is a snapshot of the weights: the engine
converts again when they change (`FusedWeights.version`) and checks the
result against the Keras graph on first use (`self_check.probe_check`).
Converting takes tens of seconds at base size, so the model is kept on disk
for later processes with the same weights (`cold_start.converted_model`).
A SavedModel cannot hold this route (TF Serving runs TensorFlow graphs), and
it holds no int8 at all (`defaults.EXPORT_COMPUTES`). Set
`SBERT_KERAS_NO_XNNPACK=1` to run `encode` through TensorFlow's graphs instead
(int8 through oneDNN).

Example:
```python
encoder.encode(texts, compute="int8")  # through `XnnpackRoute` where the CPU has VNNI/AMX
model = convert(forward_function(encoder, weights), quantize=True)
run = Runner(model, weights.version, weights.values().token_table)
pooled = run(token_ids, padding_mask)  # float32 numpy array
```
"""

import os
import threading
import warnings

import numpy as np

from sbert_keras.runtime import cold_start
from sbert_keras.runtime import fused_graph
from sbert_keras.runtime import self_check
from sbert_keras.runtime.routes import base
from sbert_keras.runtime.routes import xnnpack_runner
from sbert_keras.utils.backends import tensorflow as tf

DISABLE_ENV = "SBERT_KERAS_NO_XNNPACK"
# With AVX-512, the call sizes (padded tokens) at which the float32 route races the fused graph
# (`XnnpackFloat32Route.token_steps`); a call larger than the last runs the fused graph.
TOKEN_STEPS = (32, 64, 128, 256, 512)


def signature(hidden):
    """The input signature of the converted forward: float32 token embeddings `(batch, length, hidden)`, int32 mask.

    The token table stays outside the model (`Runner` looks the ids up):
    the converter would store a gathered constant table in int8 with one
    scale for the whole table (`DEQUANTIZE` before the `GATHER`): a median
    error of 7% per token embedding on all-mpnet-base-v2.

    Args:
        hidden: int. The width of the token embeddings.
    """
    return (
        tf.TensorSpec([None, None, hidden], tf.float32, name="token_embeddings"),
        tf.TensorSpec([None, None], tf.int32, name="padding_mask"),
    )


def forward_function(encoder, weights):
    """The `tf.function` converted for XNNPACK: the fused forward pass from token embeddings (`signature`).

    Args:
        encoder: a `SentenceEncoder` the fused graph supports.
        weights: the float32 `FusedWeights` of its backbone.
    """
    forward = fused_graph.build_forward(encoder, weights, fused_norm=False, lookup=False)
    spec = signature(weights.values().token_table.shape[-1])
    return tf.function(forward, input_signature=spec, autograph=False)  # as `EncoderGraphs.traced` traces it


def available(host, precision="int8"):
    """Whether `encode` may run `precision` through XNNPACK on `host` (no GPU, not disabled).

    int8 where the CPU has VNNI/AMX, or AVX2 and FMA without AVX-512; float32
    where it has AVX2 and FMA (with AVX-512, for one text and a few:
    `XnnpackFloat32Route.sizes`).
    """
    if os.environ.get(DISABLE_ENV, "") not in ("", "0") or host.gpu:
        return False
    return (host.avx2_only or host.int8) if precision == "int8" else host.avx2


def convert(function, quantize=True):
    """The TFLite flatbuffer (bytes) of a traced float32 `function`, its weights int8 when `quantize`.

    Args:
        function: a `tf.function` with a fixed input signature (`forward_function`); the variables it reads
            are frozen into the model.
        quantize: bool. Dynamic-range quantization (int8 weights, float
            activations quantized per row at run time); False keeps float32.
    """
    converter = tf.lite.TFLiteConverter.from_concrete_functions([function.get_concrete_function()], function)
    if quantize:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    return converter.convert()


def make_interpreter(model, threads=None):
    """A TFLite interpreter of `model` (bytes) with XNNPACK on `threads` threads (default: this process's cores)."""
    threads = threads or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        Interpreter = tf.lite.Interpreter
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated")
        return Interpreter(model_content=model, num_threads=threads)


class Runner:
    """`run(token_ids, padding_mask)` -> float32 numpy array, on one TFLite interpreter.

    The ids are looked up in `token_table` here (`signature`), then the
    interpreter runs the rest. Calls from several threads are serialised (an
    interpreter is not thread-safe); each call uses all cores, so `encode`
    runs one at a time. The input is resized only when the batch's shape changes.

    Args:
        model: bytes. A flatbuffer of `forward_function`, from `convert`.
        version: int. The `FusedWeights.version` it was converted from.
        token_table: float32 `(vocabulary, hidden)`: the same weights' token
            embeddings (a variable of `FusedWeights`, read at each call).
        threads: int or None. Threads of the interpreter (default: the
            cores this process may use).
    """

    # Calls in flight at once worth making: one call already uses every core
    # (two at a time were slower).
    max_concurrency = 1

    def __init__(self, model, version, token_table, threads=None):
        self.version = version
        self._table = token_table
        self._interpreter = make_interpreter(model, threads)
        details = self._interpreter.get_input_details()
        self._mask = next(d["index"] for d in details if "padding_mask" in d["name"])
        self._embedded = next(d["index"] for d in details if d["index"] != self._mask)
        self._output = self._interpreter.get_output_details()[0]["index"]
        self._shape = None
        self._lock = threading.Lock()

    def __call__(self, token_ids, padding_mask):
        token_ids = np.asarray(token_ids, "int32")
        padding_mask = np.asarray(padding_mask, "int32")
        embedded = tf.gather(self._table, token_ids).numpy()  # ids come from the tokenizer: in range
        with self._lock:
            interpreter = self._interpreter
            if token_ids.shape != self._shape:
                interpreter.resize_tensor_input(self._embedded, embedded.shape)
                interpreter.resize_tensor_input(self._mask, token_ids.shape)
                interpreter.allocate_tensors()
                self._shape = token_ids.shape
            interpreter.set_tensor(self._embedded, embedded)
            interpreter.set_tensor(self._mask, padding_mask)
            interpreter.invoke()
            return interpreter.get_tensor(self._output).copy()


class XnnpackRoute(base.Route):
    """The fused graph converted to TFLite and run by XNNPACK in `precision`, checked on first use, refreshed.

    The registered routes are its subclasses, one per precision.
    """

    rank = 40
    dequantizes = True  # the fused graph's weights

    def __init__(self, graphs, host):
        super().__init__(graphs, host)
        self.interpreter = None  # the `Runner` of the current float32 weights
        self._hand_offs = {}  # (fused graph, its weights) -> `xnnpack_runner.checked_forward`

    @property
    def precision(self):
        """The compute path its model computes in: the first it serves."""
        return self.computes[0]

    def usable(self):
        return available(self.host, self.precision) and self.graphs.fused_supported()

    def check(self, precision):
        """Converts, then compares the probe batch with the float32 Keras graph; warns and is False on failure."""
        fallback = "oneDNN int8 route" if precision == "int8" else "fused graph"
        try:
            run = self.runner()
        except Exception as error:  # noqa: BLE001 - any converter or runtime failure falls back
            warnings.warn(
                f"TFLite could not convert or run the {precision} graph of {self.encoder.name!r} "
                f"({type(error).__name__}: {str(error)[:300]}); using the {fallback} instead.",
                stacklevel=6,
            )
            return False
        reference = self.graphs.keras_function("float32")
        return self_check.probe_check(self.encoder, reference, run, precision, f"XNNPACK {precision} graph", fallback)

    def runner(self, weights=None):
        """The `Runner` of the current weights (converted again when they change), unchecked.

        Args:
            weights: the float32 `FusedWeights` when the caller has just synced
                them; by default they are synced here.
        """
        weights = weights or self.graphs.fused_weights("float32")
        if self.interpreter is None or self.interpreter.version != weights.version:

            def converted():
                return convert(forward_function(self.encoder, weights), self.precision == "int8")

            self.interpreter = None  # the old interpreter's memory goes before the new one is built
            model = cold_start.converted_model(self.encoder, f"xnnpack-{self.precision}", converted, self.host)
            self.interpreter = Runner(model, weights.version, weights.values().token_table)
        return self.interpreter

    def warm(self, precision, size):
        """Whether its interpreter was built in this process (by its check or a call), so a race builds nothing."""
        return self.interpreter is not None

    def ready(self, precision):
        """Whether its interpreter was built in this process or its converted model is on disk (no conversion)."""
        kind = f"xnnpack-{self.precision}"
        return self.interpreter is not None or cold_start.converted_on_disk(self.encoder, kind, self.host)

    def build(self, precision, max_tokens=None):
        return xnnpack_runner.XnnpackRunner(self, precision, max_tokens)

    def handed_off(self, precision):
        """The `xnnpack_runner.checked_forward` of the fused graph in `precision` over its current weights.

        What a query over its runner's `max_tokens` runs: float32's weights
        were checked by the query's first call, others are checked here.
        """
        weights = self.graphs.current_weights(precision)
        fused = self.graphs.fused_function(precision, weights)
        if (fused, weights) not in self._hand_offs:
            checked = None if precision == "float32" else weights
            self._hand_offs[fused, weights] = xnnpack_runner.checked_forward(fused, checked)
        return self._hand_offs[fused, weights]


@base.register
class XnnpackInt8Route(XnnpackRoute):
    """int8 through XNNPACK's QD8 kernels, on a CPU with VNNI/AMX or an AVX2 CPU without AVX-512.

    Example:
    ```python
    route = XnnpackInt8Route(graphs, host)
    route.usable()  # a CPU with VNNI/AMX (or AVX2 only), no GPU, not disabled
    run = route.build("int8").batch()  # a `Runner`
    ```
    """

    name = "xnnpack"
    computes = ("int8",)


@base.register
class XnnpackFloat32Route(XnnpackRoute):
    """float32 through XNNPACK: every size on an AVX2-only CPU, small calls with AVX-512; where it won.

    Example:
    ```python
    route = XnnpackFloat32Route(graphs, host)
    route.usable()  # a CPU with AVX2 and FMA, no GPU, not disabled
    route.sizes  # every size without AVX-512, ("one", "few") with it
    run = route.build("float32").batch()  # a `Runner`
    ```
    """

    name = "xnnpack_float32"
    check_in = "float32"  # one converted float32 model serves every path it is in
    races = ("xla", "fused")  # each size raced against the routes that serve it (XLA: one text)

    @property
    def sizes(self):
        """Every size on an AVX2-only CPU; with AVX-512, one text and a few (oneDNN's bf16 runs batches)."""
        return base.SIZES if self.host.avx2_only else ("one", "few")

    @property
    def computes(self):
        """float32; where the CPU has bf16 matmuls (so AVX-512), the bfloat16 path's small calls too."""
        return ("float32", "bfloat16") if self.host.bf16 else ("float32",)

    @property
    def builds_on(self):
        """With AVX-512, the fused graph: it runs the calls larger than its races allow, and batches."""
        return None if self.host.avx2_only else "fused"

    @property
    def token_steps(self):
        """With AVX-512, `TOKEN_STEPS`: the call sizes at which it races the fused graph."""
        return () if self.host.avx2_only else TOKEN_STEPS
