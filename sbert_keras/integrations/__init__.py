"""Scale-out through engines made for it.

`beam`: Apache Beam `RunInference` that encodes a corpus into Parquet
shards, on any Beam runner.
"""
