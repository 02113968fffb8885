"""Chat transcripts without speaker tags (tests/fixtures/data/chat_exports, layouts in SOURCES.md; held_out/
was written before the parser and not used to build it): the header pattern, speakers and who answers are
learned from the file; placeholders and notices dropped; an unanswered tail rejected on its own."""

import json
from pathlib import Path

import pytest

from core.data.convert import ConvertError, convert_file, detect_source
from core.data.fix import FixRefused, fix_file

EXPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "data" / "chat_exports"

# fixture → (agents, customers, rows, rejects)
EXPECTED = {
    "wechat_liuhen.txt": (["售后-小林"], ["张三", "李四"], 2, 1),
    "qq_message_manager.txt": (["星河网盘客服"], ["赵先生", "钱女士"], 2, 1),
    "dingtalk_chat.txt": (["云仓客服-王丽"], ["周建国", "吴敏"], 2, 1),
    "whatsapp_ios.txt": (["Harbor Dental"], ["Lena Park"], 2, 0),
    "telegram_result.json": (["Cloudy VPN Support"], ["Omar"], 2, 0),
    "wecom_archive.jsonl": (["chenjing", "liuyang"], ["wmAbC123external01", "wmXyZ789external02"], 2, 0),
    "feishu_messages.json": (["ou_a81f22d09c5e73"], ["ou_5be0c4f7a2913d", "ou_7f3a9c2e41d8b6"], 2, 1),
    "intercom_conversations.json": (["Ana from Acme", "Sam from Acme"], ["Jane Doe", "Luca Rossi"], 2, 1),
    "zendesk_ticket_comments.json": (["Alex Agent"], ["Chris Customer"], 1, 0),
    "udesk_sessions.csv": (["客服-小美", "客服-阿强"], ["访客8812", "访客9920"], 2, 1),
    "held_out/whatsapp_android.txt": (["Bright Bikes Support"], ["Priya", "Tom"], 2, 1),
    "held_out/line_chat.txt": (["阳光家电客服"], ["李华", "王小明"], 2, 2),
    "held_out/freshdesk_conversations.json": (["770002", "770009"], ["880001", "880044"], 2, 1),
    "held_out/wechatmsg_messages.csv": (["鲜生活官方客服"], ["小周", "陈女士"], 2, 2),
    "held_out/livechat_archives.json": (["Kim"], ["Ben", "Maria Lopez"], 2, 1),
}
NOISE = ("[图片]", "[表情]", "[Sticker]", "[Photo]", "omitted", "撤回", "end-to-end", "<p>", "已成为你的好友",
         "Internal:", "known issue", "Chat started", "changed the group name", "\u200e")


def rows(p: Path) -> list[dict]:
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines()]


def test_every_collected_shape_is_found():
    on_disk = {str(p.relative_to(EXPORTS)) for p in EXPORTS.rglob("*") if p.is_file() and p.name != "SOURCES.md"}
    assert on_disk == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_export_converts_with_roles_and_nothing_lost(name, tmp_path):
    agents, customers, n_rows, n_rejects = EXPECTED[name]
    out = tmp_path / "out.jsonl"
    assert detect_source(EXPORTS / name) == "transcript"
    report = convert_file(EXPORTS / name, out)
    assert report.balanced and report.rows_in == report.rows_out + report.rows_rejected
    assert (report.rows_out, report.rows_rejected) == (n_rows, n_rejects)
    detected = report.to_json()["detected"]
    assert (detected["agents"], detected["customers"]) == (sorted(agents), sorted(customers))
    assert detected["conversations"] == 2 or name.startswith("zendesk")
    got = rows(out)
    assert all(r["instruction"].strip() and r["output"].strip() for r in got)
    text = out.read_text(encoding="utf-8")
    assert not [w for w in NOISE if w in text]
    for line in (report.rejects and Path(report.rejects).read_text(encoding="utf-8").splitlines()) or []:
        assert json.loads(line)["reason"]


