"""Nothing breaks for users: old module paths, old public names, the console script, registered names.

Before the package was grouped into subpackages, every module sat directly
under `sbert_keras`. The lists below are those of that layout, written
down once so that a later change cannot move them along with the code:

- every old module path imports the very module object that now holds its
  code (`sbert_keras.utils.module_paths.MOVED`), through `import` and
  `from sbert_keras import <old>` alike, as sentence-transformers checked
  when `util.py` became `util/`;
- the six old modules that became subpackages keep their public names;
- every name of `sbert_keras.__all__` resolves, and none of the old ones
  is gone;
- `sbert-keras --help` runs;
- every Keras object keeps its registered name, so saved files still load
  (`tests/project/test_saved_models.py` loads the files themselves).
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
from sbert_keras.utils.module_paths import MOVED

# Every module of the flat layout, `__init__`, `encoder` and `encoding` aside (those did not move).
OLD_MODULES = (
    "backbone backup batching beam cached_siamese checkpoints checks cli cli_commands cli_train clustering "
    "cold_start console corpus_input data defaults demo disk_space distributed embedding_models "
    "embedding_shards evaluation examples export fit_checks fused hard_negatives hf_tokenizer index "
    "index_files inference int8 int8_quantize keras_files kerashub_adapter layers losses losses_modern "
    "matryoshka model_config model_files objectives onednn output_lock outputs pair_evaluation pipelines "
    "precision preprocessor prompts records replicas retrieval_evaluation schedules scores search siamese "
    "siamese_preprocessor similarity small_query st_modules training weight_writes xnnpack"
).split()

# The old modules that are subpackages now, with their public names then: the names each
# defined, and the ones it re-exported as "public here too".
OLD_PUBLIC_NAMES = {
    "data": (
        "LABELLED_PAIR_HEADERS LABELLED_SENTENCE_HEADERS TRIPLET_HEADERS iter_csv_columns iter_text_lines "
        "load_tfds_stsb logger read_labelled_pairs_csv read_labelled_sentences_csv read_nli read_sentences "
        "read_sts read_triplets_csv STS_MAPPINGS STS_SCORE_MAX nli_to_pairs nli_to_triplets scale_sts_score "
        "unique_sentences unscale_sts_score"
    ),
    "losses": (
        "ImpliedTargetLoss InBatchNegativesLoss TripletLoss in_batch_negatives_loss triplet_loss triplet_settings"
    ),
    "training": (
        "SET_VALUED_KEYS canonical_config check_hyperparameters check_positive_int data_hash dev_callback "
        "run_fingerprint seed_everything train_objective DEFAULT_SAVE_STEPS MODEL_CLASSES set_precision "
        "WarmupLinearDecay"
    ),
    "evaluation": (
        "EvaluationCallback PRIMARY_METRIC nli_confusion_matrix nli_evaluation sts_evaluation "
        "transfer_evaluation triplet_evaluation"
    ),
    "checkpoints": (
        "BERT_TYPES PresetUnavailableError ROBERTA_POSITION_OFFSET ROBERTA_TYPES SENTENCEPIECE_TYPES "
        "is_transformers_folder load_keras_hub_preset load_preset load_safetensors load_transformers_folder "
        "port_weights LowercasingBertTokenizer CorruptModelError load_keras_file read_sentence_transformers_settings"
    ),
    "cli": (
        "EMBED_CORPUS_HELP EXPECTED_ERRORS MINING_FLAGS add_prompt_flags build_parser dimensions "
        "embed_corpus_args error_message main non_negative_float non_negative_int positive_int "
        "training_precision"
    ),
}

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


def test_moved_covers_every_old_module():
    subpackages = set(OLD_PUBLIC_NAMES)
    assert len(OLD_MODULES) == 64
    assert not subpackages & set(MOVED), "an old module that is a subpackage now keeps its own path"
    assert sorted(set(MOVED) | subpackages) == sorted(OLD_MODULES)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_path_is_the_new_module(old):
    new = importlib.import_module(f"sbert_keras.{MOVED[old]}")
    assert importlib.import_module(f"sbert_keras.{old}") is new
    assert sys.modules[f"sbert_keras.{old}"] is new
    namespace = {}
    exec(f"from sbert_keras import {old} as module", namespace)  # the spelling of user code
    assert namespace["module"] is new
    assert new.__spec__.name == new.__name__ == f"sbert_keras.{MOVED[old]}"


FRESH_PROCESS = """
import importlib, sys
from sbert_keras.utils.module_paths import MOVED
assert "keras" not in sys.modules
for old, new in sorted(MOVED.items()):
    module = importlib.import_module("sbert_keras." + old)  # the old path first
    assert module is importlib.import_module("sbert_keras." + new), old
from sbert_keras.search import semantic_search
from sbert_keras.retrieval.semantic_search import semantic_search as same
assert semantic_search is same
print("ok")
"""


def test_old_module_paths_work_first_in_a_fresh_process():
    done = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS], capture_output=True, text=True, env=cli_env(), timeout=300
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


@pytest.mark.parametrize("subpackage", sorted(OLD_PUBLIC_NAMES))
def test_an_old_module_that_became_a_subpackage_keeps_its_public_names(subpackage):
    module = importlib.import_module(f"sbert_keras.{subpackage}")
    assert module.__spec__.submodule_search_locations, "a subpackage now"
    missing = [name for name in OLD_PUBLIC_NAMES[subpackage].split() if not hasattr(module, name)]
    assert not missing, f"sbert_keras.{subpackage} no longer offers {missing}"


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
