"""`devtune data fix` on a chat export (JSON or CSV: tests/fixtures/data/chat_exports, SOURCES.md) is refused
with the convert command that turns it into a dataset, and writes nothing: its rows are messages, not
examples (WeCom's archive used to come out as 2 nonsense rows of 10). The decision is convert's own
(core/data/source_kind.py), so what convert reads as a transcript is what fix refuses."""

import shlex
from pathlib import Path

import pytest

from core.data.source_kind import detect_source, is_chat_transcript

EXPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "data" / "chat_exports"
STRUCTURED = sorted(str(p.relative_to(EXPORTS)) for p in EXPORTS.rglob("*") if p.suffix in (".json", ".jsonl", ".csv"))
DATA = Path(__file__).resolve().parents[2] / "data"


def test_every_json_and_csv_export_is_covered():
    assert len(STRUCTURED) == 9 and {"wecom_archive.jsonl", "feishu_messages.json", "udesk_sessions.csv",
                                      "held_out/freshdesk_conversations.json"} <= set(STRUCTURED)


@pytest.mark.parametrize("name", STRUCTURED)
def test_fix_refuses_a_chat_export_with_the_convert_command(devtune_cli, tmp_path, name):
    src = EXPORTS / name
    out = tmp_path / "fixed.jsonl"
    r = devtune_cli("data", "fix", str(src), "-o", str(out), "--yes")
    assert r.returncode == 2, (r.stdout, r.stderr)
    said = r.stderr
    assert "chat export" in said and f"devtune data convert {shlex.quote(str(src))} -o " in said
    hinted = said.split(" -o ", 1)[1].split("`")[0].strip()
    assert hinted != shlex.quote(str(src))  # the hint never names the export as its own output
    assert not list(tmp_path.iterdir())  # nothing written: no output, no rejects file
    assert detect_source(src) == "transcript"


@pytest.mark.parametrize("name", ["support_messy.jsonl", "sharegpt_chats.json", "qa_pairs.json"])
def test_a_dataset_is_no_chat_export(name):
    assert not is_chat_transcript(DATA / name)
