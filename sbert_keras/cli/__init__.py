"""The `sbert-keras` command line: the parser, its commands, training, the demo and the notebooks' set-up.

`parser` builds the argument parser and runs `main` (the console script
`sbert-keras`); `arguments` holds each subcommand's flags with their help
and defaults, `flag_types` the argparse types of single flags, and
`flag_checks` the checks that involve several flags or files, run before
TensorFlow is imported; `commands`, `train`, `index_commands` and
`export_formats` (`export --format`) hold what each subcommand does;
`demo` (with `demo_steps`) is `make demo`;
`notebook_setup` the shared first cells of the notebooks. The parser's
names are importable from `sbert_keras.cli` too.

The parser and the modules it imports (`arguments`, `flag_types`,
`flag_checks`, `index_commands`) import no TensorFlow, so `sbert-keras
--help` stays fast; `main` imports a command's module (`parser.COMMANDS`)
once the arguments are parsed and checked and TensorFlow's logging is set up.
"""

from sbert_keras.cli.parser import EMBED_CORPUS_HELP
from sbert_keras.cli.parser import EXPECTED_ERRORS
from sbert_keras.cli.parser import MINING_FLAGS
from sbert_keras.cli.parser import add_prompt_flags
from sbert_keras.cli.parser import build_parser
from sbert_keras.cli.parser import dimensions
from sbert_keras.cli.parser import embed_corpus_args
from sbert_keras.cli.parser import error_message
from sbert_keras.cli.parser import main
from sbert_keras.cli.parser import non_negative_float
from sbert_keras.cli.parser import non_negative_int
from sbert_keras.cli.parser import positive_int
from sbert_keras.cli.parser import training_precision
