"""sbert_keras: Sentence-BERT for Keras 3 and KerasHub.

The public names below are imported lazily (PEP 562 `__getattr__`): `import
sbert_keras` alone does not import TensorFlow, so an entry point such as
`sbert-keras` (`sbert_keras.cli:main`) can set TensorFlow's logging
environment first (`sbert_keras.console`). The first access of any public
name imports every module below, as an eager `__init__` would, so all
custom Keras objects are registered for `keras.saving.load_model`
(`sbert_keras.index` imports without faiss, its optional dependency: faiss
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

# Public name -> the module that defines it.
_EXPORTS = {
    "BertLayoutBackbone": "backbone",
    "SentenceEncoder": "encoder",
    "CorruptModelError": "keras_files",
    "PresetUnavailableError": "checkpoints",
    "IncompleteOutputError": "outputs",
    "EvaluationCallback": "evaluation",
    "nli_evaluation": "evaluation",
    "sts_evaluation": "evaluation",
    "transfer_evaluation": "evaluation",
    "triplet_evaluation": "evaluation",
    "export_saved_model": "export",
    "CachedContrastiveSiamese": "cached_siamese",
    "mine_hard_negatives": "hard_negatives",
    "write_triplets_csv": "hard_negatives",
    "EmbeddingIndex": "index",
    "MaskedPooling": "layers",
    "binary_classification_evaluation": "pair_evaluation",
    "paraphrase_mining_evaluation": "pair_evaluation",
    "information_retrieval_evaluation": "retrieval_evaluation",
    "read_beir": "retrieval_evaluation",
    "InBatchNegativesLoss": "losses",
    "TripletLoss": "losses",
    "AnglELoss": "losses_modern",
    "BatchHardTripletLoss": "losses_modern",
    "CoSENTLoss": "losses_modern",
    "MSEDistillationLoss": "losses_modern",
    "OnlineContrastiveLoss": "losses_modern",
    "SymmetricInBatchNegativesLoss": "losses_modern",
    "MatryoshkaLoss": "matryoshka",
    "MatryoshkaPrefixes": "matryoshka",
    "SentenceEncoderPreprocessor": "preprocessor",
    "cluster": "clustering",
    "community_detection": "clustering",
    "paraphrase_mining": "search",
    "paraphrase_mining_texts": "search",
    "semantic_search": "search",
    "ClassificationSiamese": "siamese",
    "ContrastiveSiamese": "siamese",
    "RegressionSiamese": "siamese",
    "SiamesePreprocessor": "siamese",
    "TripletSiamese": "siamese",
    "LabelRangeError": "fit_checks",
    "NonFiniteLossError": "fit_checks",
    "BatchHardTripletModel": "embedding_models",
    "DistillationModel": "embedding_models",
    "CosineSimilarity": "similarity",
    "PairFeatures": "similarity",
    "SimilarityMatrix": "similarity",
    "TripletDistances": "similarity",
    "set_precision": "precision",
    "WarmupLinearDecay": "schedules",
    "paper_optimizer": "schedules",
    "train_objective": "training",
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
