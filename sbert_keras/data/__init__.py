"""Training and evaluation examples, the readers of their files, and the Parquet embedding shards.

`examples` holds the records SBERT trains on (`SentencePairs`, `NLIPairs`,
`Triplets`, ...), `readers` the readers of STS-B, SNLI and CSV files,
`corpus` the reader of a corpus file for encoding, and `embedding_shards`
the Parquet shards of an encoded corpus (plain pyarrow).
"""
