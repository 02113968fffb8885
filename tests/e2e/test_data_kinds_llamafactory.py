"""Every kind of dataset LLaMA-Factory reads, written by the test in the shape of upstream's demo files:
linted (no error, with upstream's own dataset_info.json entry and without one), fixed with --yes (no row
rejected), registered, and loaded through LLaMA-Factory's own data pipeline for the stage that trains
on it (dpo reads pairs through the loader's "rm" processor) with no row dropped. Both the upstream
entries and the ones devtune writes are loaded."""

import json
import subprocess
import sys

import pytest

from core.data.fix import fix_file
from core.data.lint import lint_file
from core.data.register import register_dataset
from tests.core.dataset_kinds import KINDS, write_kind
from tests.e2e.test_data_llamafactory import BAD_SIGNS

LOAD = """
import json, sys
from llamafactory.hparams import get_train_args
from llamafactory.model import load_tokenizer
from llamafactory.data import get_template_and_fix_tokenizer, get_dataset
args = json.loads(sys.argv[1])
loader_stage = {"dpo": "rm"}.get(args["stage"], args["stage"])
model_args, data_args, training_args, _f, _g = get_train_args(args)
tok = load_tokenizer(model_args)
template = get_template_and_fix_tokenizer(tok["tokenizer"], data_args)
module = get_dataset(template, model_args, data_args, training_args, stage=loader_stage, **tok)
print("EXAMPLES", len(module["train_dataset"]))
"""

# mllm needs a vision model's processor (the tiny model is text only): its rows are linted and fixed here,
# and its missing-media and placeholder rules are tested in tests/core/test_dataset_kinds.py
LOADABLE = [name for name in KINDS if name != "mllm"]


def _load(tmp_path, lf_env, tiny_model, stage: str, datasets: list[str]) -> str:
    args = {"model_name_or_path": str(tiny_model), "stage": stage, "do_train": True, "finetuning_type": "lora",
            "dataset": ",".join(datasets), "dataset_dir": str(tmp_path / "data"), "template": "llama3",
            "cutoff_len": 512, "output_dir": str(tmp_path / "out"), "overwrite_cache": True,
            "preprocessing_num_workers": 1, "report_to": "none"}
    if stage == "pt":  # one example per row: packing would join the rows into cutoff_len blocks
        args.update(template="empty", packing=False)
    proc = subprocess.run([sys.executable, "-c", LOAD, json.dumps(args)], env=lf_env, capture_output=True,
                          text=True, timeout=900, cwd=tmp_path)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    for sign in BAD_SIGNS:
        assert sign not in log, f"{sign!r} in LLaMA-Factory's log:\n{log[-3000:]}"
    return log


@pytest.mark.parametrize("name", LOADABLE)
def test_kind_lints_fixes_registers_and_loads(name, tmp_path, tiny_model, lf_env):
    data = tmp_path / "data"
    source = write_kind(data, name)
    rows = len(KINDS[name][1]())
    report = lint_file(source)
    assert report.errors == 0, [f.message for f in report.findings]
    assert report.schema.source == name  # judged by upstream's entry
    fixed = fix_file(source, data / f"{name}_fixed.jsonl", yes=True)
    assert fixed.rows_out == rows and fixed.rows_rejected == 0, fixed.lines()
    result = register_dataset(data / f"{name}_fixed.jsonl", f"{name}_fixed", data, ws_root=tmp_path)
    assert result.report.errors == 0 and result.report.schema.task == report.schema.task
    info = json.loads((data / "dataset_info.json").read_text())
    assert info[name] == {"file_name": KINDS[name][0], **KINDS[name][2]}  # upstream's entry kept as it was
    stage = KINDS[name][3]
    log = _load(tmp_path, lf_env, tiny_model, stage, [name, f"{name}_fixed"])
    examples = int(log.split("EXAMPLES")[-1].split()[0])
    assert examples == 2 * rows, (examples, rows, log[-2000:])


def test_txt_rows_are_linted_as_llamafactory_loads_them(tmp_path, tiny_model, lf_env):
    """A .txt of pre-training text with an empty line, CRLF endings and a lone CR: lint counts the rows
    LLaMA-Factory makes of it, plain fix keeps every one (written back as .txt), register writes upstream's
    entry, and LLaMA-Factory's pt pipeline loads as many examples as lint counted rows, from both files."""
    data = tmp_path / "data"
    data.mkdir()
    source = data / "notes.txt"
    source.write_bytes(b"Refunds reach your card in five days.\r\nWe ship to forty countries.\rOrders ship daily.\n"
                       b"\nOpen Billing to cancel your plan.\n")
    report = lint_file(source)
    assert report.errors == 0 and report.rows == 5, [f.message for f in report.findings]
    fixed = fix_file(source, data / "notes_fixed.txt")
    assert (fixed.rows_out, fixed.rows_rejected) == (5, 0), fixed.lines()
    for name, file in (("notes", source), ("notes_fixed", data / "notes_fixed.txt")):
        result = register_dataset(file, name, data, ws_root=tmp_path)
        assert result.entry == {"file_name": file.name, "columns": {"prompt": "text"}}
    log = _load(tmp_path, lf_env, tiny_model, "pt", ["notes", "notes_fixed"])
    assert int(log.split("EXAMPLES")[-1].split()[0]) == 2 * report.rows, log[-2000:]
