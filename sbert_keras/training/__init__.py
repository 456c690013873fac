"""Training: the siamese and single-text models of every objective, their data pipelines, and the run.

`siamese` and `cached_siamese` hold the models that put one encoder inside
each SBERT objective (`siamese_preprocessor` tokenises their inputs), `single_text_models` the batch-hard triplet and
distillation models, `objectives` the table from objective name to model,
loss and inputs, `pipelines` the tf.data batching, `batch_plans` the batches of each pass (NumPy, every
backend), `host_pipelines` their host twin on JAX and PyTorch (a `keras.utils.PyDataset`), `backend_fit`
what a run does off TensorFlow, `schedules` the
optimizer and warmup, `fit_checks` the checks of every step, `train_steps`
the checked train step of each Keras backend (TensorFlow, JAX, PyTorch),
`cached_steps` GradCache's passes on JAX and PyTorch, `fit_inputs`
the checks of the texts and labels a run receives, `backup`
resumable runs, `step_log` the CSV log of every step, `distributed`
tf.distribute strategies, `hard_negatives` mining, `trainer` the
`train_objective` run behind `sbert-keras train`, and `run_readme` the
note that lists a run folder's files.
`train_objective` and its helpers are importable from `sbert_keras.training` too.
"""

from sbert_keras.model.precision import set_compute
from sbert_keras.model.precision import set_precision
from sbert_keras.training.objectives import MODEL_CLASSES
from sbert_keras.training.schedules import WarmupLinearDecay
from sbert_keras.training.trainer import SET_VALUED_KEYS
from sbert_keras.training.trainer import canonical_config
from sbert_keras.training.trainer import check_hyperparameters
from sbert_keras.training.trainer import data_hash
from sbert_keras.training.trainer import dev_callback
from sbert_keras.training.trainer import run_fingerprint
from sbert_keras.training.trainer import seed_everything
from sbert_keras.training.trainer import train_objective
from sbert_keras.utils.checks import check_positive_int  # noqa: F401 (importable from here too)
from sbert_keras.utils.defaults import DEFAULT_SAVE_STEPS
