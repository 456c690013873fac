"""The package as users install it: a wheel built from the tracked files, in a fresh virtual environment.

The wheel is built from a copy of the files git tracks (so nothing untracked
sneaks in), installed (not editable) into a new venv, and run from outside
the checkout: `import sbert_keras` must come from that venv, the
`sbert-keras` script must answer `--version`, and the MiniLM model must
encode a sentence. The new venv borrows the already installed dependencies
(TensorFlow and the rest) through a `.pth` line rather than downloading
them again; a check of the wheel's declared requirements against them
confirms that they satisfy it.
"""

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest
import tomllib

from conftest import ROOT
from conftest import minilm_path


def run(argv, **kwargs):
    done = subprocess.run([str(arg) for arg in argv], capture_output=True, text=True, timeout=600, **kwargs)
    assert done.returncode == 0, f"{argv}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("builds the wheel from the files git tracks: needs a git checkout")
    source = tmp_path_factory.mktemp("source")
    for name in run(["git", "-C", ROOT, "ls-files"]).stdout.splitlines():
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    dist = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", dist, source])
    (path,) = dist.glob("sbert_keras-*.whl")
    return path


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    root = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", "--without-pip", root])
    python = root / "bin" / "python"
    site = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    (root / site / "installed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel])
    return root


def test_wheel_holds_every_subpackage_and_the_metadata(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tracked = run(["git", "-C", ROOT, "ls-files", "sbert_keras"]).stdout.split()
    assert sorted(name for name in names if name.startswith("sbert_keras/")) == sorted(tracked)
    metadata = next(name for name in names if name.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for label, url in project["urls"].items():
        assert f"Project-URL: {label}, {url}" in text
    assert "Apache-2.0" in text
    assert any(name.endswith("entry_points.txt") for name in names)


def test_installed_wheel_encodes_a_sentence_outside_the_checkout(venv, tmp_path):
    python = venv / "bin" / "python"
    code = (
        "import json, sbert_keras\n"
        f"encoder = sbert_keras.SentenceEncoder.from_preset({str(minilm_path())!r})\n"
        "vector = encoder.encode('A man is playing a guitar.')\n"
        "print(json.dumps([sbert_keras.__file__, vector.shape[0], float((vector ** 2).sum())]))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = run([python, "-c", code], cwd=tmp_path, env=env)
    where, dim, norm = json.loads(done.stdout.strip().splitlines()[-1])
    assert where.startswith(str(venv)) and dim == 384 and norm == pytest.approx(1.0, abs=1e-4)
    check = (
        "from importlib import metadata\n"
        "from packaging.requirements import Requirement\n"
        "for line in metadata.requires('sbert_keras'):\n"
        "    req = Requirement(line)\n"
        "    if req.marker is None or req.marker.evaluate({'extra': ''}):\n"
        "        assert metadata.version(req.name) in req.specifier, (req, metadata.version(req.name))\n"
        "print('ok')\n"
    )
    assert run([python, "-c", check], cwd=tmp_path, env=env).stdout.strip() == "ok"


def test_installed_script_prints_its_version(venv, tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = run([venv / "bin" / "sbert-keras", "--version"], cwd=tmp_path, env=env)
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["dynamic"]["version"]
    assert version == {"attr": "sbert_keras.__version__"}
    assert (
        done.stdout.strip()
        == "sbert-keras "
        + run(
            [venv / "bin" / "python", "-c", "import sbert_keras; print(sbert_keras.__version__)"], cwd=tmp_path, env=env
        ).stdout.strip()
    )
