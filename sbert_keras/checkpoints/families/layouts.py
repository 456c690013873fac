"""The weight-table rules that several families share.

Every supported family is a post-LayerNorm encoder: token and position
embeddings, a LayerNorm, then blocks of self-attention (four biased linear
maps and a LayerNorm) and a feed-forward pair with a LayerNorm. Families
differ in the Hugging Face names of those tensors (`BERT_BLOCK`,
`DISTILBERT_BLOCK`, `MPNET_BLOCK`), in the Keras layer that holds them
(KerasHub's `TransformerEncoder`, read through `compat.keras_hub.block_parts`,
or `model.mpnet_layers.MPNetBlock`), in reserved position rows and in
token-type tables. `embedding_rules`, `block_rules` and `pooler_rules` build
the rules of `weight_table.WeightRule` from those differences.
"""

from sbert_keras.checkpoints.families.weight_table import LINEAR
from sbert_keras.checkpoints.families.weight_table import ZEROS
from sbert_keras.checkpoints.families.weight_table import Positions
from sbert_keras.checkpoints.families.weight_table import WeightRule
from sbert_keras.checkpoints.families.weight_table import attribute
from sbert_keras.checkpoints.families.weight_table import rule
from sbert_keras.compat.keras_hub import block_parts

# Hugging Face tensor name (after the block prefix) of each sublayer role.
BERT_BLOCK = {
    "query": "attention.self.query",
    "key": "attention.self.key",
    "value": "attention.self.value",
    "attention_output": "attention.output.dense",
    "intermediate": "intermediate.dense",
    "output": "output.dense",
    "attention_norm": "attention.output.LayerNorm",
    "feedforward_norm": "output.LayerNorm",
}
DISTILBERT_BLOCK = {
    "query": "attention.q_lin",
    "key": "attention.k_lin",
    "value": "attention.v_lin",
    "attention_output": "attention.out_lin",
    "intermediate": "ffn.lin1",
    "output": "ffn.lin2",
    "attention_norm": "sa_layer_norm",
    "feedforward_norm": "output_layer_norm",
}
MPNET_BLOCK = {
    "query": "attention.attn.q",
    "key": "attention.attn.k",
    "value": "attention.attn.v",
    "attention_output": "attention.attn.o",
    "intermediate": "intermediate.dense",
    "output": "output.dense",
    "attention_norm": "attention.LayerNorm",
    "feedforward_norm": "output.LayerNorm",
}


def kerashub_sublayer(backbone, index, role):
    """The `role` sublayer of block `index` of a KerasHub `TransformerEncoder` stack."""
    return getattr(block_parts(backbone.transformer_layers[index]), role)


def mpnet_sublayer(backbone, index, role):
    """The `role` sublayer of block `index` of an `MPNetBackbone`."""
    return backbone.transformer_layers[index].sublayer(role)


def _variable(sublayer, index, role, name):
    return lambda backbone: getattr(sublayer(backbone, index, role), name)


def embedding_rules(arguments, position_offset=0, token_types=0, prefix="embeddings."):
    """Word and position tables and their LayerNorm.

    Args:
        arguments: dict. Backbone arguments, `max_sequence_length` counting
            the file's position rows (reserved ones included).
        position_offset: int. Reserved position rows (RoBERTa, MPNet: 2).
        token_types: int. Rows of the token-type table written on saving
            (0: the model has none); on loading it is optional, and its row
            0 is folded into the positions.
        prefix: str. The tensor-name prefix of the embeddings.
    """
    hidden = arguments["hidden_dim"]
    positions = ((prefix + "position_embeddings.weight", (arguments["max_sequence_length"], hidden)),)
    types = ((prefix + "token_type_embeddings.weight", (token_types, hidden)),) if token_types else ()
    return [
        rule(
            prefix + "word_embeddings.weight",
            (arguments["vocabulary_size"], hidden),
            attribute("token_embedding.embeddings"),
        ),
        WeightRule(
            positions + types,
            attribute("embeddings.position_embedding.position_embeddings"),
            Positions(position_offset),
            frozenset(key for key, _ in types),
        ),
        rule(prefix + "LayerNorm.weight", (hidden,), attribute("embeddings_layer_norm.gamma")),
        rule(prefix + "LayerNorm.bias", (hidden,), attribute("embeddings_layer_norm.beta")),
    ]


def block_rules(arguments, prefix, names, sublayer):
    """The rules of every block: four attention maps, two feed-forward maps, two LayerNorms.

    Args:
        arguments: dict. Backbone arguments.
        prefix: str. The tensor-name prefix before a block's index (`"encoder.layer."`).
        names: dict. Role -> Hugging Face name (`BERT_BLOCK`, ...).
        sublayer: callable `(backbone, index, role) -> layer`.
    """
    hidden, inner = arguments["hidden_dim"], arguments["intermediate_dim"]
    sizes = {"query": (hidden, hidden), "key": (hidden, hidden), "value": (hidden, hidden)}
    sizes.update({"attention_output": (hidden, hidden), "intermediate": (inner, hidden), "output": (hidden, inner)})
    rules = []
    for i in range(arguments["num_layers"]):
        p = f"{prefix}{i}."
        for role, (out_dim, in_dim) in sizes.items():
            rules.append(
                rule(p + names[role] + ".weight", (out_dim, in_dim), _variable(sublayer, i, role, "kernel"), LINEAR)
            )
            rules.append(rule(p + names[role] + ".bias", (out_dim,), _variable(sublayer, i, role, "bias")))
        for role in ("attention_norm", "feedforward_norm"):
            rules.append(rule(p + names[role] + ".weight", (hidden,), _variable(sublayer, i, role, "gamma")))
            rules.append(rule(p + names[role] + ".bias", (hidden,), _variable(sublayer, i, role, "beta")))
    return rules


def pooler_rules(arguments):
    """The pooler of BERT-like Hugging Face models: unused by sentence encoders, written as zeros."""
    hidden = arguments["hidden_dim"]
    keys = (("pooler.dense.weight", (hidden, hidden)), ("pooler.dense.bias", (hidden,)))
    return [WeightRule(keys, None, ZEROS)]
