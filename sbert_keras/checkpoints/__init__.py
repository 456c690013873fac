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
`model_card`. The loader's names are importable from
`sbert_keras.checkpoints` too.
"""

from sbert_keras.checkpoints.keras_files import CorruptModelError
from sbert_keras.checkpoints.keras_files import load_keras_file
from sbert_keras.checkpoints.presets import BERT_TYPES
from sbert_keras.checkpoints.presets import ROBERTA_POSITION_OFFSET
from sbert_keras.checkpoints.presets import ROBERTA_TYPES
from sbert_keras.checkpoints.presets import SENTENCEPIECE_TYPES
from sbert_keras.checkpoints.presets import PresetUnavailableError
from sbert_keras.checkpoints.presets import is_transformers_folder
from sbert_keras.checkpoints.presets import load_keras_hub_preset
from sbert_keras.checkpoints.presets import load_preset
from sbert_keras.checkpoints.presets import load_safetensors
from sbert_keras.checkpoints.presets import load_transformers_folder
from sbert_keras.checkpoints.presets import port_weights
from sbert_keras.checkpoints.st_modules import read_sentence_transformers_settings
from sbert_keras.checkpoints.tokenizer_json import LowercasingBertTokenizer
