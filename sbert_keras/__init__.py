"""sbert_keras: Sentence-BERT for Keras 3 and KerasHub.

The public names below are imported lazily (PEP 562 `__getattr__`): `import
sbert_keras` alone does not import TensorFlow, so an entry point such as
`sbert-keras` (`sbert_keras.cli:main`) can set TensorFlow's logging
environment first (`sbert_keras.utils.console`). The first access of any public
name imports every module below, as an eager `__init__` would, so all
custom Keras objects are registered for `keras.saving.load_model`
(`sbert_keras.retrieval.index` imports without faiss, its optional dependency: faiss
is needed only to build or load an `EmbeddingIndex`). When Keras is already
imported (`import keras` before `import sbert_keras`), everything is
imported at once. Otherwise touch any public name (e.g.
`sbert_keras.SentenceEncoder`) before `keras.saving.load_model` of a file
holding sbert_keras objects.

Example:
```python
import sbert_keras
encoder = sbert_keras.SentenceEncoder.from_preset("path/to/all-MiniLM-L6-v2")
```
"""

import importlib
import os
import sys


def _check_backend():
    """sbert_keras runs on Keras' TensorFlow backend only; say so instead of failing later.

    Its tokenisers are tf.text ops inside tf.data and the graph, and it
    exports TensorFlow SavedModels. With Keras not yet imported and no
    `KERAS_BACKEND` set, the backend is set to TensorFlow (documented in the
    README); any other backend, set or already imported, is a clear error.
    """
    if "keras" in sys.modules:
        backend = sys.modules["keras"].backend.backend()
    else:
        backend = os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    if backend != "tensorflow":
        raise ImportError(
            f"sbert_keras needs Keras' TensorFlow backend (tf.text tokenisers, TF SavedModel export); "
            f"Keras' backend is {backend!r}. Set KERAS_BACKEND=tensorflow before Keras is first imported."
        )


_check_backend()

__version__ = "0.1.0"

from sbert_keras.utils import module_paths  # noqa: E402 (after the backend check)

module_paths.install(__name__)

# Public name -> the module that defines it.
_EXPORTS = {
    "BertLayoutBackbone": "model.backbone",
    "SentenceEncoder": "encoder",
    "CorruptModelError": "checkpoints.keras_files",
    "PresetUnavailableError": "checkpoints.presets",
    "IncompleteOutputError": "utils.atomic_io",
    "EvaluationCallback": "evaluation.evaluators",
    "nli_evaluation": "evaluation.evaluators",
    "sts_evaluation": "evaluation.evaluators",
    "transfer_evaluation": "evaluation.evaluators",
    "triplet_evaluation": "evaluation.evaluators",
    "export_saved_model": "runtime.export",
    "CachedContrastiveSiamese": "training.cached_siamese",
    "mine_hard_negatives": "training.hard_negatives",
    "write_triplets_csv": "training.hard_negatives",
    "EmbeddingIndex": "retrieval.index",
    "MaskedPooling": "model.pooling",
    "binary_classification_evaluation": "evaluation.pair_evaluation",
    "paraphrase_mining_evaluation": "evaluation.pair_evaluation",
    "information_retrieval_evaluation": "evaluation.retrieval_evaluation",
    "read_beir": "evaluation.retrieval_evaluation",
    "InBatchNegativesLoss": "losses.in_batch",
    "TripletLoss": "losses.triplet",
    "AnglELoss": "losses.pair_scores",
    "BatchHardTripletLoss": "losses.triplet",
    "CoSENTLoss": "losses.pair_scores",
    "MSEDistillationLoss": "losses.distillation",
    "OnlineContrastiveLoss": "losses.pair_scores",
    "SymmetricInBatchNegativesLoss": "losses.in_batch",
    "MatryoshkaLoss": "losses.matryoshka",
    "MatryoshkaPrefixes": "losses.matryoshka",
    "SentenceEncoderPreprocessor": "model.preprocessor",
    "cluster": "retrieval.clustering",
    "community_detection": "retrieval.clustering",
    "paraphrase_mining": "retrieval.semantic_search",
    "paraphrase_mining_texts": "retrieval.semantic_search",
    "semantic_search": "retrieval.semantic_search",
    "ClassificationSiamese": "training.siamese",
    "ContrastiveSiamese": "training.siamese",
    "RegressionSiamese": "training.siamese",
    "SiamesePreprocessor": "training.siamese",
    "TripletSiamese": "training.siamese",
    "LabelRangeError": "training.fit_checks",
    "NonFiniteLossError": "training.fit_checks",
    "BatchHardTripletModel": "training.single_text_models",
    "DistillationModel": "training.single_text_models",
    "CosineSimilarity": "model.similarity",
    "PairFeatures": "model.similarity",
    "SimilarityMatrix": "model.similarity",
    "TripletDistances": "model.similarity",
    "set_precision": "model.precision",
    "WarmupLinearDecay": "training.schedules",
    "paper_optimizer": "training.schedules",
    "train_objective": "training.trainer",
}

__all__ = sorted(_EXPORTS) + ["__version__"]  # noqa: PLE0605 (a list)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'sbert_keras' has no attribute {name!r}")
    for module in dict.fromkeys(_EXPORTS.values()):  # all, so every class registers
        module = importlib.import_module(f"sbert_keras.{module}")
        globals().update({k: getattr(module, k) for k, m in _EXPORTS.items() if f"sbert_keras.{m}" == module.__name__})
    return globals()[name]


def _import_all():
    """Imports every module of `_EXPORTS`, binding the public names here."""
    return __getattr__(next(iter(_EXPORTS)))


if "keras" in sys.modules or "tensorflow" in sys.modules:
    # TensorFlow's logging is already set up, so the lazy import gains
    # nothing; importing now registers every custom Keras object, so a plain
    # `keras.saving.load_model(...)` after `import keras, sbert_keras` works.
    _import_all()


def __dir__():
    return sorted(set(globals()) | set(__all__))
