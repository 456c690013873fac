"""Model families: one module per Hugging Face model type, each with one weight table.

- `weight_table`: `WeightRule` (Hugging Face tensors <-> a Keras variable,
  with its transform) and the three jobs of a table: the header check,
  loading, saving;
- `layouts`: the rules shared by the post-LayerNorm encoders (embeddings,
  blocks under their Hugging Face names, the unused pooler);
- `base`: `Family`, what a model type needs in both directions;
- `bert`: BERT and RoBERTa;
- `distilbert`: DistilBERT on KerasHub's `DistilBertBackbone`;
- `xlm_roberta`: XLM-RoBERTa on KerasHub's `XLMRobertaBackbone` and a
  SentencePiece tokenizer;
- `mpnet`: MPNet on `sbert_keras.model.mpnet_backbone.MPNetBackbone`;
- `registry`: the family of a folder (`model_type`) or of an encoder.
"""
