"""`Family`: what one Hugging Face model type needs to load and to be saved again.

A family pairs a `model_type` of `config.json` with a Keras backbone and a
KerasHub tokenizer. Everything that differs between model types is a
family attribute or method, and everything both directions share is read
from one place:

- `layout` (`model.backbone_config.ConfigLayout`): the `config.json` field of
  each backbone argument, used to read the arguments and to write them back;
  its tensor shapes come from the family's `weight_table`;
- `weight_table(arguments)`: the list of `weight_table.WeightRule`s, used by
  the header check, by loading and by saving;
- `tokenizer(folder, lowercase)` reads the tokenizer files;
  `tokenizer_files(tokenizer)` writes them (`checkpoints.tokenizer_files`).

`load_transformers_folder` in `checkpoints/presets.py` picks a family by
`model_type` (`registry.family_for_config`), the sentence-transformers writer
by the encoder's backbone and tokenizer (`registry.family_for_encoder`).
"""

import os

from sbert_keras.checkpoints.families.weight_table import assign_from_tensors
from sbert_keras.checkpoints.families.weight_table import expected_shapes
from sbert_keras.checkpoints.families.weight_table import tensors_from_variables
from sbert_keras.checkpoints.tokenizer_files import tokenizer_files
from sbert_keras.model.backbone_config import ConfigLayout
from sbert_keras.model.backbone_config import backbone_arguments
from sbert_keras.model.backbone_config import safetensors_path
from sbert_keras.model.backbone_config import weight_shapes

ACTIVATIONS = ("gelu", "relu")


class Family:
    """One Hugging Face model type: its config fields, weight table and tokenizer.

    Subclasses set the class attributes and implement `weight_table`,
    `tokenizer`, `build_backbone`, `owns` and `tokenizer_files`.

    Attributes:
        name: str. The `model_type` written to `config.json`.
        model_types: tuple of str. The `model_type`s this family loads.
        architecture: str. `config.json`'s `architectures` entry.
        fields: dict. Backbone argument -> `config.json` field.
        defaults: dict. Arguments whose field may be absent, and their value.
        activation_field: str. The field naming the feed-forward activation.
        attention_dropout_field: str. The field of the attention dropout
            (written equal to the dropout).
        position_offset: int. Position rows reserved before the first position.
        layer_prefix: str. Tensor-name prefix before a block's index.
        vocabulary_files: tuple of str. The separate vocabulary files a
            folder of this family may hold instead of `tokenizer.json`.
        tokenizer_json_first: bool. `tokenizer.json` is read before
            `vocabulary_files` (WordPiece: `tokenizer_json.wordpiece_vocabulary`).
        tokenizer_class: str. transformers' tokenizer class, for
            `tokenizer_config.json`.
    """

    name = None
    model_types = ()
    architecture = None
    fields = {}
    defaults = {"layer_norm_epsilon": 1e-12, "dropout": 0.1}
    activation_field = "hidden_act"
    attention_dropout_field = "attention_probs_dropout_prob"
    position_offset = 0
    layer_prefix = "encoder.layer."
    vocabulary_files = ()
    tokenizer_json_first = False
    tokenizer_class = None

    @property
    def layout(self):
        """The `ConfigLayout` of this family (fields, defaults, tensor shapes)."""
        return ConfigLayout(
            self.fields,
            self.defaults,
            lambda arguments: expected_shapes(self.weight_table(arguments)),
            self.layer_prefix,
        )

    # === Loading ===

    def check_config(self, config, source):
        """Family-specific checks of `config.json` (none by default)."""

    def read_arguments(self, folder, config, load_weights):
        """The backbone's arguments from `config.json`, checked (against the weights' header too).

        Returns:
            dict of backbone arguments, with `activation`.
        """
        source = os.path.join(folder, "config.json")
        activation = config.get(self.activation_field, "gelu")
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"{source}: {self.activation_field}={activation!r} is not supported; use one of {ACTIVATIONS}."
            )
        self.check_config(config, source)
        weights = safetensors_path(folder) if load_weights else None
        shapes = weight_shapes(weights) if load_weights else None
        arguments = backbone_arguments(config, source, self.position_offset, self.layout, shapes, weights)
        arguments["activation"] = activation
        return arguments

    def vocabulary_source(self, folder):
        """The file the tokenizer's vocabulary is read from (named in errors)."""
        if self.tokenizer_json_first and os.path.isfile(os.path.join(folder, "tokenizer.json")):
            return os.path.join(folder, "tokenizer.json")
        for name in self.vocabulary_files:
            if os.path.isfile(os.path.join(folder, name)):
                return os.path.join(folder, name)
        return os.path.join(folder, "tokenizer.json")

    def file_arguments(self, arguments):
        """`arguments` with `max_sequence_length` counting the file's reserved position rows."""
        return {**arguments, "max_sequence_length": arguments["max_sequence_length"] + self.position_offset}

    def assign_weights(self, backbone, arguments, tensors, source):
        """Assigns the Hugging Face `tensors` (prefix stripped) through the weight table."""
        assign_from_tensors(self.weight_table(self.file_arguments(arguments)), backbone, tensors, source)

    # === Saving ===

    def arguments_of(self, backbone):
        """The backbone's arguments (`layer_norm_epsilon` and `activation` included)."""
        config = backbone.get_config()
        arguments = {name: config[name] for name in list(self.fields) + ["dropout"] if name in config}
        arguments["layer_norm_epsilon"] = config.get("layer_norm_epsilon", backbone.embeddings_layer_norm.epsilon)
        arguments["activation"] = config.get("activation", "gelu")  # KerasHub's classes fix the exact GELU
        return arguments

    def hf_config(self, backbone, tokenizer):
        """`config.json` for `backbone`, from the same field table the loader reads."""
        arguments = self.file_arguments(self.arguments_of(backbone))
        config = {"architectures": [self.architecture], "model_type": self.name, "dtype": "float32"}
        for name, field in self.fields.items():
            config[field] = arguments[name]
        config[self.attention_dropout_field] = arguments["dropout"]
        config["initializer_range"] = 0.02
        config[self.activation_field] = arguments["activation"]
        config.update(self.config_constants(tokenizer))
        return dict(sorted(config.items()))

    def config_constants(self, tokenizer):
        """Fields of `config.json` that are not backbone arguments (special token ids, ...)."""
        return {}

    def hf_tensors(self, backbone):
        """`{tensor: float32 array}` named as Hugging Face's model of this family names them."""
        return tensors_from_variables(self.weight_table(self.file_arguments(self.arguments_of(backbone))), backbone)

    def tokenizer_files(self, tokenizer, max_length):
        """The tokenizer files of a sentence-transformers folder (`checkpoints.tokenizer_files`)."""
        return tokenizer_files(tokenizer, self.tokenizer_class, max_length)

    def check_savable(self, backbone, tokenizer):
        """Raises when `backbone` has an activation that `config.json` cannot name."""
        activation = self.arguments_of(backbone)["activation"]
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"{type(backbone).__name__} with activation={activation!r} cannot be saved as a "
                f"Hugging Face {self.name!r} model: its {self.activation_field} takes {ACTIVATIONS} here."
            )
