"""The `README.md` model card of a sentence-transformers folder written by sbert_keras.

It records what a reader of the folder needs to know and cannot see in the
weights: the base model the encoder was built from, its architecture and
pipeline (pooling, projections, normalisation, maximum length, prompts),
how to load it with sentence-transformers and with sbert_keras, and, when
the encoder is the output of `sbert-keras train` (its folder holds
`metrics.json`), the training data, objective, epochs and dev metrics of
that run. The front matter follows the Hugging Face model-card metadata
(`library_name`, `pipeline_tag`, `tags`, `base_model` when it is a hub id).

Example:
```python
text = model_card(encoder, family, base_model="sentence-transformers/all-MiniLM-L6-v2", run=None)
```
"""

import os
import re

from sbert_keras.utils.model_files import read_json

# A Hugging Face hub id: "owner/name", no path of this machine.
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def training_run(source):
    """`metrics.json` of the `sbert-keras train` folder `source` came from, or `None`.

    Args:
        source: str or None. What the encoder was loaded from (a run folder
            or its `encoder.keras`).
    """
    if not source:
        return None
    folder = source if os.path.isdir(source) else os.path.dirname(os.path.abspath(source))
    if not os.path.isfile(os.path.join(folder, "metrics.json")):
        return None
    return read_json(folder, "metrics.json")


def _metrics_table(run):
    before, after = run.get("dev_before") or {}, run.get("dev_after") or {}
    names = sorted(set(before) | set(after))
    if not names:
        return []
    lines = ["| dev metric | before training | after training |", "| --- | --- | --- |"]
    for name in names:
        cells = [f"{d[name]:.4f}" if isinstance(d.get(name), (int, float)) else "" for d in (before, after)]
        lines.append(f"| {name} | {cells[0]} | {cells[1]} |")
    return lines


def _training_section(run):
    facts = [
        ("Objective", run.get("objective")),
        ("Training data", run.get("train_file")),
        ("Training data SHA-256", run.get("train_file_sha256")),
        ("Training examples", run.get("train_examples")),
        ("Dev data", run.get("dev_file")),
        ("Epochs", run.get("epochs")),
        ("Batch size", run.get("batch_size")),
        ("Learning rate", run.get("learning_rate")),
        ("Seed", run.get("seed")),
        ("Compute", run.get("compute", run.get("precision"))),
        ("Teacher", run.get("teacher")),
        ("Training time (s)", run.get("train_seconds")),
    ]
    lines = ["## Training", "", "Trained with `sbert-keras train`:", ""]
    lines += [f"- {name}: `{value}`" for name, value in facts if value is not None]
    table = _metrics_table(run)
    return lines + ([""] + table if table else []) + [""]


def model_card(encoder, family, base_model=None, run=None):
    """The text of `README.md`.

    Args:
        encoder: the `SentenceEncoder` being written.
        family: its `families.base.Family`.
        base_model: str or None. The model it was built from.
        run: dict or None. `metrics.json` of its `sbert-keras train` run.

    Returns:
        str.
    """
    base_model = base_model or "unknown"
    backbone = encoder.backbone
    front = ["---", "library_name: sentence-transformers", "pipeline_tag: sentence-similarity", "tags:"]
    front += ["- sentence-transformers", "- sentence-similarity", "- feature-extraction", "- sbert-keras"]
    if HUB_ID.match(base_model) and not os.path.exists(base_model):
        front.append(f"base_model: {base_model}")
    front.append("---")
    projections = [
        f"Dense {layer.kernel.shape[0]}→{layer.units} ({layer.get_config()['activation']})"
        for layer in encoder.projections
    ]
    pipeline = [f"{family.architecture} ({backbone.num_layers} layers, hidden size {backbone.hidden_dim})"]
    pipeline += [f"{encoder.pooling} pooling"] + projections + (["Normalize"] if encoder.normalize else [])
    lines = front + [
        "",
        "# Sentence encoder",
        "",
        f"A sentence-transformers model written by sbert_keras from a Keras `SentenceEncoder`. It maps "
        f"texts to {encoder.embedding_dim}-dimensional vectors for semantic similarity, search and clustering.",
        "",
        "## Model details",
        "",
        f"- Base model: `{base_model}`",
        f"- Model type: `{family.name}`",
        f"- Pipeline: {' → '.join(pipeline)}",
        f"- Maximum sequence length: {encoder.sequence_length} tokens",
        f"- Output dimensionality: {encoder.embedding_dim}",
        "- Similarity function: cosine",
    ]
    prompts = {name: prompt for name, prompt in encoder.prompts.items() if prompt}
    if prompts:
        lines.append(f"- Prompts: {', '.join(f'`{k}`: `{v}`' for k, v in sorted(prompts.items()))}")
    if encoder.default_prompt_name:
        lines.append(f"- Default prompt: `{encoder.default_prompt_name}`")
    lines += [""] + (_training_section(run) if run else [])
    lines += [
        "## Usage",
        "",
        "```python",
        "from sentence_transformers import SentenceTransformer",
        "",
        'model = SentenceTransformer("path/to/this/folder")',
        'embeddings = model.encode(["A man is playing a guitar.", "Someone plays an instrument."])',
        "```",
        "",
        "With sbert_keras:",
        "",
        "```python",
        "from sbert_keras import SentenceEncoder",
        "",
        'encoder = SentenceEncoder.from_preset("path/to/this/folder")',
        'embeddings = encoder.encode(["A man is playing a guitar.", "Someone plays an instrument."])',
        "```",
        "",
    ]
    return "\n".join(lines)
