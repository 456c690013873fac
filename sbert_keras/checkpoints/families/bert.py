"""BERT and RoBERTa folders (all-MiniLM-*, all-distilroberta-*, ...).

BERT loads into `BertLayoutBackbone` (exact GELU, any epsilon; KerasHub's
`BertBackbone` has the tanh GELU). RoBERTa loads into KerasHub's own
`RobertaBackbone` when its configuration is RoBERTa's exact one (GELU,
epsilon 1e-5), else into `BertLayoutBackbone`. Both read the same tensors
(`layouts.BERT_BLOCK`); RoBERTa reserves two position rows. The token-type
row 0 is folded into the positions; saving writes zero token types and
zero reserved rows, which load back to the same table.
"""

import os

import keras_hub

from sbert_keras.checkpoints.families.base import Family
from sbert_keras.checkpoints.families.layouts import BERT_BLOCK
from sbert_keras.checkpoints.families.layouts import block_rules
from sbert_keras.checkpoints.families.layouts import embedding_rules
from sbert_keras.checkpoints.families.layouts import kerashub_sublayer
from sbert_keras.checkpoints.families.layouts import pooler_rules
from sbert_keras.checkpoints.tokenizer_json import bert_tokenizer
from sbert_keras.checkpoints.tokenizer_json import roberta_tokenizer
from sbert_keras.model.backbone import BertLayoutBackbone
from sbert_keras.model.backbone_config import HF_FIELDS


def backbone_options(arguments, dtype):
    """`arguments` as keyword arguments of a backbone class, without the file-only ones."""
    return {name: value for name, value in arguments.items() if name not in ("activation", "layer_norm_epsilon")} | {
        "dtype": dtype
    }


class BertFamily(Family):
    """`model_type` "bert": WordPiece `[CLS] text [SEP]`, `BertLayoutBackbone`."""

    name = "bert"
    model_types = ("bert",)
    architecture = "BertModel"
    fields = HF_FIELDS
    vocabulary_files = ("vocab.txt",)
    tokenizer_json_first = True
    tokenizer_class = "BertTokenizer"
    token_types = 2

    def weight_table(self, arguments):
        return (
            embedding_rules(arguments, self.position_offset, self.token_types)
            + block_rules(arguments, self.layer_prefix, BERT_BLOCK, kerashub_sublayer)
            + pooler_rules(arguments)
        )

    def tokenizer(self, folder, lowercase):
        return bert_tokenizer(folder, lowercase=lowercase)

    def build_backbone(self, arguments, dtype=None):
        return BertLayoutBackbone(
            activation=arguments["activation"],
            layer_norm_epsilon=arguments["layer_norm_epsilon"],
            **backbone_options(arguments, dtype),
        )

    def owns(self, backbone, tokenizer):
        return type(backbone) is BertLayoutBackbone and isinstance(tokenizer, keras_hub.models.BertTokenizer)

    def config_constants(self, tokenizer):
        return {"type_vocab_size": self.token_types, "pad_token_id": tokenizer.pad_token_id}


class RobertaFamily(BertFamily):
    """`model_type` "roberta": byte-level BPE `<s> text </s>`, KerasHub's `RobertaBackbone`."""

    name = "roberta"
    model_types = ("roberta",)
    architecture = "RobertaModel"
    vocabulary_files = ("vocab.json",)
    tokenizer_json_first = False
    tokenizer_class = "RobertaTokenizer"
    position_offset = 2
    token_types = 1
    backbone_class = keras_hub.models.RobertaBackbone
    # The configuration the KerasHub backbone class computes exactly.
    exact_configuration = ("gelu", 1e-5)

    def refuse_lowercasing(self, folder, lowercase):
        """sentence-transformers' `do_lower_case` has no equivalent in these tokenizers."""
        if lowercase:
            raise ValueError(
                f"{os.path.join(folder, 'sentence_bert_config.json')}: do_lower_case=true is supported "
                f"for WordPiece folders only, not for model_type={self.name!r}."
            )

    def tokenizer(self, folder, lowercase):
        self.refuse_lowercasing(folder, lowercase)
        return roberta_tokenizer(folder)

    def build_backbone(self, arguments, dtype=None):
        if (arguments["activation"], arguments["layer_norm_epsilon"]) == self.exact_configuration:
            return self.backbone_class(**backbone_options(arguments, dtype))
        return super().build_backbone(arguments, dtype)

    def owns(self, backbone, tokenizer):
        backbone_fits = type(backbone) in (self.backbone_class, BertLayoutBackbone)
        return backbone_fits and isinstance(tokenizer, keras_hub.models.RobertaTokenizer)

    def config_constants(self, tokenizer):
        return {"type_vocab_size": 1, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2}
