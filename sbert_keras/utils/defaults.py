"""Defaults shared across sbert_keras, defined once.

Every module, the CLI, the benchmarks and the notebooks import these names
instead of repeating the numbers, so the paper's recipe or a default changes
in one place. This module imports nothing, so any module can import it
without a cycle.

Example:
```python
from sbert_keras.utils import defaults

defaults.PAPER_LEARNING_RATE  # 2e-5
defaults.OBJECTIVES[:4]  # ("regression", "triplet", "classification", "contrastive")
```
"""

# === The SBERT paper's training recipe ===
# Reimers & Gurevych (2019), section 4: Adam with learning rate 2e-5,
# batch size 16, one epoch, linear warmup over 10 % of the steps.
PAPER_LEARNING_RATE = 2e-5
# The largest learning rate accepted (`train --lr`, `train_objective(learning_rate=)`): Adam steps
# of more than 1 per weight diverge at once; the range is (0, MAX_LEARNING_RATE].
MAX_LEARNING_RATE = 1.0
PAPER_BATCH_SIZE = 16
PAPER_EPOCHS = 1
PAPER_WARMUP_FRACTION = 0.1
# The optimizer (`schedules.paper_optimizer`, `train_objective`, `sbert-keras
# train --weight-decay --clip-norm`): sentence-transformers' `fit` settings,
# AdamW with weight decay 0.01 and the global gradient norm clipped at 1.0.
# Weight decay 0 gives the paper's plain Adam; a clip norm of None or 0 does
# not clip. Chosen over plain Adam by STS-B dev, 1 epoch of all-MiniLM-L6-v2,
# seeds 0-2 (benchmarks/RESULTS.md): regression 0.8932 either way, CoSENT
# 0.8580 +- 0.0018 against 0.8574 +- 0.0036. Decay skips the variables whose
# names hold one of `NO_WEIGHT_DECAY` (biases, LayerNorm gamma and beta), as
# sentence-transformers does.
WEIGHT_DECAY = 0.01
CLIP_NORM = 1.0
NO_WEIGHT_DECAY = ("bias", "gamma", "beta")

# Training backups (`sbert-keras train`): every this many steps and at each
# epoch end; a kill loses at most these steps, and saves this far apart cost
# little next to the steps between them.
DEFAULT_SAVE_STEPS = 500

# === Objectives ===
# The names `train_objective` and the CLI accept: the paper's four, one per
# siamese model, then CoSENT and AnglE (`losses.pair_scores`), which train a
# `RegressionSiamese` on scored pairs with a ranking loss on the raw scores,
# online contrastive (0/1 pairs), batch-hard triplets (labelled sentences)
# and MSE distillation to a teacher's vectors; `sbert_keras.training.objectives`
# maps each to its data, model and loss.
OBJECTIVES = (
    "regression",
    "triplet",
    "classification",
    "contrastive",
    "cosent",
    "angle",
    "online-contrastive",
    "batch-hard",
    "distill",
)
# The objectives that train on scored sentence pairs (STS-like files).
SCORED_PAIR_OBJECTIVES = ("regression", "cosent", "angle")
# Triplet objective: `max(d(a, p) - d(a, n) + margin, 0)`. The paper's
# setting, the euclidean distance and margin 1, is the default of encoders
# whose outputs are not normalised. On L2-normalised outputs euclidean
# distances lie in [0, 2] and margin 1 lowers SNLI triplet accuracy (0.943 ->
# 0.907 after 1 epoch, all-MiniLM-L6-v2); there the default is the cosine
# distance (1 - cos) with `TRIPLET_COSINE_MARGIN`, chosen by
# benchmarks/triplet_nli.py (benchmarks/RESULTS.md). `siamese.triplet_settings`
# resolves them; explicit arguments win.
TRIPLET_DISTANCES = ("euclidean", "cosine", "manhattan")
TRIPLET_DISTANCE = "euclidean"
TRIPLET_MARGIN = 1.0
TRIPLET_NORMALIZED_DISTANCE = "cosine"
TRIPLET_COSINE_MARGIN = 0.1
# In-batch negatives (Quick-Thought / MultipleNegativesRankingLoss): the
# cosines are multiplied by this inverse temperature before the softmax,
# 20 as in sentence-transformers.
IN_BATCH_SCALE = 20.0
# Classification objective: NLI's 3 labels on `[u, v, |u-v|]`, the paper's
# best concatenation (Table 6).
NLI_NUM_CLASSES = 3
CONCATENATION = ("u", "v", "|u-v|")

# === Encoder ===
# The KerasHub preset `SentenceEncoder.from_preset()` loads without a name.
DEFAULT_PRESET = "roberta_base_en"
# Texts per batch (padded to its longest text) in `encode` and in the evaluators.
ENCODE_BATCH_SIZE = 32
# Keras' `fit` batch size for arrays given without one.
KERAS_BATCH_SIZE = 32
# Calls in flight at once in `encode` on a CPU (each of two batches through the
# fused graph; one batch in the exported SavedModel's in-graph batch loop): while
# one runs a single-threaded op (LayerNorm, softmax, a cast), the other's matmul
# uses the idle core. On a 2-core CPU, two in flight encode faster than one, and
# more add little.
CONCURRENT_BATCHES = 2

