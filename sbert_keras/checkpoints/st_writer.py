"""`save_sentence_transformers`: a `SentenceEncoder` as a sentence-transformers 6 folder.

The folder holds what sentence-transformers 6.2 itself writes, so that
`SentenceTransformer(folder)`, `transformers.AutoModel` /
`AutoTokenizer` and `SentenceEncoder.from_preset(folder)` all load it:

- the Transformer module at the root: `config.json` and `model.safetensors`
  with Hugging Face's names (from the family's weight table, the one the
  loader reads; `metadata={"format": "pt"}` as transformers expects), the
  tokenizer files (`tokenizer.json`, the separate vocabulary files,
  `tokenizer_config.json`) and `sentence_bert_config.json` (maximum length,
  no extra lowercasing: the tokenizer's own lowercasing is in its files);
- `1_Pooling/config.json`, one `k_Dense/` per projection (`config.json`,
  `model.safetensors` with `linear.weight` / `linear.bias`), `k_Normalize/`;
- `modules.json`, `config_sentence_transformers.json` (prompts, default
  prompt, cosine similarity) and a `README.md` model card
  (`checkpoints.model_card`).

It is written like every sbert_keras output (`utils.atomic_io.write_dir`):
built in `<folder>.partial`, given `complete.json`, then renamed. What a
folder cannot represent is refused before anything is written, naming it:
Keras-quantized layers, a backbone or tokenizer no family writes (a custom
backbone), a projection activation sentence-transformers has no module for.

Example:
```python
save_sentence_transformers(encoder, "my-model", base_model="sentence-transformers/all-MiniLM-L6-v2")
SentenceTransformer("my-model").encode(["A man is playing a guitar."])
```
"""

import importlib.metadata
import json
import os

import keras
import numpy as np
from safetensors.numpy import save_file

from sbert_keras.checkpoints.families.registry import family_for_encoder
from sbert_keras.checkpoints.model_card import model_card
from sbert_keras.checkpoints.model_card import training_run
from sbert_keras.compat.keras import flatten_layers
from sbert_keras.utils import atomic_io

TRANSFORMER = "sentence_transformers.base.modules.transformer.Transformer"
POOLING = "sentence_transformers.sentence_transformer.modules.pooling.Pooling"
DENSE = "sentence_transformers.base.modules.dense.Dense"
NORMALIZE = "sentence_transformers.base.modules.normalize.Normalize"
# Keras activation -> the torch module sentence-transformers' `Dense` instantiates.
TORCH_ACTIVATIONS = {
    "tanh": "torch.nn.modules.activation.Tanh",
    "linear": "torch.nn.modules.linear.Identity",
    "relu": "torch.nn.modules.activation.ReLU",
    "sigmoid": "torch.nn.modules.activation.Sigmoid",
    "gelu": "torch.nn.modules.activation.GELU",
}
SENTENCE_FEATURES = {"module_input_name": "sentence_embedding", "module_output_name": "sentence_embedding"}


