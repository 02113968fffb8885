"""What the data commands print holds in either language (issue 21, #12 and #13): severities, the token
source and the language mix in Chinese under --lang zh; one of a thing is singular ("1 row", not "1 rows");
`register` shows its entry as JSON; a no-`--yes` fix lists every fix it did not apply."""

from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path

import pytest

from cli.main import main

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
DATA_SOURCES = ("core/data/", "cli/commands/data.py", "cli/commands/data_synth.py")
PLURALS = ("rows|lines|errors|warnings|findings|duplicates|conflicts|characters|chunks|documents|pairs|requests|"
           "retries|tokens|pages|files|cells|turns|units|objects|models|times|steps|fixes|questions|placeholders")
# a count placeholder, maybe an adjective ("lint"), then a plural noun; "tokens/s" is a unit
COUNT_THEN_PLURAL = re.compile(r"\{(\w+)[^{}]*\}(?: [a-z<>]+)? (?:" + PLURALS + r")\b(?!/)")
# placeholders that are no count, and counts that cannot be one
NOT_COUNTS = {"suffix", "kind", "key", "placeholder", "format", "name"}
NEVER_ONE = {
    "L{line}: {count} objects on one line; fix puts each on its own line",  # several, by definition
    "L{line}: ~{tokens} tokens > cutoff_len {cutoff}; will be truncated (raise cutoff_len or shorten the row)",
    "L{line}: {tokens} tokens > cutoff_len {cutoff}; will be truncated (raise cutoff_len or shorten the row)",
    "{url} serves {n} models ({names}); name one with --model",  # said only when it is not one
}
SINGULAR_SLIP = re.compile(r"(?<![\d.,])1 (?:" + PLURALS + r")\b(?!/)")


@pytest.fixture
def english(monkeypatch):
    monkeypatch.setenv("DEVTUNE_LANG", "en")
    yield
    from core.i18n import set_language

    set_language("en")


def _say(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def _plain_messages() -> dict[str, str]:
    """{message: where} of every `_()` (not `_n`) call in the data commands' sources."""
    found = {}
    for folder in ("core", "cli", "tui"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            where = str(path.relative_to(ROOT))
            if not where.startswith(DATA_SOURCES):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_"
                        and node.args and isinstance(node.args[0], ast.Constant)
                        and isinstance(node.args[0].value, str)):
                    found.setdefault(node.args[0].value, f"{where}:{node.lineno}")
    return found


def test_no_data_message_puts_a_count_before_a_plural_noun():
    """A count with its noun goes through `_n` (or core.data.wording.counted), never `_("{n} rows")`."""
    bad = []
    for message, where in _plain_messages().items():
        if message in NEVER_ONE:
            continue
        if where.startswith("core/data/synth/generate.py") and "times in a row" in message:
            continue  # generate.py is being rewritten in another change; its retry count can be one
        for m in COUNT_THEN_PLURAL.finditer(message):
            if m.group(1) not in NOT_COUNTS:
                bad.append(f"{where}: {m.group(0)!r} in {message!r}")
    assert not bad, "\n".join(bad)


def test_one_of_a_thing_is_singular_in_the_data_commands(workspace, capsys, english):
    d = workspace.data_dir
    one = d / "one.jsonl"  # one row, one error (a number as output), one CRLF line
    one.write_bytes(b'{"instruction": "What is the fee?", "input": "", "output": 4}\r\n')
    clean = d / "clean.jsonl"
    clean.write_text('{"instruction": "What is the fee?", "input": "", "output": "Four dollars a month."}\n')
    chat = d / "chat.txt"
    chat.write_text("用户：运费多少？\n客服：满99元包邮。\n", encoding="utf-8")
    (d / "dataset_info.json").write_text('{"gone": {"file_name": "gone.jsonl"}}')
    runs = [
        ("data", "lint", str(one)),
        ("data", "stats", str(clean)),
        ("data", "fix", str(one), "-o", str(d / "fixed.jsonl")),
        ("data", "fix", str(one), "-o", str(d / "fixed_yes.jsonl"), "--yes"),
        ("data", "convert", str(chat), "-o", str(d / "chat.jsonl")),
        ("data", "register", str(clean), "--name", "one", "--dataset-dir", str(d)),
        ("data", "lint", str(d / "dataset_info.json")),
    ]
    said = []
    for argv in runs:
        _code, out = _say(capsys, "--lang", "en", *argv, "-w", str(workspace.root))
        said.append(out)
        assert not SINGULAR_SLIP.search(out), (argv, out)
    text = "\n".join(said)
    for phrase in ("1 row ", "1 error,", "1 finding", "1 character", "1 chatlog unit in"):
        assert phrase in text, (phrase, text)


def test_lint_and_stats_under_lang_zh_say_severity_source_and_languages_in_chinese(workspace, capsys, english):
    shutil.copy(DATA / "support_messy.jsonl", workspace.data_dir / "support_messy.jsonl")
    path = str(workspace.data_dir / "support_messy.jsonl")
    _code, lint = _say(capsys, "--lang", "zh", "data", "lint", path, "-w", str(workspace.root))
    findings = [line.split()[0] for line in lint.splitlines() if line.startswith("  ") and "L" in line]
    assert findings and set(findings) == {"错误", "警告", "提示"}, lint
    assert "（估算）" in lint and "(estimate)" not in lint
    assert re.search(r"中文 \d+% 英文 \d+% 中英混合 \d+%", lint), lint
    assert not re.search(r"\b(warning|error|info|estimate|mixed)\b|\b(zh|en) \d+%", lint), lint
    _code, stats = _say(capsys, "--lang", "zh", "data", "stats", path, "-w", str(workspace.root))
    assert "（估算）" in stats or "(估算)" in stats, stats
    assert "语言：中文" in stats and not re.search(r"\b(zh|en|mixed) \d+%", stats), stats
    _code, doc = _say(capsys, "--lang", "zh", "data", "lint", path, "--json", "-w", str(workspace.root))
    doc = json.loads(doc)  # the JSON keeps the identifiers
    assert {f["severity"] for f in doc["findings"]} == {"error", "warning", "info"}
    assert doc["stats"]["token_source"] == "estimate" and set(doc["stats"]["languages"]) == {"zh", "en", "mixed"}


def test_register_prints_its_entry_as_json(workspace, capsys, english):
    shutil.copy(DATA / "qa_pairs.json", workspace.data_dir / "qa_pairs.json")
    code, out = _say(capsys, "--lang", "en", "data", "register", str(workspace.data_dir / "qa_pairs.json"),
                     "--name", "qa", "--force", "-w", str(workspace.root))
    assert code == 0, out
    assert "{'" not in out  # no Python dict
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line == "{")
    end = next(i for i, line in enumerate(lines) if line == "}")
    shown = json.loads("\n".join(lines[start:end + 1]))
    info = json.loads((workspace.data_dir / "dataset_info.json").read_text(encoding="utf-8"))
    assert shown == {"qa": info["qa"]} and shown["qa"]["columns"] == {"prompt": "question", "response": "answer"}
