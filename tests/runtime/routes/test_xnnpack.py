"""Tests of `sbert_keras.runtime.routes.xnnpack`: int8 and float32 `encode` through TFLite's XNNPACK.

XNNPACK computes the same int8 arithmetic on any x86-64 CPU (VNNI only makes
it faster), and the same float32 results with or without AVX-512, so the
routes are tested on every machine on a `Host` that reports VNNI, or AVX2 only.
"""

import contextlib
import io
import re
import threading
import types
import warnings

import keras_hub
import numpy as np
import pytest

from conftest import tiny_encoder
from sbert_keras.runtime import cold_start
from sbert_keras.runtime import route_choice
from sbert_keras.runtime import self_check
from sbert_keras.runtime.routes import xnnpack
from sbert_keras.runtime.routes import xnnpack_runner
from sbert_keras.utils.backends import tensorflow as tf

TEXTS = ["a man is playing a guitar", "a cat", "a woman eats food in the kitchen", "red car fast", "the dog runs"]


VNNI = frozenset({"avx2", "avx512_vnni"})
AVX2 = frozenset({"avx2", "fma"})
AVX512_BF16 = AVX2 | {"avx512f", "avx512_bf16", "avx512_vnni"}


# What a route says before it was built (the tests of a first call put it back).
READY = xnnpack.XnnpackRoute.ready


@pytest.fixture(autouse=True)
def enabled(monkeypatch):
    monkeypatch.delenv(xnnpack.DISABLE_ENV, raising=False)
    # Built at its first call, as after `encoder.warmup()`: what it serves once built.
    monkeypatch.setattr(xnnpack.XnnpackRoute, "ready", lambda self, precision: True)


@pytest.fixture
def vnni_encoder(on_host):
    """`vnni_encoder(**tiny_encoder_kwargs)`: a tiny encoder whose engine runs on a host with VNNI."""

    def make(flags=VNNI, **kwargs):
        encoder = tiny_encoder(**kwargs)
        on_host(encoder, cpu_flags=flags)
        return encoder

    return make


def min_cosine(a, b):
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return float(((a * b).sum(1) / np.maximum(norms, 1e-12)).min())


def test_int8_encode_runs_through_xnnpack_close_to_float32(vnni_encoder):
    encoder = vnni_encoder()
    reference = encoder.encode(TEXTS, compute="float32")
    out = encoder.encode(TEXTS, compute="int8", batch_size=2)  # several batches and widths
    assert encoder.engine.route("int8") == ("xnnpack", "int8")
    assert isinstance(encoder.engine.runner("int8"), xnnpack.Runner)
    assert min_cosine(out, reference) > 0.99
    # One query (tokenised outside the graph) is its row of the batch.
    np.testing.assert_allclose(encoder.encode(TEXTS[2], compute="int8"), out[2], atol=1e-5)
    # No SavedModel holds int8: the exportable routes fall back to float32.
    assert encoder.engine.plan("int8") == ("fused", "float32")


def test_the_blocks_convert_to_ops_xnnpack_runs():
    # Strided slices run in TFLite's single-threaded kernel, outside XNNPACK: none may sit in a block.
    encoder = tiny_encoder()
    weights = encoder.engine.routes["xnnpack"].graphs.fused_weights("float32")
    model = xnnpack.convert(xnnpack.forward_function(encoder, weights))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        tf.lite.experimental.Analyzer.analyze(model_content=model)
    ops = re.findall(r"Op#(\d+) (\w+)\(", printed.getvalue())
    first_matmul = min(int(i) for i, name in ops if name == "FULLY_CONNECTED")
    assert [name for i, name in ops if int(i) > first_matmul and name == "STRIDED_SLICE"] == []
    assert [name for i, name in ops].count("SPLIT") == encoder.backbone.num_layers  # query, key, value
    assert "MUL" not in [name for i, name in ops if int(i) > first_matmul][:8]  # no scaling of the queries
    # The token table stays out (looked up in float32 by the `Runner`): converted, it would be int8 with one scale.
    assert "DEQUANTIZE" not in [name for i, name in ops]
    table_shape = [encoder.backbone.vocabulary_size, encoder.backbone.hidden_dim]
    tensors = xnnpack.make_interpreter(model).get_tensor_details()
    assert [t["name"] for t in tensors if list(t["shape"]) == table_shape] == []


