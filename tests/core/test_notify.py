"""Notifications (issue 33, "word when it matters"): each platform's request as its docs describe it, the
signatures computed as the docs' own sample code computes them, secrets never shown, and the targets file."""

import base64
import hashlib
import hmac
import json
import os
import stat
import urllib.parse

import pytest

from core.errors import BadInput, Refused, Unavailable
from core.notify.events import FAILED, FINISHED, TEST, NotifyEvent
from core.notify.formats import WECOM_MAX_BYTES, dingtalk_sign, feishu_sign, judge_reply, payload
from core.notify.redact import MASK, redact_url, scrub, url_secrets
from core.notify.destinations import Target, add_target, config_path, load_targets, remove_target

FEISHU = "https://open.feishu.cn/open-apis/bot/v2/hook/5e3d587e-d78e-4a07-bd07-265f269f86fd"
DINGTALK = "https://oapi.dingtalk.com/robot/send?access_token=e9a8118c8a3dc2f1b4c3685fab41df25b9dc865fd74"
WECOM = "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=693a91f6-7f1e-4bc4-97a0-0ec2sifa5aaa"
SLACK = "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"


def failed_event() -> NotifyEvent:
    return NotifyEvent(kind=FAILED, run="20260101-000000-kefu", workspace="/srv/ws", host="gpu-node-1",
                       config="configs/train.yaml", status="failed", exit_code=1, duration_s=3725, step=40,
                       total_steps=120, last_loss=1.2345, cause="the dataset is not in dataset_info.json",
                       fix="register it with `devtune data register`")


def test_feishu_sign_is_the_docs_sample_code():
    # open.feishu.cn custom bot docs, Python sample: key = timestamp + "\n" + secret, HMAC-SHA256 of nothing, Base64
    timestamp, secret = 1599360473, "nIMtb7r3N9pkXyXdtAbx6e"
    string_to_sign = "{}\n{}".format(timestamp, secret)
    hmac_code = hmac.new(string_to_sign.encode("utf-8"), digestmod=hashlib.sha256).digest()
    assert feishu_sign(secret, timestamp) == base64.b64encode(hmac_code).decode("utf-8")


def test_dingtalk_sign_is_the_docs_sample_code():
    # open.dingtalk.com custom robot docs, Python sample: HMAC-SHA256 keyed by the secret of timestamp + "\n" +
    # secret, Base64, then urlencoded (httpx does that last step as it puts the value in the query)
    timestamp, secret = 1546084445901, "SEC10d6e79b42bd94be0d0d603843651aa2ccd7186db6edbc"
    string_to_sign = "{}\n{}".format(timestamp, secret)
    hmac_code = hmac.new(secret.encode("utf-8"), string_to_sign.encode("utf-8"), digestmod=hashlib.sha256).digest()
    assert urllib.parse.quote_plus(dingtalk_sign(secret, timestamp)) == urllib.parse.quote_plus(
        base64.b64encode(hmac_code))
    assert dingtalk_sign(secret, timestamp) != feishu_sign(secret, timestamp)  # the two schemes differ


def test_feishu_post_with_its_signature_in_the_body():
    req = payload("feishu", failed_event(), secret="s3cret", now=1700000000.5)
    assert req.params == {}
    assert req.body["msg_type"] == "post"
    assert req.body["timestamp"] == "1700000000"  # seconds, a string
    assert req.body["sign"] == feishu_sign("s3cret", 1700000000)
    (lang, post), = req.body["content"]["post"].items()
    assert lang in ("zh_cn", "en_us")
    assert post["title"] == "devtune: run 20260101-000000-kefu failed"
    assert all(isinstance(line, list) and line[0]["tag"] == "text" for line in post["content"])
    texts = [line[0]["text"] for line in post["content"]]
    assert "cause: the dataset is not in dataset_info.json" in texts
    assert "fix: register it with `devtune data register`" in texts
    assert "last loss: 1.2345" in texts and "duration: 1 h 02 min" in texts
    assert "timestamp" not in payload("lark", failed_event()).body  # unsigned when no secret


def test_dingtalk_markdown_and_its_signed_query():
    req = payload("dingtalk", failed_event(), secret="SECabc", now=1700000000.123)
    assert req.body["msgtype"] == "markdown"
    assert req.body["markdown"]["title"] == "devtune: run 20260101-000000-kefu failed"
    assert req.body["markdown"]["text"].startswith("#### devtune: run 20260101-000000-kefu failed\n\n")
    assert req.params == {"timestamp": "1700000000123", "sign": dingtalk_sign("SECabc", 1700000000123)}


def test_wecom_markdown_within_its_byte_limit():
    req = payload("wecom", failed_event())
    assert req.body["msgtype"] == "markdown"
    assert req.body["markdown"]["content"].startswith("**devtune: run 20260101-000000-kefu failed**\n> cause:")
    huge = failed_event()
    huge.cause = "溢出" * 3000  # 18,000 bytes of UTF-8
    content = payload("wecom", huge).body["markdown"]["content"]
    assert len(content.encode("utf-8")) <= WECOM_MAX_BYTES
    content.encode("utf-8").decode("utf-8")  # cut on a character boundary


def test_slack_text_fallback_and_blocks():
    req = payload("slack", failed_event())
    assert req.body["text"] == "devtune: run 20260101-000000-kefu failed"
    header, section = req.body["blocks"]
    assert header == {"type": "header", "text": {"type": "plain_text", "text": req.body["text"]}}
    assert section["type"] == "section" and section["text"]["type"] == "mrkdwn"
    long = failed_event()
    long.cause = "x" * 5000
    assert len(payload("slack", long).body["blocks"][1]["text"]["text"]) <= 3000


