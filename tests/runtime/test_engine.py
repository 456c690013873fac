"""The inference engine: fused graph vs the Keras graph, caching, self-check, precisions."""

import logging
import types
import warnings

import keras
import keras_hub
import numpy as np
import pytest

import sbert_keras as sk
from conftest import WORDS
from conftest import large
from conftest import tiny_encoder
from sbert_keras import SentenceEncoder
from sbert_keras import SentenceEncoderPreprocessor
from sbert_keras.compat import keras_hub as keras_hub_reads
from sbert_keras.runtime import fused_graph
from sbert_keras.runtime import fused_support
from sbert_keras.runtime import route_choice
from sbert_keras.runtime.routes import xnnpack
from sbert_keras.runtime.routes.fused import FusedRoute
from sbert_keras.utils import hardware
from sbert_keras.utils.hardware import Host

# "東京 😀" is out of the toy vocabularies (the toy BPE maps it to id -1).
TEXTS = [
    "a man is playing guitar",
    "the cat sleeps on the sofa",
    "a dog",
    "the red car is fast and slow",
    "",
    "東京 😀",
]


def keras_graph(encoder, texts):
    """The functional model's output (fixed-length padding, Keras layers)."""
    return np.asarray(keras_hub.models.TextEmbedder.predict(encoder, np.array(texts), verbose=0))


def min_cosine(a, b):
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return ((a * b).sum(1) / np.maximum(norms, 1e-12)).min()


@pytest.mark.parametrize(
    "pooling, kind",
    [
        *[(pooling, "bert") for pooling in ("mean", "max", "cls")],
        ("mean", "roberta"),
        *[large(pooling, "roberta") for pooling in ("max", "cls")],
    ],
)
def test_fused_graph_matches_the_keras_graph(pooling, kind):
    encoder = tiny_encoder(pooling=pooling, normalize=True, kind=kind)
    assert fused_support.supports(encoder)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = encoder.encode(TEXTS, compute="float32")
    assert not [w for w in caught if "diverges" in str(w.message)]  # the self-check passed
    np.testing.assert_allclose(out, keras_graph(encoder, TEXTS), atol=1e-6)
    assert encoder.engine.check("float32")


def test_encode_follows_assign_fit_and_load_weights(tmp_path):
    encoder = tiny_encoder()
    before = encoder.encode(TEXTS, compute="float32")
    dense = keras_hub_reads.block_parts(encoder.backbone.transformer_layers[0]).intermediate
    dense.kernel.assign(dense.kernel * 3.0)
    after = encoder.encode(TEXTS, compute="float32")
    assert np.abs(after - before).max() > 1e-3
    np.testing.assert_allclose(after, keras_graph(encoder, TEXTS), atol=1e-6)

    model = sk.RegressionSiamese(encoder)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    model.fit((TEXTS[:4], TEXTS[1:5]), np.array([1, 0, 1, 0], "float32"), epochs=1, verbose=0)
    trained = encoder.encode(TEXTS, compute="float32")
    assert np.abs(trained - after).max() > 1e-4
    np.testing.assert_allclose(trained, keras_graph(encoder, TEXTS), atol=1e-6)

    path = str(tmp_path / "before.weights.h5")
    fresh = tiny_encoder(seed=3)
    fresh.save_weights(path)
    encoder.load_weights(path)
    np.testing.assert_allclose(
        encoder.encode(TEXTS, compute="float32"), fresh.encode(TEXTS, compute="float32"), atol=1e-6
    )


def counted_tokenizer_traces(encoder):
    """A list that grows by one each time the tokenizer's graph is traced (`ragged_token_ids` runs in Python)."""
    traces, tokenize = [], encoder.preprocessor.ragged_token_ids
    encoder.preprocessor.ragged_token_ids = lambda texts: traces.append(1) or tokenize(texts)
    return traces


def test_no_retracing_across_batch_sizes_and_lengths():
    encoder = tiny_encoder()
    tokenizer_traces = counted_tokenizer_traces(encoder)
    for texts in (TEXTS, TEXTS[:1], TEXTS * 7, ["a"], ["the cat " * 5]):
        for batch_size in (1, 3, 32):
            encoder.encode(texts, batch_size=batch_size, compute="float32")
    # One trace each of the fused graph (a few texts), its graph of two batches a call, the float32
    # Keras reference and the XLA single-query graph (compiled per padded shape, not retraced).
    assert encoder.engine.verdicts.get("xla", "float32") is True
    assert encoder.engine.trace_count == 4
    # The tokenizer's graph too: traced once, called by the batches and by each query's strings function.
    assert tokenizer_traces == [1]
    encoder.backbone.transformer_layers[1].trainable_weights[0].assign_add(
        np.ones(encoder.backbone.transformer_layers[1].trainable_weights[0].shape, "float32")
    )
    encoder.encode(TEXTS, compute="float32")
    encoder.encode(TEXTS[:1], compute="float32")
    assert encoder.engine.trace_count == 4


