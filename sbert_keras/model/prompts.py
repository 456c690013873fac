"""Prompts and truncated (Matryoshka) embeddings: `encode_query`, `encode_document`, `truncate_dim`.

A sentence-transformers model can declare named prompts in its
`config_sentence_transformers.json` (`{"query": "query: ", "document":
"passage: "}`) and a `default_prompt_name`; `encode` prepends the chosen
prompt to every text, as sentence-transformers 6 does (checked against its
`SentenceTransformer.encode`, `encode_query` and `encode_document`):

- `prompt` (a string) wins over `prompt_name`; an unknown `prompt_name` is
  an error listing the known names; neither gives the default prompt, if
  the encoder has one.
- `encode_query` uses the `"query"` prompt when the encoder has one,
  `encode_document` the first of `"document"`, `"passage"`, `"corpus"` it
  has; without one, no prompt (not the default prompt: sentence-transformers
  6 always holds `"query"` and `"document"` prompts, `""` unless set).
  One difference, on purpose: sentence-transformers 6.2's `encode_document`
  finds its own empty `"document"` prompt first and so never reaches a
  folder's `"passage"` prompt (measured on all-MiniLM-L6-v2 with
  `{"query": "query: ", "passage": "passage: "}`: no prompt applied);
  sentence-transformers 5 and `encode_document` here prepend `"passage: "`.

`truncate_dim` keeps the first dimensions of each embedding (for models
trained with `MatryoshkaLoss`), then L2-normalises again when `encode`
normalises (`sbert_keras.runtime.batching.finish`; the SavedModel of
`sbert_keras.runtime.export` does the same in its graph). sentence-transformers
cuts after its `Normalize` module, so its truncated vectors are unit length
only with `normalize_embeddings=True`, which is what `encode` here returns
(cosine similarities are the same either way).

Keras and KerasHub have no notion of prompts or truncated embeddings, and
sentence-transformers needs torch, so these few checks are written here.

Example:
```python
encoder = SentenceEncoder.from_preset("path/to/e5-folder")  # prompts from its config
queries = encoder.encode_query(["how do plants make food?"], truncate_dim=128)
documents = encoder.encode_document(["Photosynthesis turns light into sugar."], truncate_dim=128)
```
"""

import types

from sbert_keras.utils.checks import check_positive_int

QUERY_PROMPT_NAMES = ("query",)
DOCUMENT_PROMPT_NAMES = ("document", "passage", "corpus")  # sentence-transformers' order


def check_prompts(prompts, default_prompt_name, source="`prompts`"):
    """`prompts` as a plain `dict[str, str]`, checked with `default_prompt_name`.

    Args:
        prompts: dict `name -> prefix` or None (no prompts).
        default_prompt_name: str or None. Must be a key of `prompts`.
        source: str. Where the values come from (a file), for messages.

    Returns:
        dict (a new one; `{}` for None). A `None` prefix becomes `""`, as in
        sentence-transformers.

    Raises:
        TypeError: `prompts` is not a dict of strings.
        ValueError: `default_prompt_name` is not one of its keys.
    """
    if prompts is None:
        prompts = {}
    if not isinstance(prompts, dict):
        raise TypeError(f"{source} must be a dict of prompt name -> prefix. Received {type(prompts).__name__}.")
    checked = {}
    for name, prefix in prompts.items():
        prefix = "" if prefix is None else prefix
        if not isinstance(name, str) or not isinstance(prefix, str):
            raise TypeError(f"{source}: prompt {name!r} must map a string name to a string. Received {prefix!r}.")
        checked[name] = prefix
    if default_prompt_name is not None and default_prompt_name not in checked:
        raise ValueError(
            f"{source}: `default_prompt_name` {default_prompt_name!r} is not one of the prompts {list(checked)}."
        )
    return checked


def resolve_prompt(prompts, default_prompt_name, prompt=None, prompt_name=None):
    """The prefix `encode` prepends: `prompt`, else `prompts[prompt_name]`, else the default; or `None`.

    Args:
        prompts: dict `name -> prefix`.
        default_prompt_name: str or None.
        prompt: str or None. An explicit prefix (`""` for none); wins.
        prompt_name: str or None. A key of `prompts`.

    Raises:
        TypeError: `prompt` is not a string.
        ValueError: `prompt_name` is not a key of `prompts` (the known names are listed).
    """
    if prompt is not None:
        if not isinstance(prompt, str):
            raise TypeError(f"`prompt` must be a string. Received {prompt!r} of type {type(prompt).__name__}.")
        return prompt
    if prompt_name is not None:
        if prompt_name not in prompts:
            raise ValueError(f"`prompt_name` {prompt_name!r} is not one of this encoder's prompts: {list(prompts)}.")
        return prompts[prompt_name]
    if default_prompt_name is not None:
        return prompts.get(default_prompt_name)
    return None


