"""The `sbert-keras` command line: the parser, its commands, training, the demo and the notebooks' set-up.

`parser` builds the argument parser and runs `main` (the console script
`sbert-keras`); `arguments` holds each subcommand's flags with their help
and defaults, `flag_types` the argparse types of single flags, and
`flag_checks` the checks that involve several flags or files, run before
TensorFlow is imported; `commands`, `train`, `index_commands` and
`export_formats` (`export --format`) hold what each subcommand does;
`demo` (with `demo_steps`) is `make demo`;
`notebook_setup` the shared first cells of the notebooks.

The parser and the modules it imports (`arguments`, `flag_types`,
`flag_checks`, `index_commands`) import no TensorFlow, so `sbert-keras
--help` stays fast; `main` imports a command's module (`parser.COMMANDS`)
once the arguments are parsed and checked and TensorFlow's logging is set up.
"""
