"""MPNet folders (all-mpnet-base-v2, multi-qa-mpnet-*, ...).

MPNet loads into `model.mpnet_backbone.MPNetBackbone` (KerasHub has no
MPNet). Its tensors are `layouts.MPNET_BLOCK` in each block plus the one
relative attention bias table `encoder.relative_attention_bias.weight`
(`[buckets, heads]`) shared by all blocks. Hugging Face buckets relative
positions into 32 buckets whatever `relative_attention_num_buckets` says
(`MPNetEncoder.compute_position_bias` is called without it), so other
values are refused. Positions start after two reserved rows, as in
RoBERTa; there are no token types. The tokenizer is WordPiece with
`<s>`/`</s>` (`tokenizer_json.MPNetTokenizer`).
"""

from sbert_keras.checkpoints.families.base import Family
from sbert_keras.checkpoints.families.layouts import MPNET_BLOCK
from sbert_keras.checkpoints.families.layouts import block_rules
from sbert_keras.checkpoints.families.layouts import embedding_rules
from sbert_keras.checkpoints.families.layouts import mpnet_sublayer
from sbert_keras.checkpoints.families.layouts import pooler_rules
from sbert_keras.checkpoints.families.weight_table import attribute
from sbert_keras.checkpoints.families.weight_table import rule
from sbert_keras.checkpoints.tokenizer_json import MPNetTokenizer
from sbert_keras.checkpoints.tokenizer_json import bert_tokenizer
from sbert_keras.model.backbone_config import HF_FIELDS
from sbert_keras.model.mpnet_backbone import MPNetBackbone

NUM_BUCKETS = 32


class MPNetFamily(Family):
    """`model_type` "mpnet": WordPiece `<s> text </s>`, `MPNetBackbone`."""

    name = "mpnet"
    model_types = ("mpnet",)
    architecture = "MPNetModel"
    fields = HF_FIELDS
    position_offset = 2
    vocabulary_files = ("vocab.txt",)
    tokenizer_json_first = True
    tokenizer_class = "MPNetTokenizer"

    def check_config(self, config, source):
        buckets = config.get("relative_attention_num_buckets", NUM_BUCKETS)
        if buckets != NUM_BUCKETS:
            raise ValueError(
                f"{source}: relative_attention_num_buckets={buckets!r} is not supported: Hugging Face's "
                f"MPNet buckets relative positions into {NUM_BUCKETS} whatever the configuration says."
            )

    def weight_table(self, arguments):
        bias = rule(
            "encoder.relative_attention_bias.weight",
            (NUM_BUCKETS, arguments["num_heads"]),
            attribute("relative_position_bias.embeddings"),
        )
        return (
            embedding_rules(arguments, self.position_offset)
            + [bias]
            + block_rules(arguments, self.layer_prefix, MPNET_BLOCK, mpnet_sublayer)
            + pooler_rules(arguments)
        )

    def tokenizer(self, folder, lowercase):
        return bert_tokenizer(folder, lowercase=lowercase, tokenizer_class=MPNetTokenizer)

    def build_backbone(self, arguments, dtype=None):
        return MPNetBackbone(**arguments, num_buckets=NUM_BUCKETS, dtype=dtype)

    def owns(self, backbone, tokenizer):
        return type(backbone) is MPNetBackbone and isinstance(tokenizer, MPNetTokenizer)

    def config_constants(self, tokenizer):
        return {
            "relative_attention_num_buckets": NUM_BUCKETS,
            "pad_token_id": 1,
            "bos_token_id": 0,
            "eos_token_id": 2,
        }

    def check_savable(self, backbone, tokenizer):
        super().check_savable(backbone, tokenizer)
        if (backbone.num_buckets, backbone.max_distance) != (NUM_BUCKETS, 128):
            raise ValueError(
                f"MPNetBackbone(num_buckets={backbone.num_buckets}, max_distance={backbone.max_distance}) cannot "
                "be saved as Hugging Face MPNet, which uses 32 buckets and distance 128."
            )
