"""Scale-out through engines made for it.

`beam`: Apache Beam `RunInference` that encodes a corpus into Parquet
shards, on any Beam runner; `beam_arguments`: the flags of
`sbert-keras embed-corpus`, readable without importing Apache Beam.
"""
