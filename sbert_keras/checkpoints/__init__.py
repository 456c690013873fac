"""Loading and saving encoders: presets, Hugging Face / sentence-transformers folders, `.keras` files.

`presets` is the loader behind `SentenceEncoder.from_preset` (KerasHub
presets, Hugging Face folders converted to KerasHub backbones), the
dispatcher to one family per model type in `families/` (BERT, RoBERTa,
DistilBERT, XLM-RoBERTa, MPNet; each with the one weight table that loads
and saves it); `tokenizer_json` builds KerasHub WordPiece and BPE
tokenizers from `vocab.txt`, `vocab.json` + `merges.txt` or
`tokenizer.json`; `added_tokens` reads `tokenizer.json`'s added tokens;
`sentencepiece_model` reads, rebuilds and checks
SentencePiece models (XLM-R); `st_modules` reads a sentence-transformers
folder's modules (pooling, `Dense`, `Normalize`, prompts); `keras_files`
loads `.keras` files with clear errors. Saving: `st_writer` writes an
encoder as a sentence-transformers folder (`save_to_sentence_transformers`),
with the tokenizer files of `tokenizer_files` and the `README.md` of
`model_card`.
"""
