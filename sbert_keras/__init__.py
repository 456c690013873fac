"""sbert_keras: Sentence-BERT for Keras 3 and KerasHub.

The public names below are imported lazily (PEP 562 `__getattr__`): `import
sbert_keras` alone does not import TensorFlow, so an entry point such as
`sbert-keras` (`sbert_keras.cli.parser:main`) can set TensorFlow's logging
environment first (`sbert_keras.utils.console`); when one of its modules is
what imports TensorFlow, TensorFlow's start-up log lines are kept off the
console (`sbert_keras.utils.tf_startup`). Every custom Keras object
is registered all the same for `keras.saving.load_model`, whichever of
`keras` and `sbert_keras` is imported first: with Keras (or TensorFlow)
already imported, `import sbert_keras` imports every module at once;
otherwise the first import of Keras does (`utils.import_hooks`), as does
the first access of any public name. `sbert_keras.retrieval.index`
imports without faiss, its optional dependency: faiss is needed only to
build or load an `EmbeddingIndex`.

Example:
```python
import keras
import sbert_keras

encoder = sbert_keras.SentenceEncoder.from_preset("path/to/all-MiniLM-L6-v2")
encoder.save("encoder.keras")
same = keras.saving.load_model("encoder.keras")  # in a fresh process too
```
"""

import functools
import importlib
import os
import sys

from sbert_keras.utils import backends


def _set_default_backend():
    """With Keras not yet imported and no `KERAS_BACKEND` set, picks TensorFlow if installed, else JAX, else torch.

    Keras' own default is TensorFlow, which a TensorFlow-less install
    (`pip install "sbert_keras[jax]"`) lacks. Any backend the user set, or
    an already imported Keras, is left as it is (`docs/backends.md`).
    """
    if "keras" not in sys.modules:
        os.environ.setdefault("KERAS_BACKEND", backends.default_backend())


_set_default_backend()

__version__ = "0.1.0"

from sbert_keras.utils import import_hooks  # noqa: E402 (after the backend is set)
from sbert_keras.utils import tf_startup  # noqa: E402

# When a module of this package is what imports TensorFlow first, its start-up log
# lines are held and XLA's disk cache is set (`utils.tf_startup`); a user's own
# `import tensorflow` is left alone.
import_hooks.import_inside(
    "tensorflow",
    tf_startup.importing_tensorflow,
    lambda: import_hooks.importing(__name__, submodules_only=True),
)

# Public name -> the module that defines it: what a user calls in a normal
# workflow (docs/architecture.md, "The top level"). Building blocks (layers,
# preprocessors, schedules, writers, internal errors) are imported from their
# module, `sbert_keras.model.backbone.BertLayoutBackbone` and the like.
_EXPORTS = {
    # The encoder, and the preprocessor it is built from by hand.
    "SentenceEncoder": "encoder",
    "SentenceEncoderPreprocessor": "model.preprocessor",
    # Training: the run, its siamese and single-text models, and the losses passed to them.
    "train_objective": "training.trainer",
    "RegressionSiamese": "training.siamese",
    "ClassificationSiamese": "training.siamese",
    "TripletSiamese": "training.siamese",
    "ContrastiveSiamese": "training.siamese",
    "CachedContrastiveSiamese": "training.cached_siamese",
    "BatchHardTripletModel": "training.single_text_models",
    "DistillationModel": "training.single_text_models",
    "TripletLoss": "losses.triplet",
    "BatchHardTripletLoss": "losses.triplet",
    "InBatchNegativesLoss": "losses.in_batch",
    "SymmetricInBatchNegativesLoss": "losses.in_batch",
    "CoSENTLoss": "losses.pair_scores",
    "AnglELoss": "losses.pair_scores",
    "OnlineContrastiveLoss": "losses.pair_scores",
    "MSEDistillationLoss": "losses.distillation",
    "MatryoshkaLoss": "losses.matryoshka",
    "mine_hard_negatives": "training.hard_negatives",
    # Evaluation.
    "EvaluationCallback": "evaluation.evaluators",
    "sts_evaluation": "evaluation.evaluators",
    "triplet_evaluation": "evaluation.evaluators",
    "nli_evaluation": "evaluation.evaluators",
    "transfer_evaluation": "evaluation.evaluators",
    "binary_classification_evaluation": "evaluation.pair_evaluation",
    "paraphrase_mining_evaluation": "evaluation.pair_evaluation",
    "information_retrieval_evaluation": "evaluation.retrieval_evaluation",
    # Search, mining, clustering and the index, on embeddings.
    "semantic_search": "retrieval.semantic_search",
    "paraphrase_mining": "retrieval.semantic_search",
    "paraphrase_mining_texts": "retrieval.semantic_search",
    "community_detection": "retrieval.clustering",
    "cluster": "retrieval.clustering",
    "similarity_matrix": "retrieval.scores",
    "quantize_embeddings": "retrieval.quantization",
    "EmbeddingIndex": "retrieval.index",
    # Serving and the compute path.
    "export_saved_model": "runtime.export",
    "set_compute": "model.precision",
    # The errors the documentation tells a user to catch.
    "PresetUnavailableError": "checkpoints.presets",
    "CorruptModelError": "checkpoints.keras_files",
    "NonFiniteLossError": "training.fit_checks",
}

