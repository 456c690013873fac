"""Evaluators (dicts of named metrics with one primary) and the Keras callback that runs them during `fit`.

`evaluators` holds STS, triplet, NLI and transfer evaluation and
`EvaluationCallback`; `pair_evaluation` binary classification and
paraphrase mining; `retrieval_evaluation` information retrieval and BEIR
folders. The names of `evaluators` are importable from `sbert_keras.evaluation` too.
"""

from sbert_keras.evaluation.evaluators import PRIMARY_METRIC
from sbert_keras.evaluation.evaluators import EvaluationCallback
from sbert_keras.evaluation.evaluators import nli_confusion_matrix
from sbert_keras.evaluation.evaluators import nli_evaluation
from sbert_keras.evaluation.evaluators import sts_evaluation
from sbert_keras.evaluation.evaluators import transfer_evaluation
from sbert_keras.evaluation.evaluators import triplet_evaluation
