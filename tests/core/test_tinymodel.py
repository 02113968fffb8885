import json
from pathlib import Path

from core.files.digest import file_sha256
from core.setup.tinymodel import LLAMA3_CHAT_TEMPLATE, SPECIAL_TOKENS, build_tiny_model

ROOT = Path(__file__).resolve().parents[2]


def test_tiny_model_is_deterministic_and_llama3_shaped(tiny_model, tmp_path):
    again = build_tiny_model(tmp_path / "again", ROOT / "data")
    assert file_sha256(again / "model.safetensors") == file_sha256(tiny_model / "model.safetensors")
    assert (again / "tokenizer.json").read_bytes() == (tiny_model / "tokenizer.json").read_bytes()

    config = json.loads((tiny_model / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["num_attention_heads"] == 2 and config["head_dim"] == 32
    assert config["hidden_size"] == 64


def test_tokenizer_has_llama3_specials_and_template(tiny_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    for special in SPECIAL_TOKENS:
        ids = tok.encode(special, add_special_tokens=False)
        assert len(ids) == 1, special
    assert tok.encode("hi")[0] == tok.convert_tokens_to_ids("<|begin_of_text|>")
    assert tok.eos_token == "<|eot_id|>"
    text = tok.apply_chat_template([{"role": "user", "content": "你好"}], tokenize=False,
                                   add_generation_prompt=True)
    assert text == ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n你好<|eot_id|>"
                    "<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert tok.chat_template == LLAMA3_CHAT_TEMPLATE


def test_refuses_a_non_empty_folder(tmp_path):
    import pytest

    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        build_tiny_model(tmp_path / "x", tmp_path)
    assert (tmp_path / "x" / "keep.txt").read_text() == "mine"