__all__ = sorted(_EXPORTS) + ["__version__"]  # noqa: PLE0605 (a list)

# Every module that registers a Keras object (`package="sbert_keras"`). They are
# imported with the public names, so that `keras.saving.load_model` finds every
# class whether or not it is a public name here (`tests/project/test_imports.py` keeps
# this list whole).
_KERAS_OBJECT_MODULES = (
    "checkpoints.tokenizer_json",
    "encoder",
    "losses.in_batch",
    "losses.matryoshka",
    "losses.pair_scores",
    "losses.replicas",
    "losses.triplet",
    "model.backbone",
    "model.bpe_tokenizer",
    "model.mpnet_backbone",
    "model.mpnet_layers",
    "model.pooling",
    "model.preprocessor",
    "model.sentencepiece_tokenizer",
    "model.similarity",
    "training.cached_siamese",
    "training.schedules",
    "training.siamese",
    "training.siamese_preprocessor",
    "training.single_text_models",
)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'sbert_keras' has no attribute {name!r}")
    for module in dict.fromkeys((*_KERAS_OBJECT_MODULES, *_EXPORTS.values())):  # all, so every class registers
        module = importlib.import_module(f"sbert_keras.{module}")
        globals().update({k: getattr(module, k) for k, m in _EXPORTS.items() if f"sbert_keras.{m}" == module.__name__})
    tf_startup.list_devices()  # the cuInit line, held (`utils.tf_startup`)
    return globals()[name]


def _import_all():
    """Imports every module of `_KERAS_OBJECT_MODULES` and `_EXPORTS`, binding the public names here."""
    return __getattr__(next(iter(_EXPORTS)))


# The libraries whose first import imports Keras, each watched so that the
# last of them to finish importing registers this package's objects.
_KERAS_IMPORTERS = ("keras", "keras_hub", "tensorflow", "tensorflow_text")


def _register_keras_objects(imported):
    """Imports every module once `imported` has been imported, if nothing half-built stands in the way.

    These libraries import each other, and the modules of one still being
    imported are half-built: the hook of the last one to finish does the
    work. A module of this package imported first (`from
    sbert_keras.encoder import SentenceEncoder` in a fresh process) leaves
    the rest to the first public name accessed.
    """
    others = [name for name in _KERAS_IMPORTERS if name != imported]
    if import_hooks.importing(__name__, submodules_only=True) or any(map(import_hooks.importing, others)):
        return
    _import_all()


for _library in _KERAS_IMPORTERS:
    import_hooks.call_after_import(_library, functools.partial(_register_keras_objects, _library))


def __dir__():
    return sorted(set(globals()) | set(__all__))
