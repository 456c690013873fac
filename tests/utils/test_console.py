"""A clean console: the entry points print no TensorFlow C++ log line.

The subprocesses start with the environment of a new user's shell: no
`TF_CPP_MIN_LOG_LEVEL`, so the entry points must set up logging themselves.
"""

import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT
from conftest import family_fixture
from conftest import large
from conftest import minilm_path
from sbert_keras.utils import console

# absl's C++ log format, or what the known start-up lines say.
TF_LOG_LINE = re.compile(r"^[IWEF]\d{4} |cuInit|oneDNN custom operations|absl::InitializeLog", re.MULTILINE)
NOTICES = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    (
        "I0000 00:00:1795425248.194190    4760 port.cc:153] oneDNN custom operations are on. You may "
        "see slightly different numerical results"
    ),
    (
        "I0000 00:00:1795425248.194673    4760 cudart_stub.cc:31] Could not find cuda drivers on your "
        "machine, GPU will not be used."
    ),
    (
        "I0000 00:00:1795425248.903825    4760 cpu_feature_guard.cc:227] This TensorFlow binary is "
        "optimized to use available CPU instructions in performance-critical operations."
    ),
    (
        "To enable the following instructions: AVX2 AVX512F AVX512_VNNI AVX512_BF16 FMA, in other "
        "operations, rebuild TensorFlow with the appropriate compiler flags."
    ),
    (
        "E0000 00:00:1795425257.230452    4760 cuda_platform.cc:52] failed call to cuInit: INTERNAL: "
        "CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)"
    ),
    (
        "E0000 00:00:1795425555.810554    8627 util.cc:131] oneDNN supports DT_INT64 only on platforms "
        "with AVX-512. Falling back to the default Eigen-based implementation if present."
    ),
]

REAL_ERRORS = [
    "E0000 00:00:1795425257.230452    4760 op_kernel.cc:1830] OP_REQUIRES failed: out of memory",
    "F0000 00:00:1795425257.230452    4760 check.cc:12] Check failed: x == y",
    "ValueError: bad input",
    "UserWarning: something a user should read",
]


def run(args, env=None, **kwargs):
    """Runs `args` with this checkout first on the path and no TF logging settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_CPP", "PYTHONPATH"))}
    env.update(kwargs.pop("extra_env", {}))
    env["PYTHONPATH"] = os.pathsep.join([*kwargs.pop("path", []), str(ROOT)])
    return subprocess.run(
        args,
        env=env,
        cwd=kwargs.pop("cwd", ROOT),
        capture_output=True,
        text=True,
        check=False,
        timeout=kwargs.pop("timeout", 300),
        **kwargs,
    )


@pytest.mark.parametrize("line", NOTICES)
def test_startup_notices_are_recognised(line):
    assert console.is_startup_notice(line + "\n")


@pytest.mark.parametrize("line", REAL_ERRORS)
def test_real_errors_are_not_notices(line):
    assert not console.is_startup_notice(line + "\n")


FAKE_TENSORFLOW = """
import os, sys
for line in {lines!r}:
    os.write(2, (line + "\\n").encode())
print("a Python warning while importing", file=sys.stderr)
if os.environ.get("FAKE_TF_FAIL"):
    raise ImportError("broken TensorFlow install")
class config:
    @staticmethod
    def list_physical_devices():
        os.write(2, {cuinit!r})
        return []
def function(f):
    return f
def transpose(x):
    return x
def zeros(shape, dtype):
    return None