def test_bfloat16_path_is_close_to_float32():
    encoder = tiny_encoder(normalize=True)
    exact = encoder.encode(TEXTS, compute="float32")
    low = encoder.encode(TEXTS, compute="bfloat16")
    assert low.dtype == np.float32
    assert min_cosine(low, exact) >= 0.999
    qkv = encoder.engine.fused_weights("bfloat16").values().blocks[0].qkv
    assert qkv.kernel.dtype == "bfloat16"


@pytest.mark.parametrize("kind", ["bert", large("roberta")])
def test_batches_go_two_a_call_each_padded_to_its_own_length(monkeypatch, kind):
    encoder = tiny_encoder(kind=kind)
    calls, grouped = [], encoder.engine.grouped("float32")
    assert encoder.engine.verdicts.get("fused_groups", "float32") is True  # checked on first use

    def recording(*token_ids_and_masks):
        calls.append([ids.shape for ids in token_ids_and_masks[::2]])
        return grouped(*token_ids_and_masks)

    monkeypatch.setattr(encoder.engine, "grouped", lambda compute: recording)
    texts = TEXTS * 3  # 18 texts in batches of 4: five batches, the last of two texts
    out = encoder.encode(texts, batch_size=4, compute="float32")
    np.testing.assert_allclose(out, keras_graph(encoder, texts), atol=1e-6)
    assert [[rows for rows, _ in call] for call in calls] == [[4, 4], [4, 4], [2, 0]]
    assert all(widths[0] >= widths[1] for widths in ([w for _, w in call] for call in calls[:2]))  # longest first
    low = encoder.encode(texts, batch_size=4, compute="bfloat16")
    assert min_cosine(low, keras_graph(encoder, texts)) >= 0.999


def test_a_wrong_graph_of_two_batches_warns_and_batches_go_one_a_call(monkeypatch):
    encoder = tiny_encoder()
    fused_function = encoder.engine.graphs.fused_function

    def wrong(precision, weights=None, groups=1):
        run = fused_function(precision, weights, groups)
        return run if groups == 1 else (lambda *inputs: run(*inputs) * 1.01)

    monkeypatch.setattr(encoder.engine.graphs, "fused_function", wrong)
    with pytest.warns(UserWarning, match=r"graph of two batches a call .* float32 diverges.*one batch a call"):
        out = encoder.encode(TEXTS * 3, batch_size=4, compute="float32")
    np.testing.assert_allclose(out, keras_graph(encoder, TEXTS * 3), atol=1e-6)
    assert encoder.engine.grouped("float32") is None


def test_a_wrong_fused_graph_warns_and_falls_back(monkeypatch):
    encoder = tiny_encoder(normalize=True)
    original = fused_graph.dense
    monkeypatch.setattr(fused_graph, "dense", lambda *args: original(*args) * 1.01)
    with pytest.warns(UserWarning, match=r"float32 diverges.*max \|diff\|"):
        out = encoder.encode(TEXTS, compute="float32")
    np.testing.assert_allclose(out, keras_graph(encoder, TEXTS), atol=1e-6)
    monkeypatch.setattr(fused_graph, "dense", lambda *args: original(*args) * 50.0)
    with pytest.warns(UserWarning, match=r"bfloat16 diverges.*min cosine"):
        low = encoder.encode(TEXTS, compute="bfloat16")
    assert min_cosine(low, keras_graph(encoder, TEXTS)) > 0.99


def test_auto_precision_follows_the_host(on_host):
    assert route_choice.resolve_compute("auto", Host({"avx2", "fma"})) == "float32"
    encoder = tiny_encoder()
    on_host(encoder, cpu_flags={"avx2", "fma"})
    np.testing.assert_allclose(encoder.encode(TEXTS), encoder.encode(TEXTS, compute="float32"), atol=0)
    assert route_choice.resolve_compute(None, Host({"avx512_bf16"})) == "bfloat16"
    assert route_choice.resolve_compute("auto", Host({"amx_bf16"})) == "bfloat16"
    assert route_choice.resolve_compute("auto", Host({"amx_bf16"}, gpu=True)) == "float16"


def test_the_module_functions_answer_for_the_current_host(monkeypatch):
    # Callers outside the engine (the precision vocabulary) ask `hardware` directly.
    monkeypatch.setattr(hardware, "has_gpu", lambda: False)
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx512_bf16", "avx512_vnni"}))
    assert hardware.current_host() == Host({"avx512_bf16", "avx512_vnni"})
    assert hardware.has_bf16() and hardware.has_int8() and hardware.auto_precision() == "bfloat16"


