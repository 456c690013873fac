"""The module paths of earlier releases, kept importable.

Until the package was grouped into subpackages, every module sat directly
under `sbert_keras` (`sbert_keras.inference`, `sbert_keras.search`, ...).
Code and notebooks that import those paths keep working: `MOVED` maps each
old path to the module that now holds its code, and `install` adds a finder
to `sys.meta_path` that answers an import of an old path with that module
itself, so `sbert_keras.search is sbert_keras.retrieval.semantic_search`
(the same object: a monkeypatch or an `isinstance` through either path sees
the other). The old names that became subpackages (`sbert_keras.data`,
`losses`, `training`, `evaluation`, `checkpoints`, `cli`) re-export the old
module's public names from their `__init__`, as sentence-transformers did
when `util.py` became `util/`.

Written by hand because the standard library has no module alias: a
`sys.modules` entry set ahead of time would import every module, TensorFlow
included, at `import sbert_keras`.
"""

import importlib
import importlib.abc
import importlib.util
import sys

MOVED = {
    "backbone": "model.backbone",
    "backup": "training.backup",
    "batching": "runtime.batching",
    "beam": "integrations.beam",
    "cached_siamese": "training.cached_siamese",
    "checks": "utils.checks",
    "cli_commands": "cli.commands",
    "cli_train": "cli.train",
    "clustering": "retrieval.clustering",
    "cold_start": "runtime.cold_start",
    "console": "utils.console",
    "corpus_input": "data.corpus",
    "defaults": "utils.defaults",
    "demo": "cli.demo",
    "disk_space": "utils.disk_space",
    "distributed": "training.distributed",
    "embedding_models": "training.single_text_models",
    "embedding_shards": "data.embedding_shards",
    "examples": "cli.notebook_setup",
    "export": "runtime.export",
    "fit_checks": "training.fit_checks",
    "fused": "runtime.fused_graph",
    "hard_negatives": "training.hard_negatives",
    "hf_tokenizer": "checkpoints.tokenizer_json",
    "index": "retrieval.index",
    "index_files": "retrieval.index_files",
    "inference": "runtime.engine",
    "int8": "runtime.kernels.onednn_int8",
    "int8_quantize": "runtime.kernels.int8_quantization",
    "keras_files": "checkpoints.keras_files",
    "kerashub_adapter": "compat.keras_hub",
    "layers": "model.pooling",
    "losses_modern": "losses",
    "matryoshka": "losses.matryoshka",
    "model_config": "model.backbone_config",
    "model_files": "utils.model_files",
    "objectives": "training.objectives",
    "onednn": "runtime.kernels.onednn_layer_norm",
    "output_lock": "utils.output_lock",
    "outputs": "utils.atomic_io",
    "pair_evaluation": "evaluation.pair_evaluation",
    "pipelines": "training.pipelines",
    "precision": "model.precision",
    "preprocessor": "model.preprocessor",
    "prompts": "model.prompts",
    "records": "data.examples",
    "replicas": "losses.replicas",
    "retrieval_evaluation": "evaluation.retrieval_evaluation",
    "schedules": "training.schedules",
    "scores": "retrieval.scores",
    "search": "retrieval.semantic_search",
    "siamese": "training.siamese",
    "siamese_preprocessor": "training.siamese_preprocessor",
    "similarity": "model.similarity",
    "small_query": "runtime.routes.xla_query",
    "st_modules": "checkpoints.st_modules",
    "weight_writes": "runtime.weight_writes",
    "xnnpack": "runtime.routes.xnnpack_int8",
}


class _AliasLoader(importlib.abc.Loader):
    """Loads an old path as the module that now holds its code."""

    def __init__(self, target):
        self.target = target

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module):
        module.__spec__ = self._spec  # the import system set the alias's spec; keep the module's own


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds `PACKAGE.<old name>` for each old name of `MOVED`.

    Args:
        package: str. The package name (`"sbert_keras"`).
        moved: dict. Old module name -> its path now, relative to the package.
    """

    def __init__(self, package, moved):
        self.package = package
        self.moved = moved

    def find_spec(self, fullname, path=None, target=None):
        parent, _, name = fullname.rpartition(".")
        if parent != self.package or name not in self.moved:
            return None
        target = f"{self.package}.{self.moved[name]}"
        return importlib.util.spec_from_loader(fullname, _AliasLoader(target))


def install(package):
    """Adds the finder of `MOVED` for `package` to `sys.meta_path`, once."""
    if not any(isinstance(f, MovedModuleFinder) and f.package == package for f in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder(package, MOVED))
