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
"""
