"""A new inference route, added as docs/architecture.md's recipe says: one class, its declarations, `register`.

The route here is the Keras graph with a marker op on its output: it
declares float32 for a few texts and batches, a rank between the fused
graph's and the XLA query's, and (or not) that a SavedModel can hold it.
"""

import os
import warnings

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401 - registers the tokenizer ops of the served graph

from conftest import tiny_encoder
from sbert_keras import export_saved_model
from sbert_keras.runtime import export
from sbert_keras.runtime import self_check
from sbert_keras.runtime.graphs import keras_forward
from sbert_keras.runtime.routes import base
from sbert_keras.runtime.routes import xnnpack

TEXTS = ["a man is playing guitar", "the cat sleeps", "a dog runs in the park", "東京"]
MARKER = "marked_route_output"


class MarkedRoute(base.Route):
    """The Keras graph with a marker op: float32, a few texts and batches, exportable."""

    name = "marked"
    rank = 25  # above the fused graph (20), below the XLA single query (30)
    computes = ("float32",)
    sizes = ("few", "batch")
    exportable = ("float32",)
    checks = []  # the compute paths it was checked in

    def forward(self, precision, matmul_policy=None):
        model = self.graphs.keras_model(precision)
        inner = keras_forward(model)
        return lambda token_ids, padding_mask: tf.identity(inner(token_ids, padding_mask), name=MARKER), [model]

    def function(self, precision):
        return self.graphs.traced(("marked", precision), lambda: self.forward(precision)[0])

    def check(self, precision):
        self.checks.append(precision)
        reference = self.graphs.keras_function("float32")
        return self_check.probe_check(self.encoder, reference, self.function(precision), precision, "marked graph")

    def build(self, precision):
        run = self.function(precision)
        return base.GraphRunner(self.graphs, lambda: (run, ()), lambda: run)


class UnexportableRoute(MarkedRoute):
    """The same route, declaring that a SavedModel cannot hold it."""

    name = "unexportable"
    exportable = ()


@pytest.fixture
def registered():
    """`registered(route_class)`: registers it for the test; unregistered afterwards."""
    added = []

    def add(route_class):
        added.append(base.register(route_class))
        route_class.checks = []
        return route_class

    yield add
    for route_class in added:
        base.unregister(route_class)


def test_a_registered_route_is_chosen_checked_served_and_exported(registered, on_host, tmp_path):
    encoder = tiny_encoder(normalize=True)
    expected = encoder.encode(TEXTS, compute="float32", batch_size=2)  # the fused graph, before the new route
    registered(MarkedRoute)
    engine = on_host(encoder, cpu_flags={"avx2", "fma", "avx512f"})
    assert engine.route("float32") == ("marked", "float32")
    assert engine.route("auto") == ("marked", "float32")  # auto is float32 on this host
    assert engine.select("float32", "one")[0].name == "xla"  # a size class it does not declare
    assert engine.route("bfloat16") == ("fused", "bfloat16")  # a compute path it does not declare
    for batch_size in (32, 2):  # a few texts in one query call; batches
        np.testing.assert_allclose(encoder.encode(TEXTS, compute="float32", batch_size=batch_size), expected, atol=1e-5)
    assert MarkedRoute.checks == ["float32"] and engine.verdicts.get("marked", "float32") is True  # checked once
    assert engine.plan("float32") == ("marked", "float32")

    path = export_saved_model(encoder, str(tmp_path / "marked"), compute="float32")
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        assert MARKER.encode() in f.read()  # the route's own forward was exported
    served = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(TEXTS))["embeddings"]
    np.testing.assert_allclose(served.numpy(), expected, atol=1e-5)

    base.unregister(MarkedRoute)
    try:
        engine = on_host(encoder, cpu_flags={"avx2", "fma", "avx512f"})
        assert "marked" not in engine.routes
        assert engine.route("float32") == engine.plan("float32") == ("fused", "float32")
    finally:
        base.register(MarkedRoute)  # the fixture takes it out


def test_a_route_that_cannot_be_exported_leaves_the_export_to_the_next(registered, on_host):
    encoder = tiny_encoder()
    registered(UnexportableRoute)
    engine = on_host(encoder, cpu_flags={"avx2", "fma", "avx512f"})
    assert engine.route("float32") == ("unexportable", "float32")
    assert engine.plan("float32") == ("fused", "float32")
    _, _, route, compute, _ = export.serving_forward(engine, "float32")
    assert (route.name, compute) == ("fused", "float32")
    assert engine.select("float32", "few", exportable=True)[0].name == "fused"


def test_a_failing_route_falls_back_to_the_next_with_one_warning(registered, on_host, monkeypatch):
    encoder = tiny_encoder()
    registered(MarkedRoute)
    wrong = lambda self, precision: lambda ids, mask: self.graphs.keras_function("float32")(ids, mask) + 1.0  # noqa: E731
    monkeypatch.setattr(MarkedRoute, "function", wrong)
    engine = on_host(encoder, cpu_flags={"avx2", "fma", "avx512f"})
    with pytest.warns(UserWarning, match="marked graph .* diverges .* Keras graph"):
        assert engine.route("float32") == ("fused", "float32")
    assert engine.verdicts.get("marked", "float32") is False


def test_a_keras_quantized_encoder_takes_only_the_routes_that_compute_its_arithmetic(on_host, monkeypatch):
    # The fused graph's routes read Keras' int8 kernels as float ones: in a float path they would compute float
    # activations where Keras' int8 layers round them, so the Keras graph serves those paths, and nothing warns.
    monkeypatch.delenv(xnnpack.DISABLE_ENV, raising=False)  # every route takes part
    flags = {"avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni"}
    encoder = tiny_encoder(normalize=True)
    engine = on_host(encoder, cpu_flags=flags)
    assert {name for name, route in engine.routes.items() if route.serves("float32")} == {
        "xnnpack_float32",
        "xla",
        "fused",
        "keras",
    }
    encoder.quantize("int8")
    engine = on_host(encoder, cpu_flags=flags)  # `quantize` dropped the engine
    assert {name for name, route in engine.routes.items() if route.serves("float32")} == {"keras"}
    assert {name for name, route in engine.routes.items() if route.serves("int8")} == {"xnnpack", "fused"}
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        for compute in ("float32", "bfloat16"):
            assert engine.route(compute) == engine.plan(compute) == ("keras", compute)
            assert engine.select(compute, "one")[0].name == "keras"
            vectors = encoder.encode(TEXTS[:1], compute=compute)
        keras_vectors = np.asarray(keras_forward(encoder)(*self_check.sentence_batch(encoder, TEXTS[:1])))
        np.testing.assert_allclose(vectors, keras_vectors / np.linalg.norm(keras_vectors), atol=1e-5)
        assert engine.route("int8") == ("xnnpack", "int8")
        assert engine.select("int8", "one")[0].name == "xnnpack"


def test_routes_are_registered_once_by_name():
    with pytest.raises(ValueError, match="'fused' is registered already"):
        base.register(type("Another", (base.Route,), {"name": "fused"}))
    assert [route.name for route in base.registered()] == ["xnnpack", "xnnpack_float32", "xla", "fused", "keras"]
