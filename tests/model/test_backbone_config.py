"""A model folder's `config.json` is checked (bounds, weights' shapes, vocabulary) before anything is built."""

import json

import pytest

from checkpoints.test_presets import copy_folder
from conftest import minilm_path
from conftest import tiny_encoder
from sbert_keras import SentenceEncoder
from sbert_keras.model.backbone import BertLayoutBackbone
from utils.test_model_files import edit_json
from utils.test_model_files import tiny_roberta

ABSURD = [
    ({"hidden_size": 1e9}, r"hidden_size=1000000000\.0 must be a whole number"),
    ({"hidden_size": 10**9}, r"hidden_size=1000000000 is outside the accepted range 1\.\.65,536"),
    ({"num_hidden_layers": 10**6}, r"num_hidden_layers=1000000 is outside the accepted range 1\.\.512"),
    ({"num_attention_heads": 0}, r"num_attention_heads=0 is outside the accepted range"),
    ({"num_attention_heads": 5}, r"hidden_size=64 is not a multiple of num_attention_heads=5"),
    ({"layer_norm_eps": -1}, r"layer_norm_eps=-1 must be a finite number in \(0, 1\)"),
    ({"layer_norm_eps": 0}, r"layer_norm_eps=0 must be a finite number"),
    ({"layer_norm_eps": float("nan")}, r"layer_norm_eps=nan must be a finite number"),
    ({"layer_norm_eps": float("inf")}, r"layer_norm_eps=inf must be a finite number"),
    ({"layer_norm_eps": None}, r"layer_norm_eps=None must be a finite number"),
    ({"intermediate_size": 128.5}, r"intermediate_size=128\.5 must be a whole number"),
    ({"vocab_size": "2000"}, r"vocab_size='2000' must be a whole number"),
    ({"vocab_size": -1}, r"vocab_size=-1 is outside the accepted range"),
    ({"num_hidden_layers": True}, r"num_hidden_layers=True must be a whole number"),
    ({"hidden_dropout_prob": 1.5}, r"hidden_dropout_prob=1\.5 must be a finite number in \[0, 1\)"),
    ({"max_position_embeddings": 2}, r"max_position_embeddings must be more than 2"),
    (
        {"hidden_size": 2**16, "num_attention_heads": 1, "intermediate_size": 2**18, "num_hidden_layers": 10},
        r"make a backbone of \d\.\d+e\+\d+ parameters, more than 2e\+10",
    ),
]


@pytest.mark.parametrize("load_weights", [True, False], ids=["weights", "no_weights"])
@pytest.mark.parametrize("changes,message", ABSURD, ids=[str(i) for i in range(len(ABSURD))])
def test_absurd_config_sizes_are_refused_before_building(tmp_path, changes, message, load_weights):
    folder = tiny_roberta(tmp_path)
    edit_json(folder / "config.json", **changes)
    with pytest.raises(ValueError, match=message) as e:
        SentenceEncoder.from_preset(folder, load_weights=load_weights)
    assert str(folder / "config.json") in str(e.value)


def test_a_missing_size_is_named(tmp_path):
    folder = tiny_roberta(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    del config["hidden_size"]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"config\.json: missing hidden_size"):
        SentenceEncoder.from_preset(folder, load_weights=False)


@pytest.mark.parametrize(
    "changes,message",
    [
        (
            {"intermediate_size": 256},
            r"model\.safetensors: tensor 'encoder\.layer\.0\.intermediate\.dense\.weight' has shape \[128, 64\]; "
            r".*config\.json \(.*intermediate_size=256.*\) implies \[256, 64\]",
        ),
        ({"vocab_size": 2500}, r"tensor 'embeddings\.word_embeddings\.weight' has shape \[2000, 64\]"),
        ({"num_hidden_layers": 3}, r"model\.safetensors has no tensor 'encoder\.layer\.2\.attention"),
        ({"num_hidden_layers": 1}, r"model\.safetensors holds 2 transformer layers; .*num_hidden_layers=1"),
    ],
)
def test_sizes_that_disagree_with_the_weights_header_are_refused(tmp_path, changes, message):
    folder = tiny_roberta(tmp_path)
    edit_json(folder / "config.json", **changes)
    with pytest.raises(ValueError, match=message):
        SentenceEncoder.from_preset(folder)
    # Without weights the same sane sizes build that architecture.
    fresh = SentenceEncoder.from_preset(folder, load_weights=False)
    assert fresh.backbone.num_layers == json.loads((folder / "config.json").read_text())["num_hidden_layers"]