def test_history_kept_and_only_the_unanswered_tail_rejected(tmp_path):
    out = tmp_path / "w.jsonl"
    report = convert_file(EXPORTS / "wechat_liuhen.txt", out)
    first, second = rows(out)
    assert first["history"][0] == ["你好，我上周买的蓝牙耳机左耳没有声音",
                                   "您好，请把耳机放回充电仓，长按充电仓按钮10秒重置一下试试"]
    assert first["history"][1][0] == "重置了，还是不行\n怎么办"  # one speaker's messages joined
    assert (first["instruction"], first["output"]) == ("好的，谢谢", "不客气")  # [微笑] gone
    assert second["instruction"] == "请问耳机支持无线充电吗" and second["history"] == []
    reject = json.loads(Path(report.rejects).read_text(encoding="utf-8"))
    assert reject["reason"] == "no answer after the last question" and "续航多久" in reject["raw"]


def test_roles_corrected_by_the_person(tmp_path):
    out = tmp_path / "flip.jsonl"
    report = convert_file(EXPORTS / "whatsapp_ios.txt", out, agents=("Lena Park",), customers=("Harbor Dental",))
    detected = report.to_json()["detected"]
    assert detected["agents"] == ["Lena Park"] and detected["evidence"]["Lena Park"] == "--agent"
    first = rows(out)[0]  # Lena's opening question is now an agent turn before any question: dropped
    assert first["history"][0] == ["Of course! Which day suits you better?", "Thursday morning if possible"]
    with pytest.raises(ConvertError, match="--agent Nobody: no such speaker"):
        convert_file(EXPORTS / "whatsapp_ios.txt", tmp_path / "x.jsonl", agents=("Nobody",))


def test_cli_prints_what_was_detected_and_takes_roles(devtune_cli, tmp_path):
    src = EXPORTS / "qq_message_manager.txt"
    r = devtune_cli("data", "convert", str(src), "-o", str(tmp_path / "q.jsonl"))
    assert r.returncode == 0, r.stderr
    assert "1 agent (星河网盘客服), 2 customers" in r.stdout and "--agent NAME" in r.stdout
    r = devtune_cli("data", "convert", str(src), "-o", str(tmp_path / "q2.jsonl"), "--json",
                    "--agent", "赵先生", "--customer", "星河网盘客服")
    assert r.returncode == 0, r.stderr
    detected = json.loads(r.stdout)["detected"]
    assert "赵先生" in detected["agents"] and detected["customers"][0] == "星河网盘客服"


def test_a_text_transcript_is_not_pretraining_text(tmp_path):
    with pytest.raises(FixRefused, match="convert it first"):
        fix_file(EXPORTS / "wechat_liuhen.txt", tmp_path / "fixed.jsonl", yes=True)


def test_tagged_chat_logs_and_plain_prose_keep_their_reading(tmp_path):
    root = Path(__file__).resolve().parents[2]
    assert detect_source(root / "data" / "cs_chatlog_zh.txt") == "chatlog"
    prose = tmp_path / "notes.txt"
    prose.write_text("Meeting at 10:30 about the roadmap.\nThen lunch.\n", encoding="utf-8")
    with pytest.raises(ConvertError, match="no chat-export header lines"):
        detect_source(prose)


def test_a_log_file_is_no_transcript(tmp_path):
    log = tmp_path / "app.txt"
    log.write_text("2024-03-01 10:00:00 INFO service started\n2024-03-01 10:00:01 WARN disk at 80%\n"
                   "2024-03-01 10:00:02 ERROR: upstream timed out\n2024-03-01 10:00:03 worker-1 ready\n"
                   "2024-03-01 10:00:04 worker-2 ready\n", encoding="utf-8")
    with pytest.raises(ConvertError, match="no chat-export header lines"):
        detect_source(log)


def test_a_digit_that_is_no_number_is_no_timestamp():
    """Found by the fix fuzz test (hypothesis): an answer "²" passed str.isdigit() and float("²") raised, so
    probing a dataset for a chat export crashed `data lint` and `data fix`."""
    from core.data.transcripts.stamps import value_seconds

    assert value_seconds("²") is None and value_seconds("٣٤٥٦٧٨٩٠١٢") is None
    assert value_seconds("1709884800") == 1709884800.0 and value_seconds("1709884800000") == 1709884800.0