bool = "bool"
"""


@pytest.fixture
def fake_tensorflow(tmp_path):
    """A stand-in `tensorflow` that logs like TF 2.21 (notices and one real error)."""
    package = tmp_path / "tensorflow"
    package.mkdir()
    source = FAKE_TENSORFLOW.format(lines=NOTICES[:5] + REAL_ERRORS[:1], cuinit=(NOTICES[5] + "\n").encode())
    (package / "__init__.py").write_text(source)
    return tmp_path


# The stand-in `tensorflow` is not one the package's modules can import: drop the hook
# that imports them after TensorFlow (`utils.import_hooks`), which would warn about it.
_NO_IMPORT_HOOKS = (
    "import sys\n"
    "from sbert_keras.utils import import_hooks\n"
    "sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, import_hooks._AfterImportFinder)]\n"
)


def quiet_then(code):
    quiet = "from sbert_keras.utils import console\nconsole.quiet_tensorflow()\n"
    return _NO_IMPORT_HOOKS + quiet + textwrap.dedent(code)


def test_quiet_tensorflow_drops_notices_and_keeps_everything_else(fake_tensorflow):
    code = quiet_then("""
        import os, sys
        print(os.environ["TF_CPP_MIN_LOG_LEVEL"])
        os.write(2, b"E0000 00:00:1.0    1 util.cc:131] a later line is never filtered: cuInit\\n")
    """)
    result = run([sys.executable, "-c", code], path=[str(fake_tensorflow)])
    assert result.returncode == 0, result.stderr
    assert result.stdout == "2\n"
    assert result.stderr.splitlines() == [
        "a Python warning while importing",  # Python's stderr is not held: it comes as it happens
        REAL_ERRORS[0],
        "E0000 00:00:1.0    1 util.cc:131] a later line is never filtered: cuInit",
    ]


def test_quiet_tensorflow_keeps_the_users_log_level(fake_tensorflow):
    code = quiet_then("import os; print(os.environ['TF_CPP_MIN_LOG_LEVEL'])")
    result = run([sys.executable, "-c", code], path=[str(fake_tensorflow)], extra_env={"TF_CPP_MIN_LOG_LEVEL": "0"})
    assert result.stdout == "0\n"


def test_a_failed_import_shows_everything(fake_tensorflow):
    result = run([sys.executable, "-c", quiet_then("")], path=[str(fake_tensorflow)], extra_env={"FAKE_TF_FAIL": "1"})
    assert result.returncode == 1
    for line in NOTICES[:5] + REAL_ERRORS[:1]:
        assert line in result.stderr
    assert "ImportError: broken TensorFlow install" in result.stderr


def test_held_lines_come_back_without_the_startup_notices(capfd):
    with console.startup_lines_held():
        for line in NOTICES + REAL_ERRORS[:2]:
            os.write(2, (line + "\n").encode())
        print("a Python line", file=sys.stderr)
    assert capfd.readouterr().err.splitlines() == ["a Python line", *REAL_ERRORS[:2]]


def test_held_lines_all_come_back_when_the_block_fails(capfd):
    with pytest.raises(ValueError), console.startup_lines_held():
        os.write(2, (NOTICES[5] + "\n").encode())
        raise ValueError("a user's error")
    assert capfd.readouterr().err.splitlines() == [NOTICES[5]]


def test_held_warnings_can_be_kept(capfd):
    warning = "W0000 00:00:1.0    1 cpu_allocator_impl.cc:83] Allocation of 4096 exceeds 10% of free memory."
    with console.startup_lines_held(keep_warnings=True):
        os.write(2, (warning + "\n" + NOTICES[1] + "\n").encode())
    assert capfd.readouterr().err.splitlines() == [warning]


# Held blocks in a plain interpreter (stderr is descriptor 2); a logger's handler is made in the second.
HELD_SCRIPT = """
import gc, logging
from sbert_keras.utils import console
with console.startup_lines_held():
    pass
with console.startup_lines_held():
    logging.getLogger("made_in_block").addHandler(logging.StreamHandler())  # the block's sys.stderr
