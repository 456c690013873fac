"""XLM-R's SentencePiece tokenizer, splitting words at every Unicode space as Hugging Face does.

Hugging Face's XLM-R tokenizer normalises with the model's character map,
then splits words at every character of Unicode's White_Space property
(`WhitespaceSplit`) before `Metaspace`. SentencePiece itself (KerasHub's
`XLMRobertaTokenizer`, through TensorFlow Text) splits only at the spaces
its character map makes, so a space the map keeps (U+0085, "next line")
joins two words into one unknown piece. `SpaceSplittingXLMRobertaTokenizer`
turns every such space into " " first (all of White_Space but U+000B,
which the map deletes).

KerasHub reads a model's pieces with the `sentencepiece` package when
TensorFlow Text is absent; without either (a JAX or PyTorch install), the
tokenizer reads them itself (`model.sentencepiece_proto`), so it can still
be built, saved and tokenise on the host (`model.host_tokenizer`).

Example:
```python
tokenizer = SpaceSplittingXLMRobertaTokenizer(proto=proto)
tokenizer(["is\\x85nice"])  # the ids of "is nice"
```
"""

import keras
import keras_hub

from sbert_keras.model.host_tokenizer import runs_on_host
from sbert_keras.model.host_tokenizer import tokenize_on_host
from sbert_keras.model.sentencepiece_proto import FAIRSEQ_PREFIX
from sbert_keras.model.sentencepiece_proto import parse_model
from sbert_keras.model.sentencepiece_proto import proto_bytes
from sbert_keras.utils.backends import tensorflow as tf

# White_Space less U+000B, which XLM-R's character map deletes.
SPACES = r"\t\n\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}"


@keras.saving.register_keras_serializable(package="sbert_keras")
class SpaceSplittingXLMRobertaTokenizer(keras_hub.models.XLMRobertaTokenizer):
    """`XLMRobertaTokenizer` that treats every Unicode space as " ", as Hugging Face's does.

    Args:
        proto: bytes or str. The SentencePiece model (bytes or a file path).
        **kwargs: passed to `keras_hub.models.XLMRobertaTokenizer`.

    Example:
    ```python
    tokenizer = SpaceSplittingXLMRobertaTokenizer(proto="sentencepiece.bpe.model")
    tokenizer.token_to_id("<mask>")
    ```
    """

    def set_proto(self, proto):
        """Sets the SentencePiece model; without `sentencepiece` and TensorFlow Text, reads its pieces itself."""
        self._fairseq_vocabulary = None
        try:
            super().set_proto(proto)
            return
        except ImportError:  # KerasHub found neither TensorFlow Text nor sentencepiece
            pass
        self.proto = proto_bytes(proto)
        pieces = [piece for piece, _, _ in parse_model(self.proto)["pieces"]]
        self._fairseq_vocabulary = [*FAIRSEQ_PREFIX, *pieces[3:], "<mask>"]
        self._fairseq_ids = {token: i for i, token in enumerate(self._fairseq_vocabulary)}
        self.mask_token_id = len(self._fairseq_vocabulary) - 1

    def vocabulary_size(self):
        if getattr(self, "_fairseq_vocabulary", None) is None:
            return super().vocabulary_size()
        return len(self._fairseq_vocabulary)

    def get_vocabulary(self):
        if getattr(self, "_fairseq_vocabulary", None) is None:
            return super().get_vocabulary()
        return list(self._fairseq_vocabulary)

    def id_to_token(self, id):
        if getattr(self, "_fairseq_vocabulary", None) is None:
            return super().id_to_token(id)
        if not 0 <= int(id) < len(self._fairseq_vocabulary):
            raise ValueError(f"`id` must be in range [0, {len(self._fairseq_vocabulary) - 1}]. Received: {id}")
        return self._fairseq_vocabulary[int(id)]

    def token_to_id(self, token):
        if getattr(self, "_fairseq_vocabulary", None) is None:
            return super().token_to_id(token)
        if isinstance(token, bytes):
            token = token.decode("utf-8")
        return self._fairseq_ids.get(token, self.unk_token_id)

    def tokenize(self, inputs):
        """Strings -> ids, every White_Space character read as " " (on the host outside TensorFlow)."""
        if runs_on_host(inputs):
            return tokenize_on_host(self, inputs)
        inputs = tf.strings.regex_replace(tf.convert_to_tensor(inputs, tf.string), f"[{SPACES}]", " ")
        return super().tokenize(inputs)
