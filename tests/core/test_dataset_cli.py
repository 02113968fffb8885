"""The `devtune data` contract other tools rely on: arguments, exit codes (0 ok, 1 problems, 2 unreadable or
usage), one JSON object with --json, nothing but the report on stdout; the demo journey end to end."""

import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"


def seeded(workspace) -> Path:
    for p in DATA.iterdir():
        shutil.copy(p, workspace.data_dir / p.name)
    return workspace.root


def test_lint_exit_codes_and_json(workspace, devtune_cli):
    root = seeded(workspace)
    bad = devtune_cli("data", "lint", "data/support_messy.jsonl", "--json", cwd=root)
    assert bad.returncode == 1, bad.stderr
    doc = json.loads(bad.stdout)
    assert {"file", "rows", "format", "encoding", "findings", "stats"} <= set(doc)
    assert doc["rows"] == 33 and doc["format"] == "alpaca" and doc["encoding"] == "utf-8-sig"
    first = doc["findings"][0]
    assert set(first) >= {"rule", "severity", "line", "column", "message", "fixable"}
    assert {(f["rule"], f["line"], f["column"]) for f in doc["findings"]} >= {("trailing-comma", 6, 105),
                                                                              ("truncated", 32, 75)}
    text = devtune_cli("data", "lint", "data/support_messy.jsonl", cwd=root)
    assert text.returncode == 1 and "L6:105: trailing comma before }" in text.stdout and text.stderr == ""
    ok = devtune_cli("data", "lint", "data/sharegpt_chats.json", cwd=root)
    assert ok.returncode == 0, ok.stdout  # warnings only
    missing = devtune_cli("data", "lint", "data/nope.jsonl", cwd=root)
    assert missing.returncode == 2 and "nope.jsonl" in missing.stderr and missing.stdout == ""
    usage = devtune_cli("data", "lint", cwd=root)
    assert usage.returncode == 2
    tok = devtune_cli("data", "lint", "data/qa_pairs.json", "--tokenizer", "no/such/tokenizer", cwd=root)
    assert tok.returncode == 2 and "no/such/tokenizer" in tok.stderr


def test_demo_journey(workspace, devtune_cli):
    """The Config step's cpu-demo preset trains on `support`: fix --yes, then register."""
    root = seeded(workspace)
    fix = devtune_cli("data", "fix", "data/support_messy.jsonl", "-o", "data/support_clean.jsonl", "--yes",
                      cwd=root)
    assert fix.returncode == 0, fix.stderr
    assert "33 rows in → 29 written" in fix.stdout
    assert (root / "data" / "support_clean.rejects.jsonl").is_file()
    again = devtune_cli("data", "fix", "data/support_messy.jsonl", "-o", "data/support_clean.jsonl", cwd=root)
    assert again.returncode == 2 and "already exists" in again.stderr  # never over a file without being asked
    reg = devtune_cli("data", "register", "data/support_clean.jsonl", "--name", "support", cwd=root)
    assert reg.returncode == 0, reg.stderr
    info = json.loads((root / "data" / "dataset_info.json").read_text())
    assert info["support"] == {"file_name": "support_clean.jsonl"}
    assert json.loads((root / ".devtune" / "datasets" / "support.json").read_text())["rows"] == 29
    refused = devtune_cli("data", "register", "data/support_messy.jsonl", "--name", "messy", cwd=root)
    assert refused.returncode == 1 and "lint errors" in refused.stderr
    clean = devtune_cli("data", "lint", "data/support_clean.jsonl", cwd=root)
    assert clean.returncode == 0


def test_fix_without_yes_says_what_waits(workspace, devtune_cli):
    root = seeded(workspace)
    r = devtune_cli("data", "fix", "data/support_messy.jsonl", "-o", "out.jsonl", "--json", cwd=root)
    assert r.returncode == 1  # rows are waiting for --yes
    doc = json.loads(r.stdout)
    assert doc["rows_in"] == doc["rows_out"] + doc["rows_rejected"] == 33
    assert set(doc["needs_yes"]) == {"non-string", "missing-keys"}  # rows rejected until --yes
    # and the rows written without a fix --yes makes (issue 21 #13: the summary left these out)
    assert doc["not_applied"] == {"duplicate": {"rejected": 0, "kept": 1}, "empty-output": {"rejected": 0, "kept": 1},
                                  "missing-keys": {"rejected": 1, "kept": 0},
                                  "non-string": {"rejected": 1, "kept": 0}, "pii": {"rejected": 0, "kept": 1}}
    text = devtune_cli("data", "fix", "data/support_messy.jsonl", "-o", "out2.jsonl", cwd=root)
    assert text.returncode == 1
    assert "(rows moved to the rejects file): missing-keys (1), non-string (1)" in text.stdout
    assert "(rows written without the fix): duplicate (1), empty-output (1), pii (1)" in text.stdout
    inplace = devtune_cli("data", "fix", "data/qa_pairs.json", "-o", "data/qa_pairs.json", "--force", cwd=root)
    assert inplace.returncode == 2 and "never writes in place" in inplace.stderr


