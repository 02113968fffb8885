"""core.merge.gguf*: the Ollama Modelfile from a chat template, the size estimate and the disk check, the
refusals, the pre-tokenizer named from tokenizer.json, and the answers' comparison and diagnosis."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from core.errors import Refused
from core.merge.chat_template import PROBES, probe_messages, render
from core.merge.gguf import (
    GgufError,
    GgufTools,
    count_params,
    estimate_bytes,
    need_bytes,
    plan_gguf,
)
from core.merge.gguf_check import GgufAnswer, GgufReport, compare_answers, diagnose, find_gguf, quant_of
from core.merge.gguf_convert import declared_pre_tokenizer
from core.merge.gguf_modelfile import ModelfileError, joined, modelfile_text, template_pieces
from core.workspace.layout import Workspace

LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
          "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + "
          "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
          "{{ content }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
BOS = "<|begin_of_text|>"


def test_the_llama3_modelfile_leaves_the_bos_to_llama_cpp_and_keeps_each_turn_exact():
    pieces = template_pieces(LLAMA3, bos_token=BOS, eos_token="<|eot_id|>", add_bos=True)
    text = modelfile_text("qa-q8_0.gguf", pieces, ["<|eot_id|>", "", "<|eot_id|>"])
    assert text.splitlines()[0] == "FROM ./qa-q8_0.gguf"
    assert '{{- if eq .Role "system" }}{{ "<|start_header_id|>system<|end_header_id|>\\n\\n" }}{{ .Content }}' \
           '{{ "<|eot_id|>" }}' in text
    assert text.rstrip().endswith('PARAMETER stop "<|eot_id|>"') and text.count("PARAMETER stop") == 1
    assert '{{- end }}{{ "<|start_header_id|>assistant<|end_header_id|>\\n\\n" }}"""' in text
    assert BOS not in text
    for _name, system, turns in PROBES:  # the pieces joined write what the Jinja template writes, less the BOS
        messages = probe_messages(system, turns)
        assert BOS + joined(pieces, messages) == render(LLAMA3, messages, bos_token=BOS, eos_token="<|eot_id|>")


def test_a_bos_llama_cpp_does_not_add_is_written_once_at_the_start():
    pieces = template_pieces(LLAMA3, bos_token=BOS, add_bos=False)
    assert pieces.lead == BOS
    assert modelfile_text("m.gguf", pieces, []).split('TEMPLATE """', 1)[1].startswith('{{ "<|begin_of_text|>" }}')


def test_chatml_keeps_its_newlines_inside_go_string_constants():
    text = modelfile_text("m.gguf", template_pieces(CHATML, add_bos=False), ["<|im_end|>"])
    assert '{{ "<|im_start|>user\\n" }}{{ .Content }}{{ "<|im_end|>\\n" }}' in text
    assert "PARAMETER stop \"<|im_end|>\"" in text


def test_a_template_that_writes_the_first_user_turn_apart_is_refused_not_written_wrong():
    odd = ("{% for m in messages %}{% if loop.first %}[FIRST]{% endif %}<{{ m['role'] }}>{{ m['content'] }}"
           "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}")
    with pytest.raises(ModelfileError, match="probe with-system"):
        template_pieces(odd)


def _safetensors(path: Path, shapes: dict[str, list[int]]) -> None:
    header, offset = {}, 0
    for name, shape in shapes.items():
        n = 1
        for d in shape:
            n *= d
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + 4 * n]}
        offset += 4 * n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)


def _model(tmp_path: Path) -> tuple[Workspace, Path]:
    ws = Workspace(tmp_path / "ws").ensure()
    d = ws.root / "exports" / "qa"
    d.mkdir(parents=True)
    _safetensors(d / "model.safetensors", {"embed": [2090, 64], "lm_head": [2090, 64], "norm": [64]})
    (d / "tokenizer.json").write_text("{}")
    return ws, d