# === Compute paths and output precisions ===
# `compute` names the dtype of the matmuls (`encode(compute=...)`);
# `POLICIES` maps each one to the Keras dtype policy that runs the Keras
# graph that way (`keras.config.set_dtype_policy`). Pooling,
# normalisation, similarities and losses stay float32 under all of them.
# "auto" (the default of `encode` and `export_saved_model`): bf16 on CPUs with
# AVX512-BF16 or AMX, float16 on a GPU, float32 otherwise; the fast path's
# self-check falls back where it diverges. "int8": oneDNN int8 matmuls in the
# fused graph (`sbert_keras.runtime.kernels.onednn_int8`); it has no Keras policy (the Keras graph
# of a float encoder runs float32 where int8 falls back).
# `set_compute`, `sbert-keras train --compute` and `from_preset(dtype=...)`
# take the words that have a policy (`POLICY_COMPUTES`). Keras' policy names
# are accepted there with a `DeprecationWarning` naming the new word.
COMPUTES = ("auto", "float32", "bfloat16", "float16", "int8")
ENCODE_COMPUTE = "auto"
POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
POLICY_COMPUTES = ("auto",) + tuple(POLICIES)
DEPRECATED_POLICY_NAMES = {policy: word for word, policy in POLICIES.items() if policy != word}
# What a SavedModel's matmuls run in: every compute path but int8. A
# SavedModel is served by TensorFlow, whose int8 kernels (oneDNN) ran slower
# than its bfloat16 ones and rounded otherwise than `encode`'s int8
# (TFLite's XNNPACK), so an int8 SavedModel would be a slower, second int8
# answer (benchmarks/HISTORY.md). An encoder quantized by Keras exports its
# Keras graph (Keras' own int8 layers), what `encode(compute="float32")` runs.
EXPORT_COMPUTES = tuple(c for c in COMPUTES if c != "int8")
# `precision` names what `encode` returns, as in sentence-transformers'
# `encode(precision=...)` and `quantize_embeddings`: float32 vectors, or
# scalar-quantized (int8, uint8: 256 buckets per dimension between a
# calibrated min and max) or packed binary ones (binary: int8, ubinary:
# uint8, 8 dimensions a byte). Ranges computed from fewer embeddings than
# `QUANTIZATION_CALIBRATION_MIN` warn, as sentence-transformers does.
PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")
ENCODE_PRECISION = "float32"
QUANTIZATION_CALIBRATION_MIN = 100

# === Search and clustering ===
# Hits per query of `sbert-keras search` and `sbert-keras index search`.
SEARCH_TOP_K = 10
# `search.cluster(method=...)` and `sbert-keras cluster --method`.
CLUSTER_METHODS = ("kmeans", "agglomerative", "community")
# Community detection: two texts are neighbours when their cosine similarity
# is at least this (sentence-transformers' default), and a community keeps at
# least `COMMUNITY_MIN_SIZE` texts.
COMMUNITY_THRESHOLD = 0.75
COMMUNITY_MIN_SIZE = 2

# === Hard-negative mining ===
# `mine_hard_negatives` and `sbert-keras mine-negatives`: negatives per
# anchor, and how they are drawn from the rank window ("top": the best,
# "random": a seeded sample), sentence-transformers' defaults.
MINING_NUM_NEGATIVES = 3
MINING_SAMPLING_STRATEGIES = ("top", "random")

# === Corpus encoding (Apache Beam) ===
# `embed_corpus` and `sbert-keras embed-corpus --input-format`: "auto" reads
# `.jsonl`/`.json` files as JSON lines and anything else as text lines.
INPUT_FORMATS = ("auto", "text", "jsonl")
# Texts per Beam batch (`BatchElements`): `encode` sorts each batch by length
# and cuts it into `batch_size` forward passes, so a large batch pads little.
BEAM_BATCH_SIZE = 1024

# === Tokenisation ===
# Hugging Face's WordPiece (`tokenizer.json`'s `max_input_chars_per_word`):
# a word of more characters (code points, after normalisation) is one unknown
# token.
MAX_INPUT_CHARS_PER_WORD = 100

# === Training pipeline ===
# Padded lengths of the length buckets of `pipelines.siamese_dataset`: few
# distinct shapes, so the train step is traced once or twice.
BUCKETS = (16, 32, 48, 64, 96, 128, 192, 256, 384, 512)
# How `siamese_dataset` forms batches: "bucket" (similar lengths together),
# "no_duplicates" (random batches in which no text appears twice, as
# sentence-transformers' NoDuplicatesBatchSampler) or "shuffle" (random).
# Every batching pads to a length of `BUCKETS`.
BATCHINGS = ("bucket", "no_duplicates", "shuffle")
DEFAULT_BATCHING = "bucket"
# Per objective, where it differs from `DEFAULT_BATCHING`: in-batch negatives
# take every other row's texts as negatives, so a premise repeated in a batch
# (NLI triplets hold one row per entailment) is its own false negative.
BATCHING = {"contrastive": "no_duplicates"}

# === Numerics ===
# Floor under norms and squared distances: identical or all-zero vectors
# give finite values and gradients. Applied in float32 (or float64), where
# it does not underflow.
NORM_EPSILON = 1e-12
