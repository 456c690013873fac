"""The distillation loss: MSE from the student's embeddings to the teacher's.

MSE to the teacher's vectors (sentence-transformers' `MSELoss`) is the mean
over every element of `(batch, dim)`, which is Keras' MSE (the mean over
`dim`, then over the batch): `MSEDistillationLoss` *is*
`keras.losses.MeanSquaredError`, named here by its role rather than rewritten.
"""

import keras

MSEDistillationLoss = keras.losses.MeanSquaredError
