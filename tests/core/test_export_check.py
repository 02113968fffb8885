"""core.merge.export_check and core.merge.chat_template on prepared folders. LLaMA-Factory's rendering of the
probes (lf_reference_llama3.json) was recorded from the real `python -m core.merge.export_probe lf-render`
on the tiny model; the live probe, the numeric check and a real mismatched export run in
tests/e2e/test_merge_serve.py."""

import json
from pathlib import Path

import pytest

import core.merge.export_check as export_check
from core.merge.chat_template import (TemplateRenderError, first_difference, read_chat_template, render, render_probes,
                                special_tokens)
from core.merge.export_check import (check_files, check_template, compare_templates, load_report, weight_files)
from core.setup.tinymodel import LLAMA3_CHAT_TEMPLATE

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "serve"
REFERENCE = json.loads((FIXTURES / "lf_reference_llama3.json").read_text())
TOKENS = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def merged_folder(tmp_path: Path, *, template: str | None = LLAMA3_CHAT_TEMPLATE, where: str = "jinja") -> Path:
    d = tmp_path / "exports" / "m"
    d.mkdir(parents=True)
    (d / "config.json").write_text("{}")
    (d / "model.safetensors").write_bytes(b"\0" * 64)
    (d / "tokenizer.json").write_text("{}")
    (d / "generation_config.json").write_text("{}")
    config = {"bos_token": TOKENS["bos_token"], "eos_token": {"content": "<|eot_id|>", "special": True}}
    if template and where == "jinja":
        (d / "chat_template.jinja").write_text(template)
    elif template and where == "config":
        config["chat_template"] = template
    elif template and where == "list":
        config["chat_template"] = [{"name": "tool_use", "template": "x"}, {"name": "default", "template": template}]
    (d / "tokenizer_config.json").write_text(json.dumps(config))
    return d


def test_complete_folder_passes_the_file_checks(tmp_path):
    assert {f.level for f in check_files(merged_folder(tmp_path))} == {"ok"}


def test_missing_pieces_are_errors_with_fixes(tmp_path):
    d = merged_folder(tmp_path)
    (d / "tokenizer.json").unlink()
    (d / "generation_config.json").unlink()
    (d / "model.safetensors").unlink()
    findings = {f.what: f for f in check_files(d)}
    assert findings["weights"].level == "error" and "re-run the export" in findings["weights"].fix
    assert findings["tokenizer"].level == "error"
    assert findings["generation_config.json"].level == "warning"
    assert check_files(tmp_path / "nowhere")[0].level == "error"


def test_sharded_weights_must_all_be_there(tmp_path):
    d = merged_folder(tmp_path)
    (d / "model.safetensors").unlink()
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    (d / "model-00001-of-00002.safetensors").write_bytes(b"\0")
    files, problems = weight_files(d)
    assert len(files) == 1 and "model-00002-of-00002.safetensors" in problems[0]
    (d / "model-00002-of-00002.safetensors").write_bytes(b"\0")
    assert weight_files(d)[1] == [] and len(weight_files(d)[0]) == 2


@pytest.mark.parametrize("where", ["jinja", "config", "list"])
def test_the_chat_template_is_read_from_each_place_transformers_saves_it(tmp_path, where):
    source = read_chat_template(merged_folder(tmp_path, where=where))
    assert source.text == LLAMA3_CHAT_TEMPLATE
    assert source.file == ("chat_template.jinja" if where == "jinja" else "tokenizer_config.json")
    assert special_tokens(tmp_path / "exports" / "m") == TOKENS


def test_rendering_follows_transformers():
    messages = [{"role": "user", "content": " hi "}]
    assert render(LLAMA3_CHAT_TEMPLATE, messages, **TOKENS) == (
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert render("{{ messages | tojson }}", messages) == '[{"role": "user", "content": " hi "}]'
    assert render("{% generation %}x{% endgeneration %}", messages) == "x"
    assert render("{% for m in messages %}\n  {{ m.role }}\n{% endfor %}", messages) == "  user\n"  # trim/lstrip
    with pytest.raises(TemplateRenderError, match="no system"):
        render("{{ raise_exception('no system') }}", messages)


def test_the_tiny_models_llama3_template_matches_llamafactorys():
    assert compare_templates(REFERENCE, LLAMA3_CHAT_TEMPLATE, TOKENS) == []
    assert compare_templates(REFERENCE, REFERENCE["jinja"], TOKENS) == []  # LLaMA-Factory's own Jinja too


def test_a_different_template_is_found_and_located():
    diffs = compare_templates(REFERENCE, CHATML, TOKENS)
    assert [d["probe"] for d in diffs] == ["with-system", "no-system"]
    assert diffs[0]["index"] == 0 and diffs[0]["expected"].startswith("<|begin_of_text|><|start_header_id|>")
    assert diffs[0]["actual"].startswith("<|im_start|>system")
    # a subtle one: no BOS token
    no_bos = compare_templates(REFERENCE, LLAMA3_CHAT_TEMPLATE, {**TOKENS, "bos_token": ""})
    assert no_bos and no_bos[0]["index"] == 0
    assert compare_templates(REFERENCE, None, TOKENS)[0]["actual"] == "(no chat template)"


def test_first_difference_reports_context():
    diff = first_difference("p", "abcdefXhij", "abcdefYhij", context=6)
    assert diff.index == 6 and diff.expected == "defXhij" and diff.actual == "defYhij"
    assert first_difference("p", "abc", "abc") is None
    assert first_difference("p", "abc", "abcd").index == 3


def test_mismatch_writes_a_fixed_template_that_reproduces_training(workspace, monkeypatch):
    monkeypatch.setattr(export_check, "lf_reference", lambda ws, tok, name: REFERENCE)
    d = merged_folder(workspace.root, template=CHATML)
    check, finding = check_template(workspace, d, "llama3")
    assert check.match is False and finding.level == "error"
    assert "training saw" in finding.detail and "--chat-template" in finding.fix
    # the by-hand line runs as printed: the serving python by its path (`vllm` is not on PATH)
    assert "vllm serve" not in finding.fix and " -m vllm.entrypoints.openai.api_server --model " in finding.fix
    fixed = workspace.abs(check.fixed_template)
    assert fixed == workspace.state_dir / "exports" / "m" / "chat_template.jinja"
    assert render_probes(fixed.read_text(), TOKENS) == REFERENCE["prompts"]

    good = merged_folder(workspace.root / "other")
    check, finding = check_template(workspace, good, "llama3")
    assert check.match is True and finding.level == "ok" and check.fixed_template is None


def test_without_a_template_name_the_tokenizers_own_is_trusted(workspace):
    check, finding = check_template(workspace, merged_folder(workspace.root), None)
    assert check.match is None and finding.level == "ok"


def test_report_is_saved_and_loaded(workspace, monkeypatch):
    monkeypatch.setattr(export_check, "lf_reference", lambda ws, tok, name: REFERENCE)
    d = merged_folder(workspace.root, template=CHATML)
    report = export_check.check_export(workspace, d, template="llama3", numeric=False)
    assert report.verdict == "error"
    again = load_report(workspace, "exports/m")
    assert again.template.match is False and again.export_dir == "exports/m"


def test_numeric_check_is_skipped_for_big_models_and_full_finetuning(workspace, tmp_path):
    d = merged_folder(tmp_path)
    assert "full or freeze" in export_check.check_numerics(workspace, "base", None, d).note
    skipped = export_check.check_numerics(workspace, "base", "saves/a", d, max_bytes=10)
    assert not skipped.ran and "skipped" in skipped.note
    assert export_check.numeric_finding(skipped).level == "ok"
