"""Training and evaluation examples, the readers of their files, and the Parquet embedding shards.

`examples` holds the records SBERT trains on (`SentencePairs`, `NLIPairs`,
`Triplets`, ...), `readers` the readers of STS-B, SNLI and CSV files,
`corpus` the reader of a corpus file for encoding, and `embedding_shards`
the Parquet shards of an encoded corpus (plain pyarrow). The readers' and
records' names are importable from `sbert_keras.data` too.
"""

from sbert_keras.data.examples import NLI_LABELS
from sbert_keras.data.examples import STS_MAPPINGS
from sbert_keras.data.examples import STS_SCORE_MAX
from sbert_keras.data.examples import DataFormatError
from sbert_keras.data.examples import LabelledSentences
from sbert_keras.data.examples import NLIPairs
from sbert_keras.data.examples import SentencePairs
from sbert_keras.data.examples import Sentences
from sbert_keras.data.examples import Triplets
from sbert_keras.data.examples import nli_to_pairs
from sbert_keras.data.examples import nli_to_triplets
from sbert_keras.data.examples import scale_sts_score
from sbert_keras.data.examples import unique_sentences
from sbert_keras.data.examples import unscale_sts_score
from sbert_keras.data.readers import LABELLED_PAIR_HEADERS
from sbert_keras.data.readers import LABELLED_SENTENCE_HEADERS
from sbert_keras.data.readers import TRIPLET_HEADERS
from sbert_keras.data.readers import iter_csv_columns
from sbert_keras.data.readers import iter_text_lines
from sbert_keras.data.readers import load_tfds_stsb
from sbert_keras.data.readers import logger
from sbert_keras.data.readers import read_labelled_pairs_csv
from sbert_keras.data.readers import read_labelled_sentences_csv
from sbert_keras.data.readers import read_nli
from sbert_keras.data.readers import read_sentences
from sbert_keras.data.readers import read_sts
from sbert_keras.data.readers import read_triplets_csv
