"""Nothing breaks for users: public names, registered names, the console script; one set of module paths.

Before the package was grouped into subpackages, every module sat directly
under `sbert_keras`. Those module paths are not importable any more, but
what users and saved files rely on is written down here once, so that a
later change cannot move it along with the code:

- `sbert_keras.__all__` is what a user calls, and every name resolves;
  the building blocks that left it are imported from their module;
- `sbert-keras --help` runs;
- every Keras object keeps its registered name, so saved files still load
  (`tests/project/test_saved_models.py` loads files written under the old
  module paths, after a plain `import sbert_keras`).
"""

import importlib
import inspect
import json
import os
import pathlib
import subprocess
import sys

import keras
import pytest

import sbert_keras
from harness import cli_env

# What a user calls: the names of `sbert_keras.__all__` (docs/architecture.md, "The top level").
PUBLIC = (
    "AnglELoss BatchHardTripletLoss BatchHardTripletModel CachedContrastiveSiamese ClassificationSiamese "
    "CoSENTLoss ContrastiveSiamese CorruptModelError DistillationModel EmbeddingIndex EvaluationCallback "
    "InBatchNegativesLoss MSEDistillationLoss MatryoshkaLoss NonFiniteLossError OnlineContrastiveLoss "
    "PresetUnavailableError RegressionSiamese SentenceEncoder SentenceEncoderPreprocessor "
    "SymmetricInBatchNegativesLoss TripletLoss TripletSiamese binary_classification_evaluation cluster "
    "community_detection export_saved_model information_retrieval_evaluation mine_hard_negatives "
    "nli_evaluation paraphrase_mining paraphrase_mining_evaluation paraphrase_mining_texts quantize_embeddings "
    "semantic_search set_compute similarity_matrix sts_evaluation train_objective transfer_evaluation "
    "triplet_evaluation __version__"
).split()

# The building blocks that were public names before, and the module each is imported from.
OFF_THE_TOP_LEVEL = {
    "BertLayoutBackbone": "model.backbone",
    "MaskedPooling": "model.pooling",
    "CosineSimilarity": "model.similarity",
    "PairFeatures": "model.similarity",
    "SimilarityMatrix": "model.similarity",
    "TripletDistances": "model.similarity",
    "set_precision": "model.precision",
    "SiamesePreprocessor": "training.siamese_preprocessor",
    "MatryoshkaPrefixes": "losses.matryoshka",
    "WarmupLinearDecay": "training.schedules",
    "paper_optimizer": "training.schedules",
    "write_triplets_csv": "training.hard_negatives",
    "read_beir": "evaluation.retrieval_evaluation",
    "LabelRangeError": "training.fit_checks",
    "IncompleteOutputError": "utils.atomic_io",
}

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


def test_the_public_names_are_what_a_user_calls_and_all_resolve():
    assert sorted(sbert_keras.__all__) == sorted(PUBLIC)
    unresolved = [name for name in sbert_keras.__all__ if getattr(sbert_keras, name, None) is None]
    assert not unresolved
    namespace = {}
    exec("from sbert_keras import *", namespace)
    assert set(sbert_keras.__all__) <= set(namespace)


@pytest.mark.parametrize("name", sorted(OFF_THE_TOP_LEVEL))
def test_a_building_block_is_imported_from_its_module(name):
    assert not hasattr(sbert_keras, name)
    assert getattr(importlib.import_module(f"sbert_keras.{OFF_THE_TOP_LEVEL[name]}"), name).__name__ == name


def _keras_classes():
    """`{name: class}` of every Keras layer, loss and schedule among the public names and the building blocks."""
    values = {name: getattr(sbert_keras, name) for name in sbert_keras.__all__}
    values |= {n: getattr(importlib.import_module(f"sbert_keras.{m}"), n) for n, m in OFF_THE_TOP_LEVEL.items()}
    kinds = (keras.layers.Layer, keras.losses.Loss, keras.optimizers.schedules.LearningRateSchedule)
    return {name: v for name, v in values.items() if inspect.isclass(v) and issubclass(v, kinds)}


def test_registered_keras_names_are_unchanged():
    assert sbert_keras.SentenceEncoder  # its first access imports (and so registers) everything
    registered = {name for name in keras.saving.get_custom_objects() if name.startswith("sbert_keras>")}
    assert {f"sbert_keras>{name}" for name in OLD_REGISTERED} <= registered
    for name, value in _keras_classes().items():
        expected = PUBLIC_CLASS_NAMES_ELSEWHERE.get(name, f"sbert_keras>{name}")
        assert keras.saving.get_registered_name(value) == expected, name


# A fresh process: after a plain import, in either order, every old registered name is there.
_FRESH_REGISTERED = """
import json
{imports}
print(json.dumps(sorted(n for n in keras.saving.get_custom_objects() if n.startswith("sbert_keras>"))))
"""


@pytest.mark.parametrize("imports", ["import sbert_keras\nimport keras", "import keras\nimport sbert_keras"])
def test_every_keras_object_is_registered_after_a_plain_import(imports):
    code = _FRESH_REGISTERED.format(imports=imports)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    registered = set(json.loads(done.stdout.strip().splitlines()[-1]))
    missing = {f"sbert_keras>{name}" for name in OLD_REGISTERED} - registered
    assert not missing


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