def test_an_avx2_host_runs_batches_through_xnnpack_and_never_picks_bfloat16(on_host, monkeypatch):
    monkeypatch.delenv(xnnpack.DISABLE_ENV)  # off for the rest of the suite (conftest)
    assert Host({"avx2", "fma"}).avx2_only and not Host({"avx2", "fma", "avx512f"}).avx2_only
    encoder = tiny_encoder()
    tokenizer_traces = counted_tokenizer_traces(encoder)
    engine = on_host(encoder, cpu_flags={"avx2", "fma"})
    assert engine.route("auto") == ("xnnpack_float32", "float32")  # it won its race (conftest)
    # Every race won (conftest): a few texts and one through XNNPACK's float32 too.
    assert [engine.select("auto", size)[0].name for size in ("few", "one")] == ["xnnpack_float32"] * 2
    encoder.encode(TEXTS[0]), encoder.encode(TEXTS[:3]), encoder.encode(TEXTS * 7)
    functions = dict(engine.graphs.strings._functions)
    engine.routes["xnnpack_float32"].build("float32").query(TEXTS[:2])  # another runner, as a race builds one
    assert engine.graphs.strings._functions == functions  # its queries' tokenising graph is shared
    assert tokenizer_traces == [1]
    assert engine.route("int8") == ("xnnpack", "int8")  # no VNNI, but XNNPACK's int8 beats oneDNN's dequantized
    # AVX-512 without VNNI or bf16: TensorFlow's graphs.
    engine = on_host(tiny_encoder(), cpu_flags={"avx2", "fma", "avx512f"})
    assert engine.route("auto") == ("fused", "float32")
    assert engine.route("int8")[0] != "xnnpack"  # no VNNI: the oneDNN int8 route (dequantized) serves
    assert engine.verdicts.get("xnnpack", "int8") is None  # never checked


def test_a_gpu_host_picks_float16_and_neither_xnnpack_nor_xla(on_host):
    encoder = tiny_encoder()
    engine = on_host(encoder, cpu_flags={"avx2", "avx512_vnni", "avx512_bf16"}, gpu=True)
    assert engine.route("auto") == ("fused", "float16")
    assert engine.select("auto", "one")[0].name == "fused"
    assert engine.select("int8", "batch")[0].name != "xnnpack"
    assert engine.verdicts.get("xla", "float32") is None
    assert engine.verdicts.get("xnnpack", "int8") is None


@pytest.mark.parametrize(
    ("flags", "runs", "route"),
    [({"avx512_bf16", "avx512f"}, "bfloat16", "fused"), ({"avx2", "fma"}, "float32", "xnnpack_float32")],
)
def test_float16_without_a_gpu_runs_as_what_the_cpu_has_with_one_warning(on_host, monkeypatch, flags, runs, route):
    monkeypatch.delenv(xnnpack.DISABLE_ENV)  # off for the rest of the suite (conftest)
    assert Host(flags).runnable_precision("float16") == runs
    assert Host(flags, gpu=True).runnable_precision("float16") == "float16"
    encoder = tiny_encoder()
    engine = on_host(encoder, cpu_flags=flags)
    with pytest.warns(UserWarning, match=rf"compute='float16' has no fast kernels on a CPU.*runs in {runs} instead"):
        vectors = encoder.encode(TEXTS, compute="float16")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per encoder
        assert engine.route("float16") == (route, runs)
        assert engine.plan("float16") == ("fused", runs)  # the SavedModel: the fused graph
        np.testing.assert_allclose(vectors, encoder.encode(TEXTS, compute=runs), atol=1e-6)


def test_a_few_texts_after_a_single_query_reuse_its_graph(on_host):
    encoder = tiny_encoder()
    engine = on_host(encoder, cpu_flags={"avx512_bf16", "avx512f"})
    encoder.encode(TEXTS[0])  # one text: the XLA single-query runner, whose graph holds the bfloat16 fused graph
    functions = dict(engine.graphs.strings._functions)
    few, _ = engine.query(TEXTS[:3])
    assert engine.graphs.strings._functions == functions  # nothing traced again
    route, precision = engine.select("auto", "few")
    assert (route.name, precision) == ("fused", "bfloat16")
    own, _, _ = route.build(precision).query(TEXTS[:3])  # what the fused route's own runner computes
    np.testing.assert_allclose(few, own, atol=1e-6)


