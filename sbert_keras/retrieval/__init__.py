"""Semantic search, paraphrase mining, clustering and the embedding index, on NumPy embeddings.

`scores` holds the float32 NumPy scores and exact chunked top-k,
`semantic_search` search and paraphrase mining, `clustering` community
detection and scikit-learn clustering, `index` the faiss `EmbeddingIndex`,
`index_files` its files on disk, and `quantization` sentence-transformers'
`quantize_embeddings` (int8, uint8 and packed binary embeddings). Everything takes embeddings (or an
encoder's `encode`), never a model's internals.
"""
