"""Model folders are read only inside themselves, from regular files of bounded size."""

import json
import os
import shutil
import stat

import numpy as np
import pytest

from conftest import shared_path
from harness import error_lines
from sbert_keras import SentenceEncoder
from sbert_keras.cli.parser import main
from sbert_keras.utils import model_files
from sbert_keras.utils.model_files import read_json


def writable_copy(source, target):
    """A copy of a model folder that the test may edit (the originals are read-only)."""
    shutil.copytree(source, target, copy_function=shutil.copyfile)
    for root, dirs, _ in os.walk(target):
        for name in dirs:
            os.chmod(os.path.join(root, name), stat.S_IRWXU)
    os.chmod(target, stat.S_IRWXU)
    return target


def tiny_roberta(tmp_path, name="model"):
    """An editable copy of the tiny RoBERTa sentence-transformers folder."""
    return writable_copy(shared_path("reference", "tiny-roberta", "model"), tmp_path / name)


def edit_json(path, **changes):
    content = json.loads(path.read_text())
    content.update(changes)
    path.write_text(json.dumps(content))


def set_pooling_path(folder, path):
    modules = json.loads((folder / "modules.json").read_text())
    modules[1]["path"] = str(path)
    (folder / "modules.json").write_text(json.dumps(modules))


def outside_pooling(tmp_path):
    """A Pooling config outside the model folder, one that would load (cls)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.json").write_text(json.dumps({"pooling_mode": "cls"}))
    return outside


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink"])
def test_module_paths_outside_the_folder_are_refused(tmp_path, kind):
    folder = tiny_roberta(tmp_path)
    outside = outside_pooling(tmp_path)
    if kind == "dotdot":
        set_pooling_path(folder, "../outside")
    elif kind == "absolute":
        set_pooling_path(folder, outside)
    else:
        shutil.rmtree(folder / "1_Pooling")
        (folder / "1_Pooling").symlink_to(outside)
    with pytest.raises(ValueError, match=r"modules\.json: module 2 `path`") as e:
        SentenceEncoder.from_preset(folder)
    assert ("must be relative" if kind == "absolute" else "leads outside the model folder") in str(e.value)


def test_a_symlink_inside_the_folder_and_the_hub_cache_layout_load(tmp_path):
    # Hugging Face's cache: snapshots/<revision>/<file> links to ../../blobs/<hash>.
    source = tiny_roberta(tmp_path, "source")
    blobs = tmp_path / "models--tiny" / "blobs"
    snapshot = tmp_path / "models--tiny" / "snapshots" / "abc123"
    blobs.mkdir(parents=True)
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if path.is_dir():
            (snapshot / relative).mkdir(parents=True, exist_ok=True)
            continue
        (snapshot / relative).parent.mkdir(parents=True, exist_ok=True)
        blob = blobs / str(relative).replace(os.sep, "_")
        shutil.copyfile(path, blob)
        (snapshot / relative).symlink_to(os.path.relpath(blob, (snapshot / relative).parent))
    cached = SentenceEncoder.from_preset(snapshot)
    direct = SentenceEncoder.from_preset(source)
    texts = ["a small test", "another sentence"]
    np.testing.assert_allclose(cached.encode(texts), direct.encode(texts), atol=1e-6)
    # A link to a file inside the folder is fine too.
    os.replace(source / "config.json", source / "real_config.json")
    (source / "config.json").symlink_to("real_config.json")
    assert SentenceEncoder.from_preset(source).backbone.hidden_dim == 64


@pytest.mark.parametrize("name", ["config.json", "1_Pooling/config.json", "tokenizer_config.json"])
def test_json_linked_to_a_device_is_refused(tmp_path, name):
    folder = tiny_roberta(tmp_path)
    (folder / name).unlink()
    (folder / name).symlink_to("/dev/urandom")
    with pytest.raises(ValueError, match=r"leads outside the model folder .*\(it resolves to /dev/urandom\)") as e:
        SentenceEncoder.from_preset(folder)
    assert repr(name) in str(e.value)
    # The reader itself used to skip such a file as absent.
    with pytest.raises(ValueError, match="/dev/urandom"):
        read_json(str(folder), *name.split("/"))


@pytest.mark.parametrize("make", [os.mkfifo, os.mkdir], ids=["fifo", "folder"])
def test_json_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path, make):
    folder = tiny_roberta(tmp_path)
    (folder / "sentence_bert_config.json").unlink()
    make(folder / "sentence_bert_config.json")
    with pytest.raises(ValueError, match=r"sentence_bert_config\.json is not a regular file"):
        SentenceEncoder.from_preset(folder)


def test_json_files_over_their_cap_are_refused(tmp_path, monkeypatch):
    folder = tiny_roberta(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config) + " " * model_files.JSON_LIMIT)
    with pytest.raises(ValueError, match=r"config\.json is [\d,]+ bytes, more than the 4,194,304 bytes"):
        SentenceEncoder.from_preset(folder)
    # tokenizer.json has a larger cap of its own (100 MB); shrink it to test it.
    folder = tiny_roberta(tmp_path, "second")
    (folder / "vocab.json").unlink()
    monkeypatch.setitem(model_files.LIMITS, "tokenizer.json", 1000)
    with pytest.raises(ValueError, match=r"tokenizer\.json is [\d,]+ bytes, more than the 1,000 bytes"):
        SentenceEncoder.from_preset(folder)


def test_a_json_file_of_the_wrong_top_level_type_names_the_file(tmp_path):
    folder = tiny_roberta(tmp_path)
    (folder / "config.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"config\.json: the file must hold an object; found list"):
        SentenceEncoder.from_preset(folder)
    folder = tiny_roberta(tmp_path, "second")
    (folder / "modules.json").write_text('{"path": ""}')
    with pytest.raises(ValueError, match=r"modules\.json: the file must hold an array; found dict"):
        SentenceEncoder.from_preset(folder)


def test_cli_names_the_file_in_one_line(tmp_path, capsys):
    folder = tiny_roberta(tmp_path)
    (folder / "config.json").unlink()
    (folder / "config.json").symlink_to("/dev/urandom")
    (tmp_path / "lines.txt").write_text("hello\n")
    code = main(
        ["encode", "--model", str(folder), "--input", str(tmp_path / "lines.txt"), "--output", str(tmp_path / "x")]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and "config.json" in err and "/dev/urandom" in err and len(error_lines(err)) == 1