def _tools(tmp_path: Path) -> GgufTools:
    return GgufTools(tmp_path / "python", tmp_path / "convert_hf_to_gguf.py")


def test_params_are_counted_from_the_safetensors_headers_and_each_type_estimated(tmp_path):
    _ws, d = _model(tmp_path)
    params = count_params(d)
    assert params == 2 * 2090 * 64 + 64
    sizes = {q: estimate_bytes(params, q) for q in ("f16", "bf16", "q8_0", "q5_k_m", "q4_k_m")}
    assert sizes["f16"] == sizes["bf16"] > sizes["q8_0"] > sizes["q5_k_m"] > sizes["q4_k_m"]
    assert sizes["q8_0"] - sizes["f16"] == pytest.approx(-params * 7.5 / 8, abs=1)
    # a k-quant is made from an f16 GGUF first: both are on the disk at once
    assert need_bytes(params, "q4_k_m") > estimate_bytes(params, "q4_k_m") + estimate_bytes(params, "f16")


def test_the_plan_names_the_file_and_refuses_a_disk_too_small(tmp_path):
    ws, d = _model(tmp_path)
    plan = plan_gguf(ws, "exports/qa", "q8_0", tools=_tools(tmp_path), free_bytes=10**12)
    assert (plan.out_dir, plan.file) == ("exports/qa-gguf", "qa-q8_0.gguf")
    with pytest.raises(Refused, match=r"exports has 0.4 MB free; a q8_0 GGUF of 267,584 parameters needs about 0.4 MB there: .*q4_k_m is the smallest"):
        plan_gguf(ws, "exports/qa", "q8_0", tools=_tools(tmp_path), free_bytes=plan.need_bytes - 1)


def test_unknown_types_and_folders_without_safetensors_are_bad_input(tmp_path):
    ws, d = _model(tmp_path)
    with pytest.raises(GgufError, match="unknown GGUF type q3_k: choose one of f16, bf16, q8_0"):
        plan_gguf(ws, "exports/qa", "q3_k", tools=_tools(tmp_path))
    (d / "model.safetensors").unlink()
    with pytest.raises(GgufError, match="export_legacy_format: false"):
        plan_gguf(ws, "exports/qa", "q8_0", tools=_tools(tmp_path))


def test_without_llama_cpp_the_conversion_is_refused_naming_what_to_install(tmp_path, monkeypatch):
    import core.merge.gguf as gguf
    from core.merge.gguf_check import preflight

    ws, _d = _model(tmp_path)
    monkeypatch.setattr(gguf, "GGUF_ENV", tmp_path / "absent")  # a machine without .venv-gguf
    with pytest.raises(Refused, match=r"GGUF q4_k_m needs llama.cpp .* in .*absent: run `make gguf-env`"):
        plan_gguf(ws, "exports/qa", "q4_k_m")
    with pytest.raises(Refused, match="make gguf-env"):
        preflight("q8_0")


def test_find_tools_needs_both_the_python_and_the_converter(tmp_path):
    from core.merge.gguf import find_tools

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").write_text("")
    assert find_tools(tmp_path) is None
    (tmp_path / "share" / "llama.cpp").mkdir(parents=True)
    (tmp_path / "share" / "llama.cpp" / "convert_hf_to_gguf.py").write_text("")
    assert find_tools(tmp_path) == GgufTools(tmp_path / "bin" / "python",
                                             tmp_path / "share" / "llama.cpp" / "convert_hf_to_gguf.py")