def test_convert_register_stats(workspace, devtune_cli):
    root = seeded(workspace)
    for src, kind in (("cs_chatlog_zh.txt", "chatlog"), ("faq_gbk.txt", "qa"), ("tickets.csv", "csv"),
                      ("sharegpt_chats.json", "sharegpt")):
        out = f"data/{Path(src).stem}_alpaca.jsonl"
        r = devtune_cli("data", "convert", f"data/{src}", "-o", out, "--json", cwd=root)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["from"] == kind and doc["rows_out"] > 0 and doc["rows_in"] == doc["rows_out"] + doc["rows_rejected"]
        assert devtune_cli("data", "lint", out, cwd=root).returncode == 0
    r = devtune_cli("data", "convert", "data/tickets.csv", "-o", "x.jsonl", "--columns", "instruction=nope", cwd=root)
    assert r.returncode == 2 and "nope" in r.stderr
    reg = devtune_cli("data", "register", "data/cs_chatlog_zh_alpaca.jsonl", "--name", "chats", "--json",
                      "--dataset-dir", "data", cwd=root)
    assert reg.returncode == 0 and json.loads(reg.stdout)["entry"]["columns"]["history"] == "history"
    stats = devtune_cli("data", "stats", "data/faq_gbk_alpaca.jsonl", "--json", cwd=root)
    s = json.loads(stats.stdout)["stats"]
    assert stats.returncode == 0 and s["rows"] == 8 and s["tokens"]["p50"] > 0 and s["languages"]["zh"] == 1.0
    human = devtune_cli("data", "stats", "data/faq_gbk_alpaca.jsonl", cwd=root)
    assert "tokens per row" in human.stdout and human.stderr == ""


def test_registry_lint(workspace, devtune_cli):
    root = seeded(workspace)
    (root / "data" / "dataset_info.json").write_text('{"x": {"file_name": "gone.jsonl"}}')
    r = devtune_cli("data", "lint", "data/dataset_info.json", cwd=root)
    assert r.returncode == 1 and "gone.jsonl not found" in r.stdout


def test_one_input_one_answer_for_every_data_command(workspace, capsys):
    """Issue 21 #7: a binary file got five different answers (lint 1, stats 0 with a table of zeros, convert
    'no speaker tags', fix suggesting a convert that failed, register 2). Now every data command refuses a
    file that cannot be a dataset with the same message, naming the file and the reason, and exit 2."""
    import os
    import shutil as sh

    from cli.main import main

    root = workspace.root
    (root / "binary.jsonl").write_bytes(open("/bin/ls", "rb").read()[:4096])
    (root / "empty.jsonl").write_bytes(b"")
    (root / "folder.jsonl").mkdir()
    (root / "locked.jsonl").write_text('{"instruction": "q", "output": "a"}\n')
    os.chmod(root / "locked.jsonl", 0)
    reasons = {"binary.jsonl": "is binary data", "empty.jsonl": "is empty", "folder.jsonl": "is a folder",
               "missing.jsonl": "no such file"}
    if os.geteuid() != 0:  # root reads any file
        reasons["locked.jsonl"] = "cannot be read: Permission denied"
    commands = {
        "lint": lambda f: ["data", "lint", f],
        "stats": lambda f: ["data", "stats", f],
        "fix": lambda f: ["data", "fix", f, "-o", "out.jsonl", "--yes"],
        "convert": lambda f: ["data", "convert", f, "-o", "conv.jsonl"],
        "register": lambda f: ["data", "register", f, "--name", "x"],
    }
    try:
        for name, reason in reasons.items():
            said = set()
            for command, argv in commands.items():
                cwd = os.getcwd()
                os.chdir(root)
                try:
                    code = main(["-w", str(root), *argv(name)])
                finally:
                    os.chdir(cwd)
                out = capsys.readouterr()
                assert code == 2, (name, command, out.err)
                assert reason in out.err and name in out.err, (name, command, out.err)
                said.add(out.err)
            assert len(said) == 1, (name, said)  # the same message from every command
        assert not (root / "out.jsonl").exists() and not (root / "conv.jsonl").exists()
    finally:
        os.chmod(root / "locked.jsonl", 0o644)
        sh.rmtree(root / "folder.jsonl", ignore_errors=True)


def test_the_convert_hints_run_as_printed(workspace, devtune_cli):
    """Issue 21 #6: the hint said `devtune data convert faq_gbk.txt -o NAME.jsonl`, which failed."""
    import re
    import shlex

    root = seeded(workspace)
    for sample in ("data/faq_gbk.txt", "data/tickets.csv"):
        lint = devtune_cli("data", "lint", sample, cwd=root)
        hint = re.search(r"(devtune data convert .*)$", lint.stdout, re.M)
        assert hint, lint.stdout
        done = devtune_cli(*shlex.split(hint.group(1))[1:], cwd=root)
        assert done.returncode == 0, (hint.group(1), done.stderr)
        fix = devtune_cli("data", "fix", sample, "-o", "data/out.jsonl", cwd=root)
        assert fix.returncode == 2 and "devtune data convert " + sample in fix.stderr
