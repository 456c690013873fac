import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conftest import ROOT
from conftest import tiny_encoder
from harness import run_on_small_disk
from harness import small_disk_available
from sbert_keras import export_saved_model
from sbert_keras.runtime.engine import resolve_compute
from sbert_keras.runtime.export import serving_forward
from sbert_keras.runtime.export import sorted_batches
from sbert_keras.runtime.routes.fused import FusedRoute

TEXTS = ["a man is playing guitar", "the cat sleeps", "", "東京 😀", "a " * 40, "a dog", "the red car is fast and slow"]

SERVE = """
import json, sys
import tensorflow as tf
import tensorflow_text  # registers the tokenizer ops the graph uses
result = {}
for path in sys.argv[1:]:
    model = tf.saved_model.load(path)
    body = json.loads(sys.stdin.readline())  # a TF Serving REST body
    out = model.signatures["serving_default"](text=tf.constant(body["instances"], tf.string))
    reader = tf.train.load_checkpoint(path + "/variables/variables")
    dtypes = sorted({d.name for d in reader.get_variable_to_dtype_map().values()})
    result[path] = {"predictions": out["embeddings"].numpy().tolist(), "dtypes": dtypes}
print(json.dumps(result))
"""


def serve_in_fresh_process(requests):
    """{path: (predictions, variable dtypes)} served by a new interpreter."""
    result = subprocess.run(
        [sys.executable, "-c", SERVE, *requests],
        input="".join(json.dumps({"instances": texts}) + "\n" for texts in requests.values()),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    return {path: (np.array(v["predictions"]), v["dtypes"]) for path, v in out.items()}


def min_cosine(a, b):
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return ((a * b).sum(1) / np.maximum(norms, 1e-12)).min()


def test_saved_models_serve_raw_strings_in_a_fresh_process(tmp_path):
    encoder = tiny_encoder(normalize=True)
    quantized = tiny_encoder(normalize=True, seed=1)
    quantized.quantize("int8")
    paths = {name: str(tmp_path / name / "1") for name in ("f32", "auto", "quantized")}
    # batch_size=2: a request is cut into several sorted batches inside the graph.
    export_saved_model(encoder, paths["f32"], compute="float32", batch_size=2)
    export_saved_model(encoder, paths["auto"])  # bfloat16 on a CPU with AVX512-BF16
    export_saved_model(quantized, paths["quantized"])  # its Keras graph: Keras' int8 layers, as `encode` in float32
    assert quantized.engine.plan() == ("keras", "float32")
    many = TEXTS * 10
    served = serve_in_fresh_process({paths["f32"]: TEXTS, paths["auto"]: many, paths["quantized"]: TEXTS})
    expected = encoder.encode(TEXTS, compute="float32")
    got, _ = served[paths["f32"]]
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= 1e-5
    got, dtypes = served[paths["auto"]]
    if resolve_compute("auto") == "bfloat16":
        assert "bfloat16" in dtypes  # the weights are stored cast, as the graph reads them
        assert min_cosine(got, encoder.encode(many, compute="float32")) >= 0.999
    else:
        assert np.abs(got - encoder.encode(many, compute="float32")).max() <= 1e-5
    got, _ = served[paths["quantized"]]
    assert min_cosine(got, quantized.encode(TEXTS)) >= 0.999
    empty = tf.saved_model.load(paths["f32"]).signatures["serving_default"](text=tf.constant([], tf.string))
    assert empty["embeddings"].shape == (0, 8)


def test_sorted_batches_keep_request_order():
    ids = tf.ragged.constant([[1, 2], [3], [4, 5, 6, 7], [8, 9, 10], []], dtype=tf.int32)

    def forward(token_ids, mask):
        return tf.cast(tf.stack([tf.reduce_sum(token_ids * mask, 1), tf.reduce_sum(mask, 1)], axis=1), tf.float32)

    out = tf.function(lambda: sorted_batches(forward, ids, 0, 2, 2))().numpy()
    np.testing.assert_allclose(out, [[3, 2], [3, 1], [22, 4], [27, 3], [0, 0]])


def test_sorted_batches_go_two_a_call_each_padded_to_its_own_length():
    ids = tf.ragged.constant([[1, 2], [3], [4, 5, 6, 7], [8, 9, 10], [], [1, 1, 1, 1, 1], [2]], dtype=tf.int32)
    calls = []

    def forward(*inputs):
        calls.append(len(inputs))
        rows = []
        for token_ids, mask in zip(inputs[::2], inputs[1::2]):
            width = tf.fill([tf.shape(token_ids)[0]], tf.shape(token_ids)[1])
            rows.append(tf.cast(tf.stack([width, tf.reduce_sum(mask, 1)], axis=1), tf.float32))
        return tf.concat(rows, 0)

    out = tf.function(lambda: sorted_batches(forward, ids, 0, 2, 2, groups=2))().numpy()
    assert calls == [4]  # traced once, two batches a call
    # Sorted by length: (5, 4) 5 wide and (3, 2) 3 wide in the first call; (1, 1) 1 wide and (0) in the second.
    np.testing.assert_allclose(out, [[3, 2], [1, 1], [5, 4], [3, 3], [0, 0], [5, 5], [1, 1]])


def test_saved_models_take_two_batches_a_call_where_encode_does(monkeypatch, on_host):
    cpu = {"avx2", "fma", "avx512f"}
    assert serving_forward(on_host(tiny_encoder(), cpu_flags=cpu), "float32")[4] == 2
    assert serving_forward(on_host(tiny_encoder(), cpu_flags=cpu, gpu=True), "float32")[4] == 1
    monkeypatch.setattr(FusedRoute, "check_groups", lambda self, precision: False)
    assert serving_forward(on_host(tiny_encoder(), cpu_flags=cpu), "float32")[4] == 1


def test_int8_and_precision_are_refused_in_one_line(tmp_path):
    encoder = tiny_encoder(normalize=True)
    with pytest.raises(ValueError, match=r"compute='int8' cannot be exported.*precision='int8'"):
        export_saved_model(encoder, str(tmp_path / "a" / "1"), compute="int8")
    with pytest.raises(ValueError, match="compute must be one of"):
        export_saved_model(encoder, str(tmp_path / "b" / "1"), compute="float8")
    with pytest.raises(TypeError, match="takes no `precision`.*`compute`"):
        export_saved_model(encoder, str(tmp_path / "c" / "1"), precision="bfloat16")
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()


def test_saved_model_refuses_what_encode_refuses(tmp_path):
    encoder = tiny_encoder(normalize=True)
    path = export_saved_model(encoder, str(tmp_path / "sm" / "1"), compute="float32")
    serve = tf.saved_model.load(path).signatures["serving_default"]
    texts = ["a dog", "the cat sleeps \ufffd"]  # a valid U+FFFD is not taken for a bad byte
    got = serve(text=tf.constant(texts))["embeddings"].numpy()
    np.testing.assert_allclose(got, encoder.encode(texts, compute="float32"), atol=1e-5)
    with pytest.raises(ValueError, match=r"`texts\[1\]` is bytes that are not valid UTF-8"):
        encoder.encode([b"ok", b"caf\xe9"])
    for bad, message in [
        ([b"ok", b"caf\xe9"], r"`text\[1\]` is bytes that are not valid UTF-8"),
        ([b"ok", b"ok", b"\xed\xa0\x80"], r"`text\[2\]` is bytes that are not valid UTF-8"),  # a lone surrogate
        ([["a dog", "a cat"]], r"`text` must be a 1-D string tensor, one text per item; received shape \[1 2\]"),
        ([["a dog"], ["a cat"]], r"received shape \[2 1\]"),
        ("a dog", r"received shape \[\]"),
    ]:
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            serve(text=tf.constant(bad))


# The CLI with the size estimate taken away: the write itself meets the full disk.
CLI_WITHOUT_ESTIMATE = """
import sys
from sbert_keras.cli import parser as cli
from sbert_keras.runtime import export
export.saved_model_bytes = lambda endpoint: 0
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("estimate", ["checked before writing", "met while writing"])
def test_export_to_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, estimate):
    if not small_disk_available():
        pytest.skip("needs root and unshare for a private tmpfs")
    model = tmp_path / "tiny.keras"
    tiny_encoder(normalize=True).save(model)
    disk = tmp_path / "disk"
    disk.mkdir()
    target = disk / "sm" / "1"
    cli = ["-m", "sbert_keras.cli"] if estimate == "checked before writing" else ["-c", CLI_WITHOUT_ESTIMATE]
    command = [sys.executable, *cli, "export", "--model", str(model), "--output", str(target), "--compute", "float32"]
    # The tiny SavedModel takes about 0.4 MB; what is left on the disk is listed before the mount goes.
    script = '"$@"; code=$?; ls -A "$DISK"; exit $code'
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3", DISK=str(disk))
    done = run_on_small_disk(disk, "200k", ["sh", "-c", script, "sh", *command], env=env)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stdout == ""  # no JSON result, and nothing left on the disk
    assert "Traceback" not in done.stderr and "ResourceExhaustedError" not in done.stderr
    line = done.stderr.strip().splitlines()[-1]  # the one line of the error
    assert line.startswith(f"sbert-keras export: error: not enough disk space for {target}:"), line
    if estimate == "checked before writing":
        assert re.search(r"it needs about [0-9.]+ kB and [0-9.]+ kB are free; nothing was written", line)
    else:
        assert re.search(
            r"the disk filled up while writing \([0-9.]+ kB were free(, estimated [0-9.]+ kB)?\); nothing was written",
            line,
        )