def _version(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def check_representable(encoder):
    """Raises `ValueError` naming what a sentence-transformers folder cannot hold.

    Returns:
        the encoder's `families.base.Family`.
    """
    quantized = [
        layer.name for layer in flatten_layers(encoder) if getattr(layer.dtype_policy, "quantization_mode", None)
    ]
    if quantized:
        raise ValueError(
            f"The encoder has quantized weights ({', '.join(quantized[:3])}{', ...' if len(quantized) > 3 else ''}): "
            "a sentence-transformers folder holds float weights. Save the encoder before `quantize()`."
        )
    if encoder.preprocessor is None:
        raise ValueError("The encoder has no preprocessor: a sentence-transformers folder needs its tokenizer.")
    family = family_for_encoder(encoder.backbone, encoder.preprocessor.tokenizer)
    for layer in encoder.projections:
        activation = keras.activations.serialize(layer.activation)
        activation = activation if isinstance(activation, str) else activation.get("config", {}).get("name", activation)
        if activation not in TORCH_ACTIVATIONS:
            raise ValueError(
                f"Projection {layer.name!r} has activation {activation!r}, which sentence-transformers' Dense "
                f"module cannot take; supported: {', '.join(TORCH_ACTIVATIONS)}."
            )
    return family


def _dense_files(layer, index):
    activation = keras.activations.serialize(layer.activation)
    activation = activation if isinstance(activation, str) else activation["config"]["name"]
    kernel = np.asarray(layer.kernel.numpy(), "float32")
    config = {"in_features": int(kernel.shape[0]), "out_features": int(kernel.shape[1]), "bias": layer.use_bias}
    config.update(activation_function=TORCH_ACTIVATIONS[activation], **SENTENCE_FEATURES)
    tensors = {"linear.weight": np.ascontiguousarray(kernel.T)}
    if layer.use_bias:
        tensors["linear.bias"] = np.asarray(layer.bias.numpy(), "float32")
    folder = f"{index}_Dense"
    return folder, {f"{folder}/config.json": config, f"{folder}/model.safetensors": tensors}


def folder_files(encoder, family, base_model=None, run=None):
    """Every file of the folder: relative path -> JSON-able object, str, bytes or a tensor dict."""
    backbone, tokenizer = encoder.backbone, encoder.preprocessor.tokenizer
    length = encoder.sequence_length
    files = {"config.json": family.hf_config(backbone, tokenizer), "model.safetensors": family.hf_tensors(backbone)}
    files.update(family.tokenizer_files(tokenizer, length))
    files["sentence_bert_config.json"] = {
        "max_seq_length": length,
        "do_lower_case": False,
        "transformer_task": "feature-extraction",
        "modality_config": {"text": {"method": "forward", "method_output_name": "last_hidden_state"}},
        "module_output_name": "token_embeddings",
    }
    modules = [(TRANSFORMER, ""), (POOLING, "1_Pooling")]
    hidden = backbone.hidden_dim
    files["1_Pooling/config.json"] = {
        "embedding_dimension": hidden,
        "pooling_mode": encoder.pooling,
        "include_prompt": True,
    }
    for layer in encoder.projections:
        folder, dense = _dense_files(layer, len(modules))
        modules.append((DENSE, folder))
        files.update(dense)
    if encoder.normalize:
        folder = f"{len(modules)}_Normalize"
        modules.append((NORMALIZE, folder))
        files[f"{folder}/config.json"] = dict(SENTENCE_FEATURES)
    files["modules.json"] = [{"idx": i, "name": str(i), "path": p, "type": t} for i, (t, p) in enumerate(modules)]
    files["config_sentence_transformers.json"] = {
        "__version__": {name: _version(name) for name in ("sbert_keras", "keras", "keras-hub")},
        "model_type": "SentenceTransformer",
        "prompts": dict(encoder.prompts),
        "default_prompt_name": encoder.default_prompt_name,
        "similarity_fn_name": "cosine",
    }
    files["README.md"] = model_card(encoder, family, base_model, run)
    return files


def write_files(folder, files):
    """Writes `folder_files`' result into `folder`."""
    for name, content in files.items():
        path = os.path.join(folder, *name.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if name.endswith(".safetensors"):
            save_file(content, path, metadata={"format": "pt"})
        elif isinstance(content, bytes):
            with open(path, "wb") as f:
                f.write(content)
        elif isinstance(content, str):
            with open(path, "w", encoding="utf-8") as f:
                f.write(content)
        else:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(content, f, indent=2, ensure_ascii=False)
                f.write("\n")


def save_sentence_transformers(encoder, folder, overwrite=False, base_model=None):
    """Writes `encoder` as a sentence-transformers folder; returns its absolute path.

    Args:
        encoder: a `SentenceEncoder` built by `from_preset` from a BERT,
            RoBERTa, DistilBERT, XLM-RoBERTa or MPNet folder (or trained
            from one).
        folder: str or path-like. The folder to write (appears complete or not at all).
        overwrite: bool. Replace an earlier folder written here.
        base_model: str or None. The model the encoder was built from, for
            the model card; by default what `from_preset` loaded, or the
            base model of the `sbert-keras train` run it came from.

    Raises:
        ValueError: something the folder cannot represent, named; a folder
            that holds other files or, without `overwrite`, a result.
    """
    family = check_representable(encoder)
    source = getattr(encoder, "loaded_from", None)
    run = training_run(source)
    base_model = base_model or (run or {}).get("model") or source
    files = folder_files(encoder, family, base_model, run)
    needed = sum(np.asarray(v).nbytes for v in files["model.safetensors"].values()) + 2**20
    marker = {"command": "save_to_sentence_transformers", "files": sorted(files)}
    return atomic_io.write_dir(
        lambda work: write_files(work, files),
        folder,
        overwrite=overwrite,
        marker=marker,
        flag="folder",
        needed=needed,
        replaceable=atomic_io.SENTENCE_TRANSFORMERS_FILES,
    )


class SentenceTransformersExport:
    """`save_to_sentence_transformers` of `SentenceEncoder` (a mixin, so the facade stays small)."""

    def save_to_sentence_transformers(self, folder, overwrite=False, base_model=None):
        """Writes the encoder as a sentence-transformers folder; returns its path.

        `SentenceTransformer(folder)` (sentence-transformers 6) reproduces
        `encode(compute="float32")`, `transformers.AutoModel` loads the
        weights, and `SentenceEncoder.from_preset(folder)` gives this encoder
        back. Written by `sbert_keras.checkpoints.st_writer`, atomically:
        the folder appears complete or not at all.

        Args:
            folder: str or path-like. The folder to write.
            overwrite: bool. Replace a folder written earlier.
            base_model: str or None. The base model named in the model card
                (default: what `from_preset` loaded, or the base model of the
                `sbert-keras train` run the encoder came from).

        Raises:
            ValueError: what the folder cannot represent (quantized weights,
                a backbone or tokenizer with no Hugging Face layout, a
                projection activation without a torch module), named.

        Example:
        ```python
        encoder = SentenceEncoder.from_preset("path/to/all-mpnet-base-v2")
        encoder.fit(...)
        encoder.save_to_sentence_transformers("my-mpnet")
        ```
        """
        return save_sentence_transformers(self, folder, overwrite=overwrite, base_model=base_model)
