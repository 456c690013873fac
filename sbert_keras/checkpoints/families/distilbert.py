"""DistilBERT folders (msmarco-distilbert-*, distiluse-base-multilingual-* with its `Dense`).

KerasHub's `DistilBertBackbone` computes Hugging Face's DistilBERT exactly:
exact (erf) GELU, LayerNorm epsilon 1e-12 (fixed in both), learned
position embeddings from row 0 and no token types, so it is used whenever
`activation` is GELU (a ReLU DistilBERT loads into `BertLayoutBackbone`).
Its tensors have their own names (`transformer.layer.N.attention.q_lin`,
`sa_layer_norm`, `ffn.lin1`, ...: `layouts.DISTILBERT_BLOCK`) and there is
no pooler. A `sinusoidal_pos_embds` checkpoint stores its fixed table in
the same tensor, so it loads the same way; saving writes the table as
learned positions.

The tokenizer is BERT's WordPiece (`LowercasingBertTokenizer`), not
KerasHub's `DistilBertTokenizer`: that one case-folds ("ß" -> "ss") where
Hugging Face lowercases, so some words would get other ids.
"""

import keras_hub

from sbert_keras.checkpoints.families.base import Family
from sbert_keras.checkpoints.families.bert import backbone_options
from sbert_keras.checkpoints.families.layouts import DISTILBERT_BLOCK
from sbert_keras.checkpoints.families.layouts import block_rules
from sbert_keras.checkpoints.families.layouts import embedding_rules
from sbert_keras.checkpoints.families.layouts import kerashub_sublayer
from sbert_keras.checkpoints.tokenizer_json import bert_tokenizer
from sbert_keras.model.backbone import BertLayoutBackbone

# Backbone argument -> DistilBERT's `config.json` field.
DISTILBERT_FIELDS = {
    "vocabulary_size": "vocab_size",
    "num_layers": "n_layers",
    "num_heads": "n_heads",
    "hidden_dim": "dim",
    "intermediate_dim": "hidden_dim",
    "max_sequence_length": "max_position_embeddings",
    "dropout": "dropout",
}


class DistilBertFamily(Family):
    """`model_type` "distilbert": WordPiece `[CLS] text [SEP]`, KerasHub's `DistilBertBackbone`."""

    name = "distilbert"
    model_types = ("distilbert",)
    architecture = "DistilBertModel"
    fields = DISTILBERT_FIELDS
    activation_field = "activation"
    attention_dropout_field = "attention_dropout"
    layer_prefix = "transformer.layer."
    vocabulary_files = ("vocab.txt",)
    tokenizer_json_first = True
    tokenizer_class = "DistilBertTokenizer"

    def weight_table(self, arguments):
        return embedding_rules(arguments) + block_rules(
            arguments, self.layer_prefix, DISTILBERT_BLOCK, kerashub_sublayer
        )

    def tokenizer(self, folder, lowercase):
        return bert_tokenizer(folder, lowercase=lowercase)

    def build_backbone(self, arguments, dtype=None):
        if arguments["activation"] == "gelu":
            return keras_hub.models.DistilBertBackbone(**backbone_options(arguments, dtype))
        return BertLayoutBackbone(
            activation=arguments["activation"],
            layer_norm_epsilon=arguments["layer_norm_epsilon"],
            **backbone_options(arguments, dtype),
        )

    def owns(self, backbone, tokenizer):
        return type(backbone) is keras_hub.models.DistilBertBackbone and isinstance(
            tokenizer, keras_hub.models.BertTokenizer
        )

    def config_constants(self, tokenizer):
        return {"pad_token_id": tokenizer.pad_token_id, "sinusoidal_pos_embds": False}
