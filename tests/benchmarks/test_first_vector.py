"""benchmarks/first_vector.py: the base-shaped folder it builds loads, and one measurement runs."""

import sys

import pytest

import sbert_keras
from conftest import ROOT
from conftest import minilm_path

sys.path.insert(0, str(ROOT / "benchmarks"))
import first_vector  # noqa: E402


def test_base_shape_folder_loads_with_the_base_width(tmp_path):
    folder = first_vector.base_shape_folder(minilm_path(), tmp_path / "base", num_layers=1)
    encoder = sbert_keras.SentenceEncoder.from_preset(str(folder))
    assert encoder.backbone.num_layers == 1
    assert encoder.encode(["A man is playing a guitar."]).shape == (1, 768)


@pytest.mark.large
def test_measure_times_every_call():
    times = first_vector.measure(str(minilm_path()))
    assert set(times) == {"load_s", "peak_rss_mb"} | {name for name, _ in first_vector.CALLS}
    assert all(value > 0 for value in times.values())
