"""XLM-R's SentencePiece tokenizer, splitting words at every Unicode space as Hugging Face does.

Hugging Face's XLM-R tokenizer normalises with the model's character map,
then splits words at every character of Unicode's White_Space property
(`WhitespaceSplit`) before `Metaspace`. SentencePiece itself (KerasHub's
`XLMRobertaTokenizer`, through TensorFlow Text) splits only at the spaces
its character map makes, so a space the map keeps (U+0085, "next line")
joins two words into one unknown piece. `SpaceSplittingXLMRobertaTokenizer`
turns every such space into " " first (all of White_Space but U+000B,
which the map deletes).

Example:
```python
tokenizer = SpaceSplittingXLMRobertaTokenizer(proto=proto)
tokenizer(["is\\x85nice"])  # the ids of "is nice"
```
"""

import keras
import keras_hub

from sbert_keras.utils.backends import tensorflow as tf

# White_Space less U+000B, which XLM-R's character map deletes.
SPACES = r"\t\n\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}"


@keras.saving.register_keras_serializable(package="sbert_keras")
class SpaceSplittingXLMRobertaTokenizer(keras_hub.models.XLMRobertaTokenizer):
    """`XLMRobertaTokenizer` that treats every Unicode space as " ", as Hugging Face's does.

    Args:
        proto: bytes or str. The SentencePiece model (bytes or a file path).
        **kwargs: passed to `keras_hub.models.XLMRobertaTokenizer`.
    """

    def tokenize(self, inputs):
        """Strings -> ids, every White_Space character read as " "."""
        inputs = tf.strings.regex_replace(tf.convert_to_tensor(inputs, tf.string), f"[{SPACES}]", " ")
        return super().tokenize(inputs)