gc.collect()
handler = logging.getLogger("made_in_block").handlers[0]
handler.stream.write("the handler still writes\\n")
handler.stream.flush()
"""


def test_a_held_block_leaves_no_unclosed_stream_and_keeps_a_handlers_open():
    result = run([sys.executable, "-X", "dev", "-c", HELD_SCRIPT])
    assert result.returncode == 0, result.stderr
    assert "ResourceWarning" not in result.stderr
    assert result.stderr.splitlines() == ["the handler still writes"]


# A user's script: load a tiny model folder and encode one text, twice (new shapes, a second call).
USER_SCRIPT = """
import sbert_keras
encoder = sbert_keras.SentenceEncoder.from_preset({folder!r})
print(len(encoder.encode(["a short text"])), len(encoder.encode(["one", "two texts"])))
"""


@pytest.mark.parametrize(
    "first",
    [large("", id="package-imports-tf"), pytest.param("import tensorflow\n", id="user-imports-tf")],
)
def test_a_plain_session_prints_no_tensorflow_line_it_did_not_cause(tmp_path, first):
    script = first + USER_SCRIPT.format(folder=str(family_fixture("distilbert-dense", "model")))
    env = {"SBERT_KERAS_CACHE_DIR": str(tmp_path)}  # cold, then warm: XLA's disk cache read back
    for _ in range(2):
        result = run([sys.executable, "-c", script], extra_env=env)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.split() == ["1", "2"], result.stdout
        err = result.stderr
        if first:  # the user's own `import tensorflow` logs its load-time lines: those stay
            err = "\n".join(
                line
                for line in err.splitlines()
                if not re.search(
                    r"port\.cc|cudart_stub|cpu_feature|"
                    r"absl::InitializeLog|To enable the following",
                    line,
                )
            )
        assert not TF_LOG_LINE.search(err), err
        assert re.search(r"sbert_keras: '\w+' ready in", err)  # the status line is not held


def test_the_users_log_level_is_left_alone(tmp_path):
    script = USER_SCRIPT.format(folder=str(family_fixture("distilbert-dense", "model")))
    script += "import os; print(os.environ['TF_CPP_MIN_LOG_LEVEL'])\n"
    result = run([sys.executable, "-c", script], extra_env={"TF_CPP_MIN_LOG_LEVEL": "1", "SBERT_KERAS_CACHE_DIR": ""})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[-1] == "1"


def test_importing_the_package_leaves_logging_and_tensorflow_alone():
    code = (
        "import os, sys, sbert_keras\n"
        "print('tensorflow' in sys.modules, os.environ.get('TF_CPP_MIN_LOG_LEVEL'))\n"
        "print(sorted(sbert_keras.__all__) == sorted(set(dir(sbert_keras)) & "
        "set(sbert_keras.__all__)))\n"
    )
    result = run([sys.executable, "-c", code])
    assert result.stdout.split() == ["False", "None", "True"], result.stderr


def test_cli_help_prints_no_tensorflow_line_and_imports_no_tensorflow():
    result = run([sys.executable, "-m", "sbert_keras.cli", "--help"])
    assert result.returncode == 0
    assert "usage: sbert-keras" in result.stdout
    assert not TF_LOG_LINE.search(result.stderr + result.stdout), result.stderr
    code = (
        "import sys\nfrom sbert_keras.cli.parser import main\n"
        "try:\n    main(['cluster', '--help'])\nexcept SystemExit:\n    pass\n"
        "print('tensorflow' in sys.modules)\n"
    )
    assert run([sys.executable, "-c", code]).stdout.splitlines()[-1] == "False"


def test_cli_error_is_one_line_without_tensorflow_lines(tmp_path):
    # TensorFlow is imported (the error comes after the console setup), with its status line.
    lines = tmp_path / "latin1.txt"
    lines.write_bytes("un café\n".encode("latin-1"))
    argv = ["cluster", "--model", "none.keras", "--input", str(lines), "--num-clusters", "2"]
    result = run([sys.executable, "-m", "sbert_keras.cli", *argv])
    assert result.returncode == 2
    status, error = result.stderr.splitlines()[:2], result.stderr.splitlines()[2:]
    assert status[0] == "sbert-keras: starting TensorFlow ..."
    assert re.fullmatch(r"sbert-keras: TensorFlow started in \d+\.\d s", status[1]), status
    assert error == [
        (
            f"sbert-keras cluster: error: {lines}, line 1: byte 0xe9 at column 7 is not valid "
            "UTF-8 (a Latin-1 or Windows-1252 file?); save the file as UTF-8"
        )
    ]


def test_demo_prints_no_tensorflow_line():
    minilm_path()  # skips without the MiniLM package
    result = run([sys.executable, "-m", "sbert_keras.cli.demo"], timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Done in" in result.stdout
    assert not TF_LOG_LINE.search(result.stderr + result.stdout), result.stderr


def test_keras_load_model_finds_sbert_keras_classes_after_import(tmp_path):
    # `import keras` first (as isort orders it): `import sbert_keras` then
    # registers every custom object, so a plain `keras.saving.load_model` works.
    path = tmp_path / "tiny.keras"
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT / "tests")!r})
        from conftest import tiny_encoder
        tiny_encoder().save({str(path)!r})
        """)
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True, capture_output=True)
    load = textwrap.dedent(f"""
        import keras
        import sbert_keras
        model = keras.saving.load_model({str(path)!r})
        print(type(model).__name__)
        """)
    result = subprocess.run([sys.executable, "-c", load], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-1] == "SentenceEncoder"


def test_another_keras_backend_imports_without_tensorflow_features():
    env = {**os.environ, "KERAS_BACKEND": "jax"}
    code = "import sbert_keras, keras; sbert_keras.SentenceEncoder; print(keras.backend.backend())"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "jax"