def test_a_failing_route_falls_back_with_one_warning_and_is_not_checked_again(on_host, monkeypatch):
    encoder = tiny_encoder()
    engine = on_host(encoder, cpu_flags={"avx2", "avx512_bf16"})
    calls = []

    def failing(self, precision):
        calls.append(precision)
        warnings.warn("fused graph failed its check", UserWarning, stacklevel=1)
        return False

    monkeypatch.setattr(FusedRoute, "check", failing)
    with pytest.warns(UserWarning, match="failed its check") as caught:
        out = encoder.encode(TEXTS)  # auto: bfloat16 fails, then float32 fails: the Keras graph
        encoder.encode(TEXTS[:1])
        encoder.encode(TEXTS, compute="bfloat16")
    assert len([w for w in caught if "failed its check" in str(w.message)]) == 2  # one per precision
    assert sorted(calls) == ["bfloat16", "float32"]
    assert engine.route("auto") == ("keras", "float32")
    np.testing.assert_allclose(out, keras_graph(encoder, TEXTS), atol=1e-6)


def test_a_query_that_finds_stale_weights_refreshes_them_once():
    encoder = tiny_encoder()
    engine = encoder.engine
    before = encoder.encode(TEXTS[:2], compute="float32")
    runner = engine.runner_for("float32", "few")
    calls = []
    query = runner.query

    def stale_once(texts):
        calls.append(texts)
        pooled, num_truncated, _ = query(texts)
        return pooled, num_truncated, len(calls) == 1  # the first call reports changed weights

    runner.query = stale_once
    refreshed = []
    runner.refresh = lambda: refreshed.append(True)
    np.testing.assert_allclose(encoder.encode(TEXTS[:2], compute="float32"), before, atol=1e-6)
    assert len(calls) == 2 and refreshed == [True]  # one refresh, one retry


def test_other_backbones_use_the_keras_graph():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(WORDS))
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab, lowercase=True)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(vocab),
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=16,
        dropout=0.0,
    )
    preprocessor = SentenceEncoderPreprocessor(tokenizer, sequence_length=16, include_segment_ids=True)
    encoder = SentenceEncoder(backbone, preprocessor)
    assert "BertBackbone" in fused_support.unsupported_reason(encoder)
    for precision in ("float32", "bfloat16", "auto"):
        out = encoder.encode(TEXTS, compute=precision)
        assert np.isfinite(out).all()
    np.testing.assert_allclose(encoder.encode(TEXTS, compute="float32"), keras_graph(encoder, TEXTS), atol=1e-6)


def test_unknown_compute_is_named():
    with pytest.raises(ValueError, match="`compute` must be one of .*'int4'"):
        tiny_encoder().encode(TEXTS, compute="int4")


@pytest.mark.large
def test_keras_quantized_encoder_is_correct(tmp_path):
    encoder = tiny_encoder(normalize=True)
    encoder.quantize("int8")  # before any encode: the tokenizer is not built yet
    out = encoder.encode(TEXTS)
    encoder = tiny_encoder(normalize=True)
    reference = encoder.encode(TEXTS, compute="float32")
    encoder.quantize("int8")
    np.testing.assert_allclose(encoder.encode(TEXTS), out, atol=1e-6)
    # Keras int8 block matmuls and embeddings are read (sbert_keras.runtime.kernels.int8_quantization).
    assert fused_support.unsupported_reason(encoder) is None
    for precision in ("auto", "float32", "bfloat16"):
        out = encoder.encode(TEXTS, compute=precision)
        # Keras' int8 layers quantize activations per tensor, so padding moves
        # the result a little: compare to its fixed-length graph by cosine.
        assert min_cosine(out, keras_graph(encoder, TEXTS)) > 0.999
        assert min_cosine(out, reference) > 0.95
    # predict (auto: the int8 fused graph where the CPU has VNNI) is encode's auto.
    out = encoder.encode(TEXTS)
    np.testing.assert_allclose(encoder.predict(TEXTS), out, atol=1e-6)
    path = str(tmp_path / "int8.keras")
    encoder.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_allclose(restored.encode(TEXTS), out, atol=1e-5)


def test_adapter_reads_every_block_part_and_names_a_moved_one():
    block = tiny_encoder().backbone.transformer_layers[0]
    parts = keras_hub_reads.block_parts(block)
    assert parts.query.kernel.shape[0] == 8 and parts.intermediate.units == 16
    assert isinstance(parts.attention, keras.layers.MultiHeadAttention)
    moved = types.SimpleNamespace(_self_attention_layer=types.SimpleNamespace())
    with pytest.raises(AttributeError, match=r"_query_dense.*0\.32\.0"):
        keras_hub_reads.block_parts(moved)


def test_many_encoders_in_one_process_log_no_retracing_warning():
    # Each encoder traces its own graphs once, from the same code; TensorFlow counted them together.
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("tensorflow")
    logger.addHandler(handler)
    try:
        for seed in range(4):
            encoder = tiny_encoder(seed=seed)
            encoder.encode(["a man is playing guitar"], compute="float32")
            encoder.encode(["a dog runs in the park", "a cat"], compute="float32")
    finally:
        logger.removeHandler(handler)
    assert not [r for r in records if "retracing" in r.getMessage()], [r.getMessage() for r in records]
