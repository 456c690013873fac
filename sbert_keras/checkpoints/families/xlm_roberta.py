"""XLM-RoBERTa folders (paraphrase-multilingual-*, multilingual-e5-*, LaBSE-like XLM-R models).

The weights are RoBERTa's (same tensor names, two reserved position rows,
one token type), so the weight table is `RobertaFamily`'s. The backbone is
KerasHub's own `XLMRobertaBackbone` (RoBERTa's graph: exact GELU, epsilon
1e-5) when the configuration is exactly that, else `BertLayoutBackbone`.
The tokenizer is KerasHub's `XLMRobertaTokenizer` on a SentencePiece model:
the folder's `sentencepiece.bpe.model`, or one rebuilt from a Unigram
`tokenizer.json` (`checkpoints.sentencepiece_model`).
"""

import keras_hub

from sbert_keras.checkpoints.families.bert import RobertaFamily
from sbert_keras.checkpoints.sentencepiece_model import xlm_roberta_tokenizer
from sbert_keras.model.backbone import BertLayoutBackbone


class XLMRobertaFamily(RobertaFamily):
    """`model_type` "xlm-roberta": SentencePiece `<s> text </s>`, `XLMRobertaBackbone`."""

    name = "xlm-roberta"
    model_types = ("xlm-roberta",)
    architecture = "XLMRobertaModel"
    vocabulary_files = ("sentencepiece.bpe.model",)
    tokenizer_class = "XLMRobertaTokenizer"
    backbone_class = keras_hub.models.XLMRobertaBackbone

    def tokenizer(self, folder, lowercase):
        self.refuse_lowercasing(folder, lowercase)
        return xlm_roberta_tokenizer(folder)

    def owns(self, backbone, tokenizer):
        backbone_fits = type(backbone) in (self.backbone_class, keras_hub.models.RobertaBackbone, BertLayoutBackbone)
        return backbone_fits and isinstance(tokenizer, keras_hub.models.XLMRobertaTokenizer)
