"""`devtune merge --gguf` for real on a CPU: the tiny model trained until it recites its answers, merged,
converted by llama.cpp's converter to q8_0 (and quantized by llama.cpp to q4_k_m), checked: the GGUF's chat
template renders what LLaMA-Factory's template rendered in training, its vocabulary tokenizes the prompts as the
merged tokenizer does, and llama.cpp's greedy answers agree with the merged model's; `check-export` of the GGUF
folder says the same. Needs .venv-gguf (`make gguf-env`, which `make test` builds)."""

from __future__ import annotations

import json

import pytest

from core.merge.gguf import find_tools
from tests.e2e.test_merge_serve import devtune, trained  # noqa: F401 (the module's training fixture)

pytestmark = pytest.mark.skipif(find_tools() is None, reason="no .venv-gguf: run `make gguf-env`")


@pytest.fixture(scope="module")
def merged_gguf(trained):  # noqa: F811
    ws, run_id = trained
    code, out, err = devtune(ws, "merge", run_id, "--gguf", "--quant", "q8_0", "--json", timeout=1500)
    assert code == 0, err[-4000:]
    return ws, run_id, json.loads(out)


def test_merge_writes_a_q8_0_gguf_and_a_modelfile_whose_answers_agree(merged_gguf):
    ws, run_id, out = merged_gguf
    gguf = out["gguf"]
    path = ws.abs(gguf["path"])
    assert path.name == f"{run_id}-q8_0.gguf" and path.parent.name == f"{run_id}-gguf"
    assert path.stat().st_size == gguf["size_bytes"]
    assert 0.5 < gguf["size_bytes"] / gguf["estimate_bytes"] < 1.5  # the estimate the disk check used
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, "Modelfile"])
    assert not list(path.parent.parent.glob(".*-gguf.tmp-*"))  # the temporary folder was renamed
    assert gguf["verdict"] == "ok", gguf["findings"]
    assert gguf["template_match"] is True and gguf["tokens_match"] is True
    print(f"\nq8_0: exact {gguf['exact_match']:.0%}, top-token agreement {gguf['agreement']:.2%} "
          f"over {len(gguf['answers'])} answers")
    assert gguf["agreement"] >= gguf["min_agreement"] == 0.95
    assert any(a["merged"] for a in gguf["answers"])  # the model answers (it recites its training answers)
    modelfile = (path.parent / "Modelfile").read_text(encoding="utf-8")
    assert modelfile.startswith(f"FROM ./{path.name}\n")
    assert '{{ "<|start_header_id|>user<|end_header_id|>\\n\\n" }}{{ .Content }}{{ "<|eot_id|>" }}' in modelfile
    assert 'PARAMETER stop "<|eot_id|>"' in modelfile
    assert "<|begin_of_text|>" not in modelfile  # llama.cpp adds the BOS itself (tokenizer.ggml.add_bos_token)


def test_check_export_of_the_gguf_folder_reports_the_same(merged_gguf):
    ws, run_id, out = merged_gguf
    code, text, err = devtune(ws, "check-export", f"exports/{run_id}-gguf", "--json")
    assert code == 0, err[-3000:]
    report = json.loads(text)
    assert report["path"] == out["gguf"]["path"] and report["verdict"] == "ok"
    assert report["agreement"] == pytest.approx(out["gguf"]["agreement"])
    assert (ws.state_dir / "exports" / f"{run_id}-gguf" / "gguf.json").is_file()


def test_q4_k_m_goes_through_llama_cpp_quantize(merged_gguf):
    import shutil

    from core.merge.gguf_check import make_gguf

    ws, run_id, out = merged_gguf
    copy = ws.abs(out["export_dir"]).with_name(f"{run_id}-q4")  # its own folder: the tests run in any order
    shutil.copytree(ws.abs(out["export_dir"]), copy)
    report = make_gguf(ws, copy, "q4_k_m", template="llama3", run_id=run_id)
    assert ws.abs(report.path).name == f"{run_id}-q4-q4_k_m.gguf"
    assert not list(ws.abs(report.path).parent.glob("*-f16.gguf"))  # the f16 it was quantized from is gone
    print(f"\nq4_k_m: exact {report.exact_match:.0%}, top-token agreement {report.agreement:.2%}")
    assert report.template_match is True and report.tokens_match is True
    assert report.agreement is not None and report.verdict in ("ok", "error")
    if report.verdict == "error":  # a failure names its cause
        assert any(f.fix for f in report.findings if f.level == "error")