def test_the_pre_tokenizer_is_named_only_from_an_exact_declaration(tmp_path):
    (tmp_path / "tokenizer.json").write_text(json.dumps(
        {"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}}))
    assert declared_pre_tokenizer(tmp_path) == "gpt-2"
    (tmp_path / "tokenizer.json").write_text(json.dumps(
        {"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "use_regex": True}}))
    assert declared_pre_tokenizer(tmp_path) is None
    (tmp_path / "tokenizer.json").write_text(json.dumps({"pre_tokenizer": {"type": "Sequence", "pretokenizers": []}}))
    assert declared_pre_tokenizer(tmp_path) is None
    assert declared_pre_tokenizer(tmp_path / "absent") is None


def _side(prompt, answer, forced=None):
    return {"prompt_ids": prompt, "answer_ids": answer, "forced_top": forced or [], "answer": ""}


def test_agreement_is_counted_per_step_over_all_answers():
    merged = [_side([1, 2], [5, 6, 7, 8]), _side([1, 3], [9, 9])]
    gguf = [_side([1, 2], [5, 6, 7, 8], [5, 6, 0, 8]), _side([1, 4], [9, 1], [9, 9])]
    exact, agreement, alike, per = compare_answers(merged, gguf)
    assert exact == 0.5 and agreement == pytest.approx(5 / 6) and alike is False
    assert per == [(True, 0.75, True), (False, 1.0, False)]


def _report(**kw) -> GgufReport:
    base = {"path": "exports/qa-gguf/qa-q8_0.gguf", "quant": "q8_0", "size_bytes": 1, "min_agreement": 0.95,
            "exact_match": 0.5, "agreement": 0.9,
            "answers": [GgufAnswer(question="q", merged="a", gguf="b", same=False, agreement=0.9,
                                   prompt_tokens_match=True)]}
    return GgufReport(**{**base, **kw})


def test_the_diagnosis_names_the_first_cause_that_explains_the_difference():
    assert diagnose(_report(agreement=0.97)).level == "ok"
    assert "chat template is not the training one" in diagnose(_report(template_match=False)).fix
    assert "pre-tokenizer" in diagnose(_report(template_match=True, tokens_match=False)).fix
    finding = diagnose(_report(template_match=True, tokens_match=True))
    assert finding.level == "error" and "beyond what q8_0 explains" in finding.fix
    assert "top-token agreement 90.0% (at least 95% expected of q8_0)" in finding.detail


def test_the_gguf_of_a_folder_is_the_one_its_modelfile_names(tmp_path):
    (tmp_path / "qa-q8_0.gguf").write_bytes(b"GGUF")
    (tmp_path / "qa-q4_k_m.gguf").write_bytes(b"GGUF")
    (tmp_path / "Modelfile").write_text("FROM ./qa-q8_0.gguf\n")
    assert find_gguf(tmp_path).name == "qa-q8_0.gguf"
    assert quant_of(tmp_path / "qa-q4_k_m.gguf") == "q4_k_m" and quant_of(Path("run-1-bf16.gguf")) == "bf16"


def test_the_cli_refuses_gguf_with_detach_and_an_unknown_type_before_any_merge(tmp_path, devtune_cli):
    ws = Workspace(tmp_path / "ws").ensure()
    proc = devtune_cli("-w", str(ws.root), "merge", "--gguf", "--detach")
    assert proc.returncode == 2 and "cannot go with --detach" in proc.stderr
    proc = devtune_cli("-w", str(ws.root), "merge", "--gguf", "--quant", "q3_k")
    assert proc.returncode == 2 and "q3_k" in proc.stderr
    assert not ws.runs_dir.exists() or not any(ws.runs_dir.iterdir())  # no export was started


def test_check_export_of_a_folder_without_its_merged_model_says_what_is_missing(tmp_path, devtune_cli):
    ws = Workspace(tmp_path / "ws").ensure()
    folder = ws.root / "exports" / "qa-gguf"
    folder.mkdir(parents=True)
    (folder / "qa-q8_0.gguf").write_bytes(b"GGUF")
    proc = devtune_cli("-w", str(ws.root), "check-export", "exports/qa-gguf")
    assert proc.returncode == 2
    assert "the merged folder exports/qa that qa-q8_0.gguf was converted from is not there" in proc.stderr
