"""Verdicts against what is really there (issue 21, findings 5 and 8): check-export blames the folder
it was given before any run, and the memory fit says which GPU it was judged against, with the same
verdict for the same YAML under any name."""

from __future__ import annotations

import json
import shutil

from core.train.runs import RunStatus
from tests.core.config_workspace import fake_model, register_dataset
from tests.recorded_runs import place_recorded_run
from cli.main import main


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_check_export_blames_the_folder_not_the_newest_failed_run(workspace, capsys):
    place_recorded_run(workspace, "bad", "lf_unknown_template", RunStatus.FAILED, 1, started=1.0)
    (workspace.root / "notes").mkdir()
    (workspace.root / "file.txt").write_text("x")
    ws = str(workspace.root)
    for target, words in (("exports/nope", "does not exist"), ("notes", "not a model folder"),
                          ("file.txt", "is a file")):
        for extra in ((), ("--run", "bad")):
            code, _out, err = cli(capsys, "check-export", target, *extra, "-w", ws)
            assert code == 2 and words in err and target in err and "adapter" not in err, (target, extra, err)


def _gpu_config(capsys, workspace):
    fake_model(workspace)
    register_dataset(workspace)
    code, _out, _err = cli(capsys, "config", "init", "--preset", "lora-1gpu", "--model", "models/tiny-llama3",
                           "-w", str(workspace.root))
    assert code == 0


def _fit(capsys, workspace, *extra):
    code, out, _err = cli(capsys, "config", "show", "--json", *extra, "-w", str(workspace.root))
    return json.loads(out)


def test_the_fit_says_which_gpu_it_was_judged_against(workspace, capsys):
    _gpu_config(capsys, workspace)
    (workspace.state_dir / "gpus.json").write_text(json.dumps({"gpus": [], "kind": "cpu", "source": ""}))
    code, out, err = cli(capsys, "config", "check", "--no-llamafactory", "-w", str(workspace.root))
    line = next(x for x in out.splitlines() if "memory:" in x)
    assert "gpu_model mi300x" in line and "the doctor found no GPU here" in line
    assert "the doctor found no GPU on this machine" in out
    (workspace.state_dir / "gpus.json").write_text(json.dumps(
        {"gpus": [{"name": "AMD Instinct MI210", "memory_bytes": 64 * 1024**3}], "kind": "rocm", "source": "amd-smi"}))
    code, out, err = cli(capsys, "config", "check", "--no-llamafactory", "-w", str(workspace.root))
    line = next(x for x in out.splitlines() if "memory:" in x)
    assert "of 64.0 GiB" in line and "MI210, found by the doctor" in line


def test_the_same_yaml_gives_the_same_verdict_under_any_name(workspace, capsys):
    fake_model(workspace)
    register_dataset(workspace)
    assert cli(capsys, "config", "init", "--preset", "cpu-demo", "--model", "models/tiny-llama3",
               "-w", str(workspace.root))[0] == 0
    shutil.copy(workspace.root / "configs" / "train.yaml", workspace.root / "copy.yaml")
    results = []
    for path in ("configs/train.yaml", "copy.yaml"):
        code, out, _err = cli(capsys, "config", "check", "--no-llamafactory", "--json", "--config", path,
                              "-w", str(workspace.root))
        data = json.loads(out)
        results.append((code, sorted((f["code"], f["message"]) for f in data["findings"])))
    assert results[0] == results[1] and any("on CPU (host memory)" in m for _i, m in results[0][1])


def test_a_stale_dataset_names_the_command_that_checks_it_again(workspace, capsys):
    fake_model(workspace)
    file = register_dataset(workspace)
    assert cli(capsys, "config", "init", "--preset", "cpu-demo", "--model", "models/tiny-llama3",
               "-w", str(workspace.root))[0] == 0
    file.write_text(file.read_text() + json.dumps({"instruction": "q", "input": "", "output": "a"}) + "\n")
    code, out, _err = cli(capsys, "config", "check", "--no-llamafactory", "-w", str(workspace.root))
    assert "`devtune data register data/support_clean.jsonl --name support`" in out