def check_truncate_dim(truncate_dim, dim):
    """`truncate_dim` as an int in `[1, dim]`, or None; a clear error naming it otherwise."""
    if truncate_dim is None:
        return None
    truncate_dim = check_positive_int(truncate_dim, "truncate_dim")
    if truncate_dim > dim:
        raise ValueError(f"`truncate_dim` must be at most the embedding dimension {dim}. Received {truncate_dim}.")
    return truncate_dim


class PromptsMixin:
    """`encode_query`, `encode_document` and prompt resolution of `SentenceEncoder`.

    Needs `self.prompts`, `self.default_prompt_name` and `self.encode`.

    Example:
    ```python
    encoder = SentenceEncoder(backbone, preprocessor, prompts={"query": "query: "})
    encoder.encode_query(["a question"])  # == encoder.encode(["query: a question"])
    ```
    """

    def set_prompts(self, prompts, default_prompt_name):
        """Checks and stores the `prompts` and `default_prompt_name` constructor arguments."""
        prompts = check_prompts(prompts, default_prompt_name)
        # A namespace keeps the dict out of Keras' attribute tracking (which would wrap it).
        self._prompt_config = types.SimpleNamespace(prompts=prompts, default_prompt_name=default_prompt_name)

    @property
    def prompts(self):
        """dict `name -> prefix` (a copy)."""
        return dict(self._prompt_config.prompts)

    @property
    def default_prompt_name(self):
        """str or None. The prompt `encode` prepends when given none."""
        return self._prompt_config.default_prompt_name

    def get_config(self):
        """The model's config plus `prompts` and `default_prompt_name`."""
        return {**super().get_config(), "prompts": self.prompts, "default_prompt_name": self.default_prompt_name}

    def resolve_prompt(self, prompt=None, prompt_name=None):
        """The prefix `encode(prompt=..., prompt_name=...)` prepends, or None (see `resolve_prompt`)."""
        return resolve_prompt(self.prompts, self.default_prompt_name, prompt=prompt, prompt_name=prompt_name)

    def _encode_for(self, candidates, texts, prompt, prompt_name, kwargs):
        """`encode` with the first prompt of `candidates` the encoder has, else none (unless given)."""
        if prompt is None and prompt_name is None:
            prompt_name = next((name for name in candidates if name in self._prompt_config.prompts), None)
            prompt = "" if prompt_name is None else None
        return self.encode(texts, prompt=prompt, prompt_name=prompt_name, **kwargs)

    def encode_query(self, texts, prompt=None, prompt_name=None, **kwargs):
        """`encode` for search queries: with the `"query"` prompt when the encoder has one.

        Without a `"query"` prompt, no prompt (not the default one), as in
        sentence-transformers' `encode_query`. `prompt` / `prompt_name` win.

        Args:
            texts: a string or a list of strings.
            prompt: str or None. An explicit prefix.
            prompt_name: str or None. A key of `encoder.prompts`.
            **kwargs: the other `encode` arguments (`truncate_dim`, `batch_size`, `precision`, `compute`, ...).
        """
        return self._encode_for(QUERY_PROMPT_NAMES, texts, prompt, prompt_name, kwargs)

    def encode_document(self, texts, prompt=None, prompt_name=None, **kwargs):
        """`encode` for documents: with the first of the `"document"`, `"passage"`, `"corpus"` prompts it has.

        Without any of them, no prompt (not the default one), as in
        sentence-transformers' `encode_document`.

        Args:
            texts: a string or a list of strings.
            prompt: str or None. An explicit prefix.
            prompt_name: str or None. A key of `encoder.prompts`.
            **kwargs: the other `encode` arguments (`truncate_dim`, `batch_size`, `precision`, `compute`, ...).
        """
        return self._encode_for(DOCUMENT_PROMPT_NAMES, texts, prompt, prompt_name, kwargs)
