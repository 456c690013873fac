"""Training losses: the SBERT paper's, today's pairwise and in-batch losses, Matryoshka, and replica scaling.

Each loss is a pure function on embeddings, similarities or distances plus
a registered `keras.losses.Loss`, computed in float32 under any dtype
policy. The paper's losses are importable from `sbert_keras.losses` too.
"""

from sbert_keras.losses.sentence_bert import ImpliedTargetLoss
from sbert_keras.losses.sentence_bert import InBatchNegativesLoss
from sbert_keras.losses.sentence_bert import TripletLoss
from sbert_keras.losses.sentence_bert import in_batch_negatives_loss
from sbert_keras.losses.sentence_bert import triplet_loss
from sbert_keras.losses.sentence_bert import triplet_settings
