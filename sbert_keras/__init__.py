"""sbert_keras: Sentence-BERT for Keras 3 and KerasHub."""

import os

# The encoder's tokenisers (tf.text) and the SavedModel export need TensorFlow.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from sbert_keras.backbone import BertLayoutBackbone  # noqa: E402
from sbert_keras.encoder import SentenceEncoder  # noqa: E402
from sbert_keras.evaluation import EvaluationCallback  # noqa: E402
from sbert_keras.evaluation import nli_evaluation  # noqa: E402
from sbert_keras.evaluation import sts_evaluation  # noqa: E402
from sbert_keras.evaluation import transfer_evaluation  # noqa: E402
from sbert_keras.evaluation import triplet_evaluation  # noqa: E402
from sbert_keras.export import export_saved_model  # noqa: E402
from sbert_keras.layers import MaskedPooling  # noqa: E402
from sbert_keras.losses import InBatchNegativesLoss  # noqa: E402
from sbert_keras.losses import TripletLoss  # noqa: E402
from sbert_keras.preprocessor import SentenceEncoderPreprocessor  # noqa: E402
from sbert_keras.search import cluster  # noqa: E402
from sbert_keras.search import community_detection  # noqa: E402
from sbert_keras.search import paraphrase_mining  # noqa: E402
from sbert_keras.search import paraphrase_mining_texts  # noqa: E402
from sbert_keras.search import semantic_search  # noqa: E402
from sbert_keras.siamese import ClassificationSiamese  # noqa: E402
from sbert_keras.siamese import ContrastiveSiamese  # noqa: E402
from sbert_keras.siamese import RegressionSiamese  # noqa: E402
from sbert_keras.siamese import SiamesePreprocessor  # noqa: E402
from sbert_keras.siamese import TripletSiamese  # noqa: E402
from sbert_keras.similarity import CosineSimilarity  # noqa: E402
from sbert_keras.similarity import PairFeatures  # noqa: E402
from sbert_keras.similarity import SimilarityMatrix  # noqa: E402
from sbert_keras.similarity import TripletDistances  # noqa: E402
from sbert_keras.training import WarmupLinearDecay  # noqa: E402
from sbert_keras.training import paper_optimizer  # noqa: E402
from sbert_keras.training import set_precision  # noqa: E402
from sbert_keras.training import train_objective  # noqa: E402

__version__ = "0.1.0"
