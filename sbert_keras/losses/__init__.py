"""Training losses, by what they compute: triplets, in-batch negatives, pair scores, distillation, Matryoshka.

Each loss is a pure function on embeddings, similarities or distances plus
a registered `keras.losses.Loss` (registered name `sbert_keras>ClassName`),
computed in float32 under any dtype policy. `triplet` holds the SBERT
paper's triplet loss and batch-hard triplets, `in_batch` the in-batch
negatives losses, `pair_scores` CoSENT, AnglE and online contrastive,
`distillation` MSE to a teacher, `matryoshka` the loss over embedding
prefixes, `replicas` the scaling across `tf.distribute` replicas, and `base`
what several share. Every loss is importable from `sbert_keras.losses` too.

What each loss expects as `y_pred`, and which model produces it:

| loss | `y_true` | `y_pred` | model |
|---|---|---|---|
| `TripletLoss` | ignored | distances `(batch, 2)` | `TripletSiamese` |
| `InBatchNegativesLoss` | ignored | cosine matrix `(batch, batch * k)` | `ContrastiveSiamese` |
| `SymmetricInBatchNegativesLoss` | ignored | cosine matrix `(batch, batch * k)` | `ContrastiveSiamese` |
| `CoSENTLoss` | scores `(batch,)` | cosines `(batch,)` | `RegressionSiamese` |
| `AnglELoss` | scores `(batch,)` | pair embeddings `(batch, 2, dim)` | `RegressionSiamese(pair_output="embeddings")` |
| `OnlineContrastiveLoss` | 0/1 `(batch,)` | cosines (or distances) `(batch,)` | `RegressionSiamese` |
| `BatchHardTripletLoss` | class ids `(batch,)` | embeddings `(batch, dim)` | the `SentenceEncoder` itself |
| `MSEDistillationLoss` | teacher `(batch, dim)` | student `(batch, dim)` | the `SentenceEncoder` itself |

The regression objective uses `keras.losses.MeanSquaredError` on the cosine
and the classification objective `keras.losses.SparseCategoricalCrossentropy`
on the logits.
"""

from sbert_keras.losses.base import BatchLevelLoss
from sbert_keras.losses.base import ImpliedTargetLoss
from sbert_keras.losses.distillation import MSEDistillationLoss
from sbert_keras.losses.in_batch import InBatchNegativesLoss
from sbert_keras.losses.in_batch import SymmetricInBatchNegativesLoss
from sbert_keras.losses.in_batch import in_batch_negatives_loss
from sbert_keras.losses.in_batch import symmetric_in_batch_negatives_loss
from sbert_keras.losses.pair_scores import COSENT_SCALE
from sbert_keras.losses.pair_scores import ONLINE_CONTRASTIVE_MARGIN
from sbert_keras.losses.pair_scores import AnglELoss
from sbert_keras.losses.pair_scores import CoSENTLoss
from sbert_keras.losses.pair_scores import OnlineContrastiveLoss
from sbert_keras.losses.pair_scores import angle_similarity
from sbert_keras.losses.pair_scores import cosent_loss
from sbert_keras.losses.pair_scores import online_contrastive_loss
from sbert_keras.losses.triplet import BATCH_HARD_DISTANCES
from sbert_keras.losses.triplet import BATCH_HARD_MARGIN
from sbert_keras.losses.triplet import BatchHardTripletLoss
from sbert_keras.losses.triplet import TripletLoss
from sbert_keras.losses.triplet import batch_hard_triplet_loss
from sbert_keras.losses.triplet import pairwise_distances
from sbert_keras.losses.triplet import triplet_loss
from sbert_keras.losses.triplet import triplet_settings
