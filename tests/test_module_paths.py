"""Nothing breaks for users: public names, registered names, the console script; one set of module paths.

Before the package was grouped into subpackages, every module sat directly
under `sbert_keras`. Those module paths are not importable any more, but
what users and saved files rely on is written down here once, so that a
later change cannot move it along with the code:

- every name of `sbert_keras.__all__` resolves, and none of the old ones
  is gone;
- `sbert-keras --help` runs;
- every Keras object keeps its registered name, so saved files still load
  (`tests/test_saved_models.py` loads files written under the old module
  paths, after a plain `import sbert_keras`).
"""

import importlib
import inspect
import os
import pathlib
import subprocess
import sys

import keras
import pytest

import sbert_keras
from harness import cli_env

OLD_ALL = (
    "AnglELoss BatchHardTripletLoss BatchHardTripletModel BertLayoutBackbone CachedContrastiveSiamese "
    "ClassificationSiamese CoSENTLoss ContrastiveSiamese CorruptModelError CosineSimilarity DistillationModel "
    "EmbeddingIndex EvaluationCallback InBatchNegativesLoss IncompleteOutputError LabelRangeError "
    "MSEDistillationLoss MaskedPooling MatryoshkaLoss MatryoshkaPrefixes NonFiniteLossError "
    "OnlineContrastiveLoss PairFeatures PresetUnavailableError RegressionSiamese SentenceEncoder "
    "SentenceEncoderPreprocessor SiamesePreprocessor SimilarityMatrix SymmetricInBatchNegativesLoss "
    "TripletDistances TripletLoss TripletSiamese WarmupLinearDecay binary_classification_evaluation cluster "
    "community_detection export_saved_model information_retrieval_evaluation mine_hard_negatives "
    "nli_evaluation paper_optimizer paraphrase_mining paraphrase_mining_evaluation paraphrase_mining_texts "
    "read_beir semantic_search set_precision sts_evaluation train_objective transfer_evaluation "
    "triplet_evaluation write_triplets_csv __version__"
).split()

# Every `sbert_keras>` name of `keras.saving.get_custom_objects()` in the flat layout.
OLD_REGISTERED = (
    "AnglELoss BatchHardTripletLoss BatchHardTripletModel BertLayoutBackbone CachedContrastiveSiamese "
    "ClassificationSiamese CoSENTLoss ContrastiveSiamese CosineSimilarity DistillationModel InBatchNegativesLoss "
    "LowercasingBertTokenizer MaskedPooling MatryoshkaLoss MatryoshkaPrefixes OnlineContrastiveLoss PairFeatures "
    "RegressionSiamese ReplicaGather ReplicaScaledLoss SentenceEncoder SentenceEncoderPreprocessor "
    "SiamesePreprocessor SimilarityMatrix SymmetricInBatchNegativesLoss TripletDistances TripletLoss "
    "TripletSiamese WarmupLinearDecay"
).split()

# `MSEDistillationLoss` is Keras's own `MeanSquaredError` under its role's name.
PUBLIC_CLASS_NAMES_ELSEWHERE = {"MSEDistillationLoss": "MeanSquaredError"}


@pytest.mark.parametrize("old", ["inference", "search", "losses_modern", "siamese", "examples"])
def test_a_module_path_of_the_flat_layout_is_not_importable(old):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"sbert_keras.{old}")


def test_every_public_name_resolves_and_none_is_gone():
    assert not set(OLD_ALL) - set(sbert_keras.__all__), "public names removed"
    unresolved = [name for name in sbert_keras.__all__ if getattr(sbert_keras, name, None) is None]
    assert not unresolved
    namespace = {}
    exec("from sbert_keras import *", namespace)
    assert set(sbert_keras.__all__) <= set(namespace)


def test_registered_keras_names_are_unchanged():
    assert sbert_keras.SentenceEncoder  # its first access imports (and so registers) everything
    registered = {name for name in keras.saving.get_custom_objects() if name.startswith("sbert_keras>")}
    assert {f"sbert_keras>{name}" for name in OLD_REGISTERED} <= registered
    for name in sbert_keras.__all__:
        value = getattr(sbert_keras, name)
        if inspect.isclass(value) and issubclass(value, (keras.layers.Layer, keras.losses.Loss)):
            expected = PUBLIC_CLASS_NAMES_ELSEWHERE.get(name, f"sbert_keras>{name}")
            assert keras.saving.get_registered_name(value) == expected, name
    assert keras.saving.get_registered_name(sbert_keras.WarmupLinearDecay) == "sbert_keras>WarmupLinearDecay"


def _help(argv):
    done = subprocess.run(argv, capture_output=True, text=True, env=cli_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage: sbert-keras" in done.stdout
    for command in ("train", "encode", "evaluate", "search", "export"):
        assert command in done.stdout
    return done


def test_the_command_line_runs_as_a_module():
    _help([sys.executable, "-m", "sbert_keras.cli", "--help"])


def test_the_console_script_runs():
    script = pathlib.Path(sys.executable).with_name("sbert-keras")
    if not os.access(script, os.X_OK):
        pytest.skip(f"no console script beside {sys.executable} (the package is not installed there)")
    _help([str(script), "--help"])
