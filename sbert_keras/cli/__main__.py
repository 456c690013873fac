"""`python -m sbert_keras.cli`: the same as the `sbert-keras` command."""

import sys

from sbert_keras.cli.parser import main

if __name__ == "__main__":
    sys.exit(main())
