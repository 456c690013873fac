"""Training losses, by what they compute: triplets, in-batch negatives, pair scores, distillation, Matryoshka.

Each loss is a pure function on embeddings, similarities or distances plus
a registered `keras.losses.Loss` (registered name `sbert_keras>ClassName`),
computed in float32 under any dtype policy. `triplet` holds the SBERT
paper's triplet loss and batch-hard triplets, `in_batch` the in-batch
negatives losses, `pair_scores` CoSENT, AnglE and online contrastive,
`distillation` MSE to a teacher, `matryoshka` the loss over embedding
prefixes, `replicas` the scaling across `tf.distribute` replicas, and `base`
what several share.

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