def test_xnnpack_follows_new_weights(vnni_encoder):
    encoder, fresh = vnni_encoder(seed=1), vnni_encoder(seed=2)
    before = encoder.encode(TEXTS, compute="int8")
    version = encoder.engine.routes["xnnpack"].runner().version
    for variable, value in zip(encoder.backbone.weights, fresh.backbone.weights):
        variable.assign(value)
    expected = fresh.encode(TEXTS, compute="int8")
    np.testing.assert_allclose(encoder.encode(TEXTS[:1], compute="int8"), expected[:1], atol=1e-5)
    np.testing.assert_allclose(encoder.encode(TEXTS, compute="int8"), expected, atol=1e-5)
    assert min_cosine(before, expected) < 0.9  # the weights did change
    assert encoder.engine.routes["xnnpack"].runner().version == version + 1  # converted once more


def test_a_later_encoder_with_the_same_weights_reads_the_converted_model_from_disk(tmp_path, monkeypatch, vnni_encoder):
    monkeypatch.setenv(cold_start.CACHE_ENV, str(tmp_path))
    calls, convert = [], xnnpack.convert
    monkeypatch.setattr(xnnpack, "convert", lambda function, quantize: calls.append(1) or convert(function, quantize))
    expected = vnni_encoder(seed=3).encode(TEXTS, compute="int8")
    assert len(calls) == 1 and len(list((tmp_path / "converted").iterdir())) == 1
    again = vnni_encoder(seed=3)  # a new process would build the same model
    np.testing.assert_allclose(again.encode(TEXTS, compute="int8"), expected, atol=1e-6)
    assert len(calls) == 1 and again.engine.route("int8") == ("xnnpack", "int8")
    vnni_encoder(seed=4).encode(TEXTS, compute="int8")  # other weights: converted
    assert len(calls) == 2


def test_diverging_xnnpack_graph_falls_back_to_onednn_with_a_warning(monkeypatch, vnni_encoder):
    encoder = vnni_encoder()
    reference = encoder.encode(TEXTS, compute="float32")

    def wrong(self, token_ids, padding_mask):
        return np.random.default_rng(0).normal(size=(len(token_ids), 8)).astype("float32")

    monkeypatch.setattr(xnnpack.Runner, "__call__", wrong)
    with pytest.warns(UserWarning, match="XNNPACK int8 graph .* diverges .* oneDNN int8 route"):
        out = encoder.encode(TEXTS, compute="int8")
    assert encoder.engine.route("int8") == ("fused", "int8")
    assert min_cosine(out, reference) > 0.99


def test_a_failed_conversion_warns_and_keeps_the_onednn_route(monkeypatch, vnni_encoder):
    def broken(function, quantize):
        raise RuntimeError("converter failed on op Foo")

    monkeypatch.setattr(xnnpack, "convert", broken)
    encoder = vnni_encoder()
    reference = encoder.encode(TEXTS, compute="float32")
    with pytest.warns(UserWarning, match="could not convert .* converter failed on op Foo"):
        out = encoder.encode(TEXTS, compute="int8")
    assert encoder.engine.route("int8")[0] != "xnnpack"
    assert min_cosine(out, reference) > 0.99


@pytest.mark.parametrize("flags", [frozenset({"avx2"}), frozenset({"avx2", "fma", "avx512f"}), None])
def test_without_vnni_or_avx2_fma_or_when_disabled_int8_keeps_the_onednn_route(monkeypatch, vnni_encoder, flags):
    if flags is None:
        monkeypatch.setenv(xnnpack.DISABLE_ENV, "1")
    encoder = vnni_encoder(flags or VNNI)
    reference = encoder.encode(TEXTS, compute="float32")
    out = encoder.encode(TEXTS, compute="int8")
    assert encoder.engine.route("int8")[0] != "xnnpack"
    assert encoder.engine.routes["xnnpack"].interpreter is None  # nothing converted
    assert encoder.engine.verdicts.get("xnnpack", "int8") is None  # never checked
    assert min_cosine(out, reference) > 0.99