def test_a_vocabulary_larger_than_the_embedding_table_is_refused(tmp_path):
    folder = tiny_roberta(tmp_path)
    edit_json(folder / "vocab.json", extra=2000)
    with pytest.raises(ValueError) as e:
        SentenceEncoder.from_preset(folder)
    message = str(e.value)
    assert "vocab.json) has 2,001 tokens" in message
    assert f"({folder / 'model.safetensors'}: embeddings.word_embeddings.weight) has 2,000 rows" in message
    with pytest.raises(ValueError, match=r"has 2,001 tokens.*config\.json: vocab_size\) has 2,000 rows"):
        SentenceEncoder.from_preset(folder, load_weights=False)


def test_a_bert_vocabulary_with_an_extra_line_is_refused(tmp_path):
    folder = copy_folder(minilm_path(), tmp_path / "minilm", drop=("tokenizer.json",))
    with open(folder / "vocab.txt", "a") as f:
        f.write("extra-token\n")
    with pytest.raises(ValueError, match=r"vocab\.txt\) has 30,523 tokens.* has 30,522 rows"):
        SentenceEncoder.from_preset(folder)


def test_a_float_token_id_is_refused(tmp_path):
    # 30522.0 == 30522 in Python: it used to pass as one more id, past the table.
    folder = copy_folder(minilm_path(), tmp_path / "minilm", drop=("vocab.txt",))
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["model"]["vocab"]["[NEW]"] = 30522.0
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(ValueError, match=r"tokenizer\.json: `model\.vocab\['\[NEW\]'\]` must be an integer id"):
        SentenceEncoder.from_preset(folder)


def test_the_backbone_itself_refuses_absurd_sizes():
    # The same check guards a `.keras` file and any direct construction.
    sizes = dict(vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
    with pytest.raises(ValueError, match=r"BertLayoutBackbone: num_heads=0 is outside"):
        BertLayoutBackbone(**{**sizes, "num_heads": 0})
    with pytest.raises(ValueError, match=r"BertLayoutBackbone: layer_norm_epsilon=-1\.0 must be a finite number"):
        BertLayoutBackbone(**sizes, layer_norm_epsilon=-1.0)
    assert BertLayoutBackbone(**sizes).num_heads == 2


def saved_preset(tmp_path):
    folder = tmp_path / "preset"
    tiny_encoder().save_to_preset(folder)
    return folder


def test_a_saved_preset_is_checked_before_building(tmp_path):
    folder = saved_preset(tmp_path)
    task = json.loads((folder / "task.json").read_text())
    task["config"]["backbone"]["config"]["num_heads"] = 3
    (folder / "task.json").write_text(json.dumps(task))
    # Without weights it used to build another architecture (3 heads of 2 dimensions).
    with pytest.raises(ValueError, match=r"task\.json: hidden_dim=8 is not a multiple of num_heads=3"):
        SentenceEncoder.from_preset(folder, load_weights=False)


def test_a_kerashub_backbone_preset_is_checked_before_building(tmp_path):
    folder = saved_preset(tmp_path)
    (folder / "task.json").unlink()  # a backbone-only preset: KerasHub's own loaders read it
    config = json.loads((folder / "config.json").read_text())
    config["config"]["layer_norm_epsilon"] = -1
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"config\.json: layer_norm_epsilon=-1 must be a finite number"):
        SentenceEncoder.from_preset(folder)
    (folder / "config.json").unlink()
    (folder / "config.json").symlink_to("/dev/zero")
    with pytest.raises(ValueError, match=r"config\.json.*resolves to /dev/zero"):
        SentenceEncoder.from_preset(folder)
