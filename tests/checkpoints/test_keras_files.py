"""`.keras` files from elsewhere: zip bombs, absurd sizes and damaged archives refused before Keras reads them."""

import json
import resource
import time
import tracemalloc
import warnings
import zipfile

import keras
import numpy as np
import pytest

from conftest import tiny_encoder
from sbert_keras import RegressionSiamese
from sbert_keras import SentenceEncoder
from sbert_keras.checkpoints.keras_files import CorruptModelError
from sbert_keras.checkpoints.keras_files import check_keras_config
from sbert_keras.checkpoints.keras_files import load_keras_encoder
from sbert_keras.checkpoints.keras_files import load_keras_file

BOMB_BYTES = 64 * 2**20  # inflated by the member below; a few KB on disk


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("saved") / "encoder.keras"
    tiny_encoder().save(path)
    return path


def rewrite(source, target, replace=None, extra=None, drop=()):
    """A copy of the archive `source` with members dropped or replaced (`{name: bytes}`) and `extra(archive)` added."""
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w") as dst:
        for info in src.infolist():
            if info.filename in drop or info.filename in (replace or {}):
                continue
            dst.writestr(info, src.read(info.filename))
        for name, data in (replace or {}).items():
            dst.writestr(name, data)
        if extra is not None:
            extra(dst)
    return target


def bomb_member(name, compression):
    def add(archive):
        info = zipfile.ZipInfo(name)
        info.compress_type = compression
        block = bytes(2**22)
        with archive.open(info, "w", force_zip64=True) as f:
            for _ in range(BOMB_BYTES // len(block)):
                f.write(block)

    return add


def refused_quickly(path, match):
    """Loads `path`, expecting `match`; returns (seconds, peak traced bytes, max RSS growth in bytes)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(CorruptModelError, match=match):
            load_keras_file(path)
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return seconds, peak, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) * 1024


@pytest.mark.parametrize(
    "compression, match",
    [
        (zipfile.ZIP_BZIP2, r"bomb\.keras: member 'model\.weights\.h5' uses compression method 12"),
        (zipfile.ZIP_DEFLATED, r"'model\.weights\.h5' declares 67,108,864 bytes from [\d,]+ bytes on disk"),
    ],
)
def test_a_zip_bomb_is_refused_before_any_member_is_inflated(tmp_path, saved, compression, match):
    # bzip2 is the dangerous one: zipfile inflates a whole compressed block per read, unbounded.
    weights = "model.weights.h5"
    path = rewrite(saved, tmp_path / "bomb.keras", drop=(weights,), extra=bomb_member(weights, compression))
    assert path.stat().st_size < 400_000  # the bomb: 64 MB declared
    seconds, peak, rss = refused_quickly(path, match)
    assert seconds < 2.0 and peak < 8 * 2**20 and rss < 32 * 2**20, (seconds, peak, rss)


def test_members_declaring_more_than_the_archive_can_hold_are_refused(tmp_path, saved):
    huge_json = rewrite(saved, tmp_path / "json.keras", replace={"config.json": b" " * (5 * 2**20)})
    with pytest.raises(CorruptModelError, match=r"json\.keras: member 'config\.json' declares 5,242,880 bytes"):
        load_keras_file(huge_json)

    # Many small members, each below the per-member floor, add up past the archive's bound.
    def many(archive):
        for i in range(80):
            info = zipfile.ZipInfo(f"assets/pad{i}")
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, bytes(2**20))

    padded = rewrite(saved, tmp_path / "padded.keras", extra=many)
    with pytest.raises(CorruptModelError, match=r"padded\.keras: its members declare [\d,]+ bytes .* bomb"):
        load_keras_file(padded)


def edited_config(saved, tmp_path, edit):
    with zipfile.ZipFile(saved) as z:
        config = json.loads(z.read("config.json"))
    edit(config["config"])
    return rewrite(saved, tmp_path / "edited.keras", replace={"config.json": json.dumps(config).encode()})


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("num_layers", 1_000_000, r"num_layers=1000000 is outside the accepted range 1\.\.512"),
        ("hidden_dim", 10**9, r"hidden_dim=1000000000 is outside the accepted range"),
        ("num_heads", 3, r"hidden_dim=8 is not a multiple of num_heads=3"),
        ("vocabulary_size", "84", r"vocabulary_size='84' must be a whole number"),
        ("layer_norm_epsilon", -1, r"layer_norm_epsilon=-1 must be a finite number"),
    ],
)
def test_absurd_backbone_sizes_are_refused_before_keras_builds_anything(tmp_path, saved, field, value, message):
    path = edited_config(saved, tmp_path, lambda c: c["backbone"]["config"].update({field: value}))
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"edited\.keras: config\.json \(BertLayoutBackbone .*\): " + message):
        SentenceEncoder.from_preset(path)
    assert time.perf_counter() - start < 5.0


def test_a_sequence_length_beyond_the_position_embeddings_is_refused_naming_the_file(tmp_path, saved):
    path = edited_config(saved, tmp_path, lambda c: c["preprocessor"]["config"].update(sequence_length=10**6))
    with pytest.raises(ValueError, match=r"edited\.keras: config\.json .*`sequence_length` 1000000 is above"):
        load_keras_file(path)
    huge_projection = {"class_name": "Dense", "config": {"name": "projection_0", "units": 10**9}}
    path = edited_config(saved, tmp_path, lambda c: c.update(projections=[huge_projection]))
    with pytest.raises(ValueError, match=r"\(Dense 'projection_0'\): units=1000000000 must be a whole number in"):
        load_keras_file(path)


def test_check_keras_config_accepts_what_the_package_saves(saved):
    with zipfile.ZipFile(saved) as z:
        check_keras_config(json.loads(z.read("config.json")), "encoder.keras: config.json")


def test_loading_a_trained_siamese_model_prints_no_optimizer_warning(tmp_path):
    encoder = tiny_encoder()
    model = RegressionSiamese(encoder)
    model.compile()
    texts = np.array(["a man is playing guitar", "the cat sleeps"])
    model.fit((texts, texts[::-1]), np.array([0.9, 0.1], "float32"), epochs=1, verbose=0)  # its optimizer is saved
    model.save(tmp_path / "siamese.keras")
    encoder.save(tmp_path / "trained.keras")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_keras_encoder(tmp_path / "siamese.keras", SentenceEncoder)
        load_keras_encoder(tmp_path / "trained.keras", SentenceEncoder)
    assert [str(w.message) for w in caught] == []
    # `compile=True` restores the training state: the optimizer's step count comes back, and with
    # Keras' own loader too, without a warning for the untrained optimizer of the encoder inside.
    assert int(load_keras_file(tmp_path / "siamese.keras", compile=True).optimizer.iterations) == 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        restored = keras.saving.load_model(tmp_path / "siamese.keras")
    assert [str(w.message) for w in caught] == []
    assert int(restored.optimizer.iterations) == 1 and restored.optimizer.built
    assert not restored.encoder.optimizer.built
