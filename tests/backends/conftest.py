"""The suite without TensorFlow: run by `make test-backends` in `.venv-backends`, ignored where TensorFlow is.

`make test-backends` runs `pytest --confcutdir tests/backends tests/backends`, so `tests/conftest.py`
(TensorFlow's tiny encoders) is not loaded. In the main environment, where TensorFlow is installed,
these files are not collected: the suite's point is a process that never had TensorFlow.
"""

import importlib.util

collect_ignore_glob = ["*.py"] if importlib.util.find_spec("tensorflow") is not None else []