def test_generic_json_is_the_event_as_is():
    event = failed_event()
    body = payload("json", event).body
    assert body["schema"] == "devtune.notify/1"
    assert {k: body[k] for k in ("kind", "run", "cause", "fix", "last_loss", "duration_s")} == {
        "kind": "failed", "run": event.run, "cause": event.cause, "fix": event.fix, "last_loss": 1.2345,
        "duration_s": 3725}
    json.dumps(body)


def test_titles_of_each_event():
    assert NotifyEvent(kind=FINISHED, run="r1").title() == "devtune: run r1 finished"
    assert NotifyEvent(kind=FINISHED, run="x1", run_kind="export").title() == "devtune: export x1 finished"
    assert NotifyEvent(kind="stalled", run="r1").title() == "devtune: run r1 has stalled"
    assert "worse than its base" in NotifyEvent(kind="eval-worse", eval_id="e1").title()
    assert NotifyEvent(kind=TEST, host="h").title() == "devtune: a test notification from h"


@pytest.mark.parametrize(("fmt", "status", "text", "arrived", "retry"), [
    ("feishu", 200, '{"code": 0, "msg": "success", "data": {}}', True, False),
    ("feishu", 200, '{"code": 19021, "msg": "sign match fail or timestamp is not within one hour"}', False, False),
    ("dingtalk", 200, '{"errcode": 0, "errmsg": "ok"}', True, False),
    ("dingtalk", 200, '{"errcode": 310000, "errmsg": "keywords not in content"}', False, False),
    ("dingtalk", 200, '{"errcode": 130101, "errmsg": "send too fast"}', False, True),
    ("wecom", 200, '{"errcode": 45009, "errmsg": "api freq out of limit"}', False, True),
    ("wecom", 200, '{"errcode": 0, "errmsg": "ok"}', True, False),
    ("slack", 200, "ok", True, False),
    ("slack", 400, "invalid_payload", False, False),
    ("slack", 404, "no_service", False, False),
    ("slack", 429, "rate limited", False, True),
    ("json", 204, "", True, False),
    ("json", 502, "bad gateway", False, True),
])
def test_what_each_reply_means(fmt, status, text, arrived, retry):
    verdict = judge_reply(fmt, status, text)
    assert (verdict.arrived, verdict.retry) == (arrived, retry)


@pytest.mark.parametrize("url", [FEISHU, DINGTALK, WECOM, SLACK])
def test_a_webhook_url_is_shown_without_its_key(url):
    shown = redact_url(url)
    secret_parts = [s for s in url_secrets(url) if s != url]
    assert secret_parts and MASK in shown
    for part in secret_parts:
        assert part not in shown
    assert shown.split("/")[2] == url.split("/")[2]  # the host stays: which robot it is
    assert scrub(f"POST {url} failed: 404", url_secrets(url)) == f"POST {MASK} failed: 404"


def test_feishu_path_words_stay_readable():
    assert redact_url(FEISHU) == "https://open.feishu.cn/open-apis/bot/v2/hook/***"
    assert redact_url("https://user:pw@example.com/hook?token=abc#frag") == "https://example.com/hook?token=***"


def test_targets_file_is_private_and_holds_no_env_secret(workspace, monkeypatch):
    monkeypatch.setenv("FEISHU_SECRET", "very-secret-signing-key")
    add_target(workspace, Target(name="team", format="feishu", url=FEISHU, secret_env="FEISHU_SECRET"))
    path = config_path(workspace)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "very-secret-signing-key" not in path.read_text()
    assert [t.name for t in load_targets(workspace)] == ["team"]
    assert load_targets(workspace)[0].signing_secret() == "very-secret-signing-key"
    public = json.dumps(load_targets(workspace)[0].public())
    assert "5e3d587e" not in public and "very-secret" not in public
    with pytest.raises(Refused, match="team"):
        add_target(workspace, Target(name="team", format="slack", url=SLACK))
    assert remove_target(workspace, "team").name == "team"
    assert load_targets(workspace) == []
    with pytest.raises(Unavailable, match="team"):
        remove_target(workspace, "team")


def test_a_secret_file_others_can_read_is_refused(workspace, tmp_path):
    secret = tmp_path / "dingtalk.secret"
    secret.write_text("SECabc\n")
    os.chmod(secret, 0o644)
    target = Target(name="dt", format="dingtalk", url=DINGTALK, secret_file=str(secret))
    with pytest.raises(BadInput, match="chmod 600"):
        target.signing_secret()
    os.chmod(secret, 0o600)
    assert target.signing_secret() == "SECabc"


@pytest.mark.parametrize(("target", "words"), [
    (Target(name="a", format="teams", url=SLACK), "unknown notify format"),
    (Target(name="a", format="slack", url=SLACK, secret_env="X"), "not signed"),
    (Target(name="a", format="slack"), "URL"),
    (Target(name="a", format="slack", url="ftp://x"), "not an http"),
    (Target(name="a", format="slack", url=SLACK, events=["done"]), "unknown notify events"),
    (Target(name="a", format="command"), "command"),
])
def test_a_target_that_cannot_work_is_refused_with_what_to_do(workspace, target, words):
    with pytest.raises(BadInput, match=words):
        add_target(workspace, target)
    assert not config_path(workspace).exists()


def test_an_unset_url_variable_is_said_by_name(monkeypatch):
    monkeypatch.delenv("NOTIFY_URL_X", raising=False)
    with pytest.raises(Unavailable, match="NOTIFY_URL_X"):
        Target(name="a", format="json", url_env="NOTIFY_URL_X").resolved_url()