@pytest.mark.large
def test_keras_quantized_encoder_runs_xnnpack_by_default(on_host):
    encoder = tiny_encoder()
    encoder.quantize("int8")
    on_host(encoder, cpu_flags=VNNI)  # `quantize` dropped the engine
    keras_int8 = np.asarray(keras_hub.models.TextEmbedder.predict(encoder, np.array(TEXTS), verbose=0))
    out = encoder.encode(TEXTS, normalize=False)
    assert encoder.engine.route("auto") == ("xnnpack", "int8")
    # The converter re-quantizes the dequantized Keras int8 kernels to the same
    # per-channel int8 values; activations are quantized per row instead of per tensor.
    assert min_cosine(out, keras_int8) > 0.99
    np.testing.assert_allclose(encoder.predict(TEXTS), encoder.encode(TEXTS), atol=1e-6)


def test_runner_serialises_calls_from_threads(vnni_encoder):
    encoder = vnni_encoder()
    encoder.encode(TEXTS, compute="int8")
    run = encoder.engine.routes["xnnpack"].runner()
    rng = np.random.default_rng(0)
    batches = []
    for rows, width in [(1, 3), (4, 7), (2, 12), (3, 5)] * 3:
        ids = rng.integers(5, 30, (rows, width)).astype("int32")
        batches.append((ids, np.ones_like(ids)))
    expected = [run(*batch) for batch in batches]
    results = [None] * len(batches)

    def work(i):
        results[i] = run(*batches[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(batches))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for got, want in zip(results, expected):
        np.testing.assert_allclose(got, want, atol=1e-6)


def test_float32_batches_run_through_xnnpack_on_an_avx2_cpu(vnni_encoder):
    encoder = vnni_encoder(AVX2)
    texts = TEXTS * 3
    reference = np.asarray(keras_hub.models.TextEmbedder.predict(encoder, np.array(texts), verbose=0))
    out = encoder.encode(texts, compute="float32", batch_size=4, normalize=False)  # batches of several widths
    assert encoder.engine.select("float32", "batch")[0].name == "xnnpack_float32"
    assert encoder.engine.verdicts.get("xnnpack_float32", "float32") is True
    np.testing.assert_allclose(out, reference, atol=2e-5)
    # A few texts, and one, through the interpreter too (every race won, conftest); int8 runs XNNPACK's int8.
    few = encoder.encode(texts[:3], compute="float32", normalize=False)
    one = encoder.encode(texts[:1], compute="float32", normalize=False)
    assert [encoder.engine.select("float32", size)[0].name for size in ("few", "one")] == ["xnnpack_float32"] * 2
    np.testing.assert_allclose(np.concatenate([few, one]), reference[[0, 1, 2, 0]], atol=2e-5)
    int8 = encoder.encode(texts, compute="int8", batch_size=4, normalize=False)
    assert encoder.engine.select("int8", "batch")[0].name == "xnnpack"
    assert min_cosine(int8, reference) > 0.99


@pytest.mark.parametrize("flags", [AVX2 - {"fma"}, None])
def test_float32_stays_on_tensorflow_without_fma_or_when_disabled(monkeypatch, vnni_encoder, flags):
    if flags is None:
        monkeypatch.setenv(xnnpack.DISABLE_ENV, "1")
    encoder = vnni_encoder(flags or AVX2)
    encoder.encode(TEXTS * 3, compute="float32", batch_size=4)
    encoder.encode(TEXTS[:3], compute="float32")
    assert [encoder.engine.select("float32", size)[0].name for size in ("batch", "few")] == ["fused"] * 2
    assert encoder.engine.routes["xnnpack_float32"].interpreter is None


def test_one_text_and_a_few_on_an_avx512_cpu_run_xnnpack_float32_in_the_float32_and_bfloat16_paths(
    vnni_encoder, monkeypatch
):
    monkeypatch.setattr(xnnpack.XnnpackRoute, "ready", READY)
    encoder = vnni_encoder(AVX512_BF16)
    engine = encoder.engine
    reference = np.asarray(keras_hub.models.TextEmbedder.predict(encoder, np.array(TEXTS), verbose=0))
    assert engine.routes["xnnpack_float32"].sizes == ("one", "few")
    # A first call converts nothing (the cache is off): the routes it builds on answer.
    first = encoder.encode(TEXTS[0], normalize=False)
    assert [engine.select(compute, "one")[0].name for compute in ("auto", "float32")] == ["xla", "xla"]
    assert engine.select("auto", "few")[0].name == "fused"
    assert engine.routes["xnnpack_float32"].interpreter is None
    encoder.warmup(verbose=False)  # converts it, checks it and races it; every race won (conftest)
    one = encoder.encode(TEXTS[0], normalize=False)  # "auto": the bfloat16 path
    np.testing.assert_allclose(one, first, atol=4e-5)  # the XLA query's float32 then, XNNPACK's now
    few = encoder.encode(TEXTS[:3], normalize=False)
    for size in ("one", "few"):
        assert engine.select("auto", size) == (engine.routes["xnnpack_float32"], "bfloat16")
    assert engine.runner_for("auto", "few").max_tokens == xnnpack.TOKEN_STEPS[-1]  # every step won
    np.testing.assert_allclose(np.concatenate([one[None], few]), reference[[0, 0, 1, 2]], atol=2e-5)  # float32's
    for compute in ("float32", "bfloat16"):  # named paths: the same races, won
        np.testing.assert_allclose(encoder.encode(TEXTS[1], compute=compute, normalize=False), reference[1], atol=2e-5)
        assert [engine.select(compute, size)[0].name for size in ("one", "few")] == ["xnnpack_float32"] * 2
    assert engine.verdicts.get("xnnpack_float32", "float32") is True  # one check serves both paths
    assert engine.verdicts.get("xnnpack_float32", "bfloat16") is None
    # Batches stay on oneDNN's graphs, and int8 on XNNPACK's int8.
    encoder.encode(TEXTS * 3, batch_size=4)
    routes = [engine.select(compute, "batch")[0].name for compute in ("auto", "float32")]
    assert routes == ["fused"] * 2
    assert engine.select("int8", "batch")[0].name == "xnnpack"


def test_a_converted_model_on_disk_lets_a_first_call_take_the_route(vnni_encoder, monkeypatch, tmp_path):
    monkeypatch.setattr(xnnpack.XnnpackRoute, "ready", READY)
    monkeypatch.setenv(cold_start.CACHE_ENV, str(tmp_path))
    encoder = vnni_encoder(AVX512_BF16)
    assert not encoder.engine.routes["xnnpack_float32"].ready("float32")
    encoder.encode(TEXTS[0], compute="float32")
    assert encoder.engine.select("float32", "one")[0].name == "xla"  # not converted by a call
    encoder.warmup("float32", verbose=False)
    assert encoder.engine.select("float32", "one")[0].name == "xnnpack_float32"
    again = vnni_encoder(AVX512_BF16)  # the same weights in a new engine, as in a later process
    assert again.engine.routes["xnnpack_float32"].ready("float32")
    np.testing.assert_allclose(
        again.encode(TEXTS[0], compute="float32"), encoder.encode(TEXTS[0], compute="float32"), atol=1e-6
    )
    assert again.engine.select("float32", "one")[0].name == "xnnpack_float32"
    assert again.engine.routes["xnnpack_float32"].interpreter is not None


def won_up_to(bound, raced=None):
    """A stand-in for `VerdictTable.race`: the token races of sizes up to `bound` won, every other race won."""

    def race(name, precision, measure, again=None):
        raced is None or raced.append(name)
        size = name.rsplit(":", 1)[1]
        return not size.isdigit() or int(size) <= bound

    return race


@pytest.mark.parametrize("bound", [0, 32, 128, 512])
def test_on_an_avx512_cpu_the_token_races_set_what_the_interpreter_runs(monkeypatch, vnni_encoder, bound):
    encoder = vnni_encoder(AVX512_BF16)
    engine, raced = encoder.engine, []
    monkeypatch.setattr(engine.verdicts, "race", won_up_to(bound, raced))
    route = engine.routes["xnnpack_float32"]
    expected = [s for s in xnnpack.TOKEN_STEPS if s <= bound] + [s for s in xnnpack.TOKEN_STEPS if s > bound][:1]
    # Then `TOKEN_BISECTIONS` (1) race at the middle of the gap between the last won and the first lost (lost here).
    lost = expected[-1] if bound < xnnpack.TOKEN_STEPS[-1] else None
    expected += [] if lost is None else [(bound + lost) // 2]
    assert engine.choice.races.token_bound(route, "bfloat16") == bound
    assert raced == [f"xnnpack_float32>fused:{s}" for s in expected]  # smallest first, up to the first lost
    # It serves where it won the smallest call, under "auto" and a named path alike, bounded.
    served = ["xnnpack_float32"] * 2 if bound else ["xla", "fused"]
    for compute in ("auto", "float32"):
        assert [engine.select(compute, size)[0].name for size in ("one", "few")] == served
    assert getattr(engine.runner_for("float32", "few"), "max_tokens", 0) == bound


@pytest.mark.parametrize(
    "crossing, bisections, bound, raced",
    [(330, 2, 320, [384, 320]), (400, 1, 384, [384]), (50, 2, 48, [48, 56]), (20, 1, 16, [16]), (20, 2, 16, [16, 24])],
)
def test_the_token_bound_is_bisected_between_the_last_step_won_and_the_first_lost(
    monkeypatch, vnni_encoder, crossing, bisections, bound, raced
):
    encoder = vnni_encoder(AVX512_BF16)
    names = []
    monkeypatch.setattr(route_choice, "TOKEN_BISECTIONS", bisections)
    monkeypatch.setattr(encoder.engine.verdicts, "race", won_up_to(crossing, names))
    assert encoder.engine.choice.races.token_bound(encoder.engine.routes["xnnpack_float32"], "bfloat16") == bound
    steps = [s for s in xnnpack.TOKEN_STEPS if s <= crossing] + [s for s in xnnpack.TOKEN_STEPS if s > crossing][:1]
    assert names == [f"xnnpack_float32>fused:{s}" for s in steps + raced]
    assert encoder.engine.runner_for("float32", "few").max_tokens == bound


@pytest.mark.parametrize(
    "timings, bounds",
    [
        # A win in a slower spell: 32, 64 won, 128 and the middle 96 lost. Timed again: 32 won, 64 lost, so the
        # new middle, 48, is raced (lost); then 64 and 48 lose once more.
        ([[True, True, False, False], [True, False, False], [False, False]], [64, 32, 32]),
        # A false loss: 32 won, 64 and 48 lost. Timed again: 32 won, 64 won (it stands lost: the two disagree),
        # 48 lost; then 64 wins a third time, so 128 and the middle, 96, are raced (lost), then lost again.
        ([[True, False, False], [True, True, False], [True, False, False], [False, False]], [32, 32, 64, 64]),
    ],
)
def test_each_token_race_is_timed_again_later_until_two_agree_and_the_runner_follows(
    monkeypatch, tmp_path, vnni_encoder, timings, bounds
):
    monkeypatch.setenv(cold_start.CACHE_ENV, str(tmp_path))
    results, raced = iter(sum(timings, [])), []

    def race(runner, rival, queries=None, batch=None):
        raced.append(sum(len(texts) for texts in queries))
        return next(results)

    monkeypatch.setattr(route_choice, "race", race)
    monkeypatch.setattr(self_check, "RACE_AGAIN_AFTER", (1e9, 1e9))
    encoder = vnni_encoder(AVX512_BF16, seed=8)
    runner = encoder.engine.runner_for("float32", "few")
    assert runner.max_tokens == bounds[0] and len(raced) == len(timings[0])
    fused, route = encoder.engine.routes["fused"], encoder.engine.routes["xnnpack_float32"]
    assert route.warm("float32", "few") and not fused.warm("float32", "few")  # the fused query graph is not built yet
    monkeypatch.setattr(self_check, "RACE_AGAIN_AFTER", (0.0, 0.0))
    assert runner.max_tokens == bounds[0] and len(raced) == len(timings[0])  # not timed again: that builds a graph
    fused.build("float32").query(["a few words"])
    interpreter, route.interpreter = route.interpreter, None  # as in a process whose queries never ran XNNPACK
    assert fused.warm("float32", "few") and not route.warm("float32", "few")
    assert runner.max_tokens == bounds[0] and len(raced) == len(timings[0])
    route.interpreter = interpreter
    for query, bound in enumerate(bounds[1:], 2):  # each query times each unsettled race once more
        assert runner.max_tokens == bound and len(raced) == len(sum(timings[:query], []))
    assert runner.max_tokens == bounds[-1] and next(results, None) is None  # settled: kept

    later = vnni_encoder(AVX512_BF16, seed=8)  # a later process: the bound from disk, settled
    assert later.engine.runner_for("float32", "few").max_tokens == bounds[-1]
    assert len(raced) == len(sum(timings, []))  # nothing timed


def test_a_bound_of_0_is_raced_again_and_the_few_text_choice_follows(monkeypatch, vnni_encoder):
    # 32 and the middle, 16, lost; timed again, both won (they stand lost: the two disagree); then 32 wins a
    # third time, so 64 and the middle, 48, are raced (lost): the bound is 32 and XNNPACK serves a few texts.
    results, now = iter([False, False, True, True, True, False, False]), [0.0]
    monkeypatch.setattr(route_choice, "race", lambda runner, rival, **_: next(results))
    monkeypatch.setattr(route_choice, "time", types.SimpleNamespace(time=lambda: now[0]))  # the choice's clock
    monkeypatch.setattr(self_check, "RACE_AGAIN_AFTER", (0.0, 0.0))
    encoder = vnni_encoder(AVX512_BF16)
    engine = encoder.engine
    assert engine.select("auto", "few") == (engine.routes["fused"], "bfloat16")  # bound 0
    engine.routes["fused"].build("bfloat16").query(["a few words"])  # as the fused graph's first query does
    for served in ("fused", "xnnpack_float32"):  # the choice made again, each race timed once more
        now[0] += route_choice.RECHOOSE_AFTER
        assert engine.select("auto", "few")[0].name == served
    timings = {size: engine.verdicts.timings(f"xnnpack_float32>fused:{size}", "bfloat16") for size in (32, 16, 64, 48)}
    assert timings == {32: [False, True, True], 16: [False, True], 64: [False], 48: [False]}
    monkeypatch.setattr(self_check, "RACE_AGAIN_AFTER", (1e9, 1e9))  # none due: the runner reads the bound
    assert engine.runner_for("auto", "few").max_tokens == 32 and next(results, None) is None


def test_race_queries_fill_a_call_of_the_tokens_raced(vnni_encoder):
    encoder = vnni_encoder(AVX512_BF16)
    width = encoder.preprocessor.tokenize(list(route_choice.RACE_TEXTS))[0].bounding_shape()[1]
    for tokens in xnnpack.TOKEN_STEPS:
        (texts,) = route_choice.race_queries(encoder, "few", tokens)
        assert max(1, tokens // int(width)) == len(texts) and set(texts) <= set(route_choice.RACE_TEXTS)
    assert route_choice.race_queries(encoder, "few") == [list(route_choice.RACE_TEXTS)]
    assert route_choice.race_queries(encoder, "one") is None  # each text alone


def test_a_race_of_a_few_texts_sends_them_in_one_call(monkeypatch, vnni_encoder):
    raced = []
    monkeypatch.setattr(route_choice, "race", lambda runner, rival, **kw: raced.append(kw["queries"]) or True)
    encoder = vnni_encoder(AVX2)
    assert encoder.engine.select("auto", "few")[0].name == "xnnpack_float32"
    assert raced == [[list(route_choice.RACE_TEXTS)]]  # against the fused graph; XLA serves one text only


def test_on_an_avx512_cpu_a_call_over_the_bound_runs_the_fused_graph(monkeypatch, vnni_encoder):
    encoder = vnni_encoder(AVX512_BF16, sequence_length=64)
    engine = encoder.engine
    monkeypatch.setattr(engine.verdicts, "race", won_up_to(32))
    worded = "the cat " * 20  # its words alone show more than 32 tokens (`fewest_tokens`)
    dashed = "the-cat " * 12  # 12 words: only its padded ids show it
    lengths = encoder.preprocessor.tokenize([worded, dashed])[0].row_lengths().numpy()
    assert 64 > lengths.min() and lengths.max() > 32 and xnnpack_runner.fewest_tokens([dashed], 64) <= 32
    short = encoder.encode(TEXTS[:2], compute="float32", normalize=False)  # at most 32 tokens: the interpreter
    runner = engine.runner_for("float32", "few")
    assert isinstance(runner, xnnpack_runner.XnnpackRunner) and runner.max_tokens == 32
    functions = dict(engine.graphs.strings._functions)
    interpreter_calls = []
    monkeypatch.setattr(xnnpack.Runner, "__call__", lambda *args: interpreter_calls.append(1))
    alone = encoder.encode(dashed, compute="float32", normalize=False)
    pair = encoder.encode([dashed, TEXTS[0]], compute="float32", normalize=False)
    assert engine.graphs.strings._functions == functions  # not tokenised again: the fused graph took the ids
    texts = [worded, TEXTS[0], TEXTS[1]]
    several = encoder.encode(texts, compute="float32", normalize=False)  # the fused graph's own query
    assert interpreter_calls == []  # none ran the interpreter
    expected = engine.routes["fused"].build("float32").query(texts + [dashed])[0]
    np.testing.assert_allclose(np.concatenate([short, several]), expected[[1, 2, 0, 1, 2]], atol=1e-5)
    np.testing.assert_allclose(np.concatenate([alone[None], pair]), expected[[3, 3, 1]], atol=1e-5)
    normalized = encoder.encode([dashed, TEXTS[0]], compute="float32", normalize=True)  # normalised in place
    np.testing.assert_allclose(normalized, pair / np.linalg.norm(pair, axis=1, keepdims=True), atol=1e-6)
    assert engine.runner_for("float32", "batch").batch() is engine.graphs.fused_function("float32")


def test_on_an_avx512_cpu_a_short_query_after_a_write_leaves_the_bf16_copy_to_the_calls_that_run_it(
    monkeypatch, vnni_encoder
):
    encoder = vnni_encoder(AVX512_BF16, sequence_length=64)
    monkeypatch.setattr(encoder.engine.verdicts, "race", won_up_to(32))
    dashed = "the-cat " * 12  # over 32 tokens: handed to the bf16 fused graph
    encoder.encode(TEXTS[0]), encoder.encode(dashed)
    bf16 = encoder.engine.graphs._weights["bfloat16"]  # read without syncing
    version = bf16.version
    table = encoder.backbone.token_embedding.embeddings
    table.assign(table.value * 2.0)
    encoder.encode(TEXTS[0])  # the interpreter: float32's weights alone are synced
    assert bf16.version == version
    expected = np.asarray(keras_hub.models.TextEmbedder.predict(encoder, np.array([dashed]), verbose=0))
    assert min_cosine(encoder.encode([dashed], normalize=False), expected) > 0.999  # re-cast when it runs
    assert bf16.version > version


def test_on_an_avx512_cpu_a_write_behind_keras_reaches_both_engines_of_a_query(monkeypatch, vnni_encoder):
    encoder = vnni_encoder(AVX512_BF16, sequence_length=64)
    monkeypatch.setattr(encoder.engine.verdicts, "race", won_up_to(32))
    dashed, worded = "the-cat " * 12, "the cat " * 20  # over 32 tokens: found by tokenising, by counting words
    # A float32 query first (it syncs float32's weights alone), then long texts in the bf16 path (handed
    # to the bf16 fused graph on the padded ids, whose weights the second call finds changed, or
    # straight to that graph's own query), then a short one.
    calls = [(TEXTS[0], "float32"), (dashed, "auto"), (worded, "auto"), (TEXTS[0], "auto")]

    def queries():
        return np.stack([encoder.encode(text, compute=compute, normalize=False) for text, compute in calls])

    queries()
    table = encoder.backbone.token_embedding.embeddings
    before = queries()
    # A write past the variable's methods: only the sampled fingerprint, in a query's graph calls, sees it.
    tf.raw_ops.AssignVariableOp(resource=table.value.handle, value=table.value * -4.0)
    texts = [text for text, _ in calls]
    expected = np.asarray(keras_hub.models.TextEmbedder.predict(encoder, np.array(texts), verbose=0))
    assert min_cosine(before, expected) < 0.99  # the write moved the texts
    got = queries()
    np.testing.assert_allclose(got[[0, 3]], expected[[0, 3]], atol=2e-5)  # the interpreter: float32
    assert min_cosine(got[1:3], expected[1:3]) > 0.999  # the bf16 fused graph


@pytest.mark.parametrize("won, route", [(True, "xnnpack_float32"), (False, "fused")])
def test_auto_batches_take_xnnpack_float32_only_where_it_won_a_race_of_batches(monkeypatch, vnni_encoder, won, route):
    raced = []
    monkeypatch.setattr(route_choice, "race", lambda runner, rival, **kw: raced.append(kw.get("batch")) or won)
    encoder = vnni_encoder(AVX2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a lost race is no failure
        assert encoder.engine.select("auto", "batch")[0].name == route
    token_ids, mask = raced[0]  # batch calls, not single queries
    assert token_ids.shape == mask.shape and len(token_ids) == route_choice.RACE_BATCH_ROWS
    assert encoder.engine.select("float32", "batch")[0].name == route  # a named path: the same race, kept
    assert len(raced) == 1


@pytest.mark.parametrize("flags, path", [(AVX2, "float32"), (AVX512_BF16, "bfloat16")])
@pytest.mark.parametrize(
    "won, route",
    [
        ({"xnnpack_float32>xla:one", "xnnpack_float32>fused:one", "xla>fused:one"}, "xnnpack_float32"),
        ({"xnnpack_float32>fused:one", "xla>fused:one"}, "xla"),
        ({"xnnpack_float32>xla:one", "xla>fused:one"}, "xla"),
        ({"xnnpack_float32>xla:one"}, "fused"),
        (set(), "fused"),
    ],
)
def test_one_text_under_auto_takes_xnnpack_float32_only_where_it_beat_xla_and_the_fused_graph(
    monkeypatch, vnni_encoder, won, route, flags, path
):
    raced = []

    def race(name, precision, measure, again=None):  # the engine's memo of races: decided here by its name
        raced.append((name, precision))
        return name in won

    if flags == AVX512_BF16:  # with AVX-512 the fused graph is raced per call size, from 32 tokens
        won = {name.replace("xnnpack_float32>fused:one", "xnnpack_float32>fused:32") for name in won}
    encoder = vnni_encoder(flags)
    monkeypatch.setattr(encoder.engine.verdicts, "race", race)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a lost race is no failure
        assert encoder.engine.select("auto", "one") == (encoder.engine.routes[route], path)
    assert raced[0] == ("xnnpack_float32>xla:one", path)  # the XLA query serves one text: the first rival
    asked = len(raced)
    assert encoder.engine.select(path, "one")[0].name == route  # a named path: the same races
    assert raced[asked:] == raced[:asked]


def test_diverging_xnnpack_float32_graph_falls_back_to_the_fused_graph(monkeypatch, vnni_encoder):
    encoder = vnni_encoder(AVX2)

    def wrong(self, token_ids, padding_mask):
        return np.random.default_rng(0).normal(size=(len(token_ids), 8)).astype("float32")

    monkeypatch.setattr(xnnpack.Runner, "__call__", wrong)
    with pytest.warns(UserWarning, match="XNNPACK float32 graph .* diverges .* fused graph"):
        out = encoder.encode(TEXTS * 3, compute="float32", batch_size=4)
    assert encoder.engine.select("float32", "batch")[0].name == "fused"
    expected = vnni_encoder(frozenset()).encode(TEXTS * 3, compute="float32", batch_size=4)  # no XNNPACK
    np.testing.assert_allclose(out, expected, atol=1e-5)
