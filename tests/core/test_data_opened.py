"""What the Data step says of a file as it opens (core.data.opened): a chat export's detection and speakers, a
workbook to convert, nothing for a dataset; and a WhatsApp iOS export (`[12/03/2024, 10:15:22] Name: text`) probed
as the text it is, not as broken JSON."""

import shutil
from pathlib import Path

from core.data.convert import convert_file
from core.data.lint import lint_file
from core.data.opened import TRANSCRIPT, WORKBOOK, detect_opened, pages_rows, roles_request
from core.data.reader import JSON_ARRAY, TEXT, probe_file

FIXTURES = Path(__file__).parent.parent / "fixtures" / "data"
CHATS = FIXTURES / "chat_exports"


def test_a_chat_export_names_its_speakers_and_why_and_the_cli_summary():
    found = detect_opened(CHATS / "wechat_liuhen.txt")
    assert found.kind == TRANSCRIPT and "1 agent (售后-小林), 2 customers" in found.line
    assert [(s.name, s.agent) for s in found.speakers] == [("售后-小林", True), ("张三", False), ("李四", False)]
    assert found.speakers[0].why == "an agent-like name"
    report = convert_file(CHATS / "wechat_liuhen.txt", "/dev/null", dry_run=True)
    assert report.detected.line() == found.line  # the words the CLI prints


def test_the_choice_is_the_cli_request_every_speaker_named():
    assert roles_request(["a", "b", "c"], {"c"}) == (("c",), ("a", "b"))


def test_a_workbook_is_converted_to_be_seen_and_a_dataset_says_nothing():
    assert detect_opened(FIXTURES / "spreadsheets" / "faq.ods").kind == WORKBOOK
    assert not pages_rows(FIXTURES / "spreadsheets" / "faq.ods") and pages_rows(FIXTURES / "messages.jsonl")
    assert detect_opened(FIXTURES / "messages.jsonl") is None
    assert detect_opened(FIXTURES / "api_shapes" / "strapi_v4.json") is None


def test_a_whatsapp_ios_export_is_text_not_broken_json(tmp_path):
    assert probe_file(CHATS / "whatsapp_ios.txt").layout == TEXT
    assert probe_file(FIXTURES / "broken_array.json").layout == JSON_ARRAY
    lint = lint_file(CHATS / "whatsapp_ios.txt")
    said = [f.message for f in lint.findings if f.rule == "not-json"]
    assert said and "devtune data convert" in said[0] and "invalid JSON" not in " ".join(f.message for f in
                                                                                       lint.findings)
    dated = tmp_path / "log.txt"
    shutil.copy(CHATS / "whatsapp_ios.txt", dated)
    assert detect_opened(dated).kind == TRANSCRIPT
