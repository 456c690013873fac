"""Which family loads a folder, and which family writes an encoder.

`FAMILIES` lists one instance of each supported family. The loader picks by
`config.json`'s `model_type` (`family_for_config`); the sentence-transformers
writer by the encoder's backbone and tokenizer classes
(`family_for_encoder`). Anything else gets an error naming what it found
and what is supported.
"""

import os

from sbert_keras.checkpoints.families.bert import BertFamily
from sbert_keras.checkpoints.families.bert import RobertaFamily
from sbert_keras.checkpoints.families.distilbert import DistilBertFamily
from sbert_keras.checkpoints.families.mpnet import MPNetFamily
from sbert_keras.checkpoints.families.xlm_roberta import XLMRobertaFamily

FAMILIES = (BertFamily(), RobertaFamily(), DistilBertFamily(), MPNetFamily(), XLMRobertaFamily())
SUPPORTED_MODEL_TYPES = tuple(t for family in FAMILIES for t in family.model_types)


def family_for_config(folder, config):
    """The family of a Hugging Face folder's `config.json` (`model_type`).

    Raises:
        ValueError: a `model_type` no family loads; the file is named.
    """
    model_type = config.get("model_type")
    for family in FAMILIES:
        if model_type in family.model_types:
            return family
    raise ValueError(
        f"{os.path.join(folder, 'config.json')}: model_type={model_type!r} is not supported; "
        f"supported: {', '.join(SUPPORTED_MODEL_TYPES)}. KerasHub presets of any text backbone "
        "load through `SentenceEncoder.from_preset(name)`."
    )


def family_for_encoder(backbone, tokenizer):
    """The family that writes this backbone and tokenizer as a Hugging Face model.

    Raises:
        ValueError: a backbone or tokenizer class that no family writes (a
            custom backbone); both classes are named.
    """
    for family in FAMILIES:
        if family.owns(backbone, tokenizer):
            family.check_savable(backbone, tokenizer)
            return family
    raise ValueError(
        f"A {type(backbone).__name__} with a {type(tokenizer).__name__} has no Hugging Face layout that "
        "sbert_keras can write; sentence-transformers folders are written for "
        f"{', '.join(family.name for family in FAMILIES)} encoders (as `from_preset` builds them). "
        "Save it with `encoder.save_to_preset` or `encoder.save` instead."
    )
