"""Sending notifications to a real HTTP receiver on 127.0.0.1: retries with back-off on 5xx/429 and network errors,
the platforms' signatures verified as the platforms verify them, a command target fed on stdin, a run's end, a stall
and an eval's "worse" verdict sent, and no secret in what is written."""

import base64
import hashlib
import hmac
import json
import os
import socket
import sys
import time

from core.eval.eval_report import EvalReport, SetSummary, SideMetrics, TargetInfo
from core.notify.events import FAILED, FINISHED, NotifyEvent
from core.notify.run_events import StallWatch, notify_eval, notify_run_end
from core.notify.send import deliver
from core.notify.destinations import Target, add_target
from core.train.failures import diagnose_record
from core.train.runs import RunStatus, read_record, write_record
from tests.notify_receiver import Receiver
from tests.recorded_runs import place_recorded_run

KEY = "b0c7a1f2-9d4e-4f53-8a61-7e2d9c1b5f30"  # the path key of a Feishu-like URL: the secret in it


def event() -> NotifyEvent:
    return NotifyEvent(kind=FINISHED, run="r1", workspace="/ws", last_loss=0.5)


def test_two_failures_then_it_arrives_with_growing_back_off(tmp_path):
    waits = []
    with Receiver(script=[(503, "busy", {}), (500, "oops", {})], default=(200, "ok", {})) as rx:
        target = Target(name="s", format="slack", url=f"{rx.url}/services/T0/B0/{KEY}")
        (sent,) = deliver(event(), [target], log=tmp_path / "notify.jsonl", sleep=waits.append)
    assert (sent.arrived, sent.attempts, sent.status) == (True, 3, 200)
    assert waits == [1.0, 2.0]
    assert len(rx.received) == 3 and rx.received[-1].body["text"] == "devtune: run r1 finished"
    (line,) = [json.loads(x) for x in (tmp_path / "notify.jsonl").read_text().splitlines()]
    assert line["arrived"] and line["attempts"] == 3 and line["event"] == "finished"
    assert KEY not in (tmp_path / "notify.jsonl").read_text()


def test_a_rate_limit_waits_as_told_and_a_refusal_is_not_retried():
    waits = []
    with Receiver(script=[(429, "slow down", {"Retry-After": "0"}), (200, "ok", {}),
                          (400, "invalid_payload", {})]) as rx:
        target = Target(name="s", format="slack", url=f"{rx.url}/services/T0/B0/{KEY}")
        (first,) = deliver(event(), [target], sleep=waits.append)
        (second,) = deliver(event(), [target], sleep=waits.append)
    assert (first.arrived, first.attempts, waits) == (True, 2, [0.0])
    assert (second.arrived, second.attempts, second.status) == (False, 1, 400)
    assert "invalid_payload" in second.detail


def test_a_receiver_that_is_not_there_is_tried_four_times_and_said_without_the_key():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nobody listens once closed
    waits = []
    target = Target(name="j", format="json", url=f"http://127.0.0.1:{port}/hook/{KEY}?token=tok-123456789")
    (sent,) = deliver(event(), [target], sleep=waits.append)
    assert (sent.arrived, sent.attempts, waits) == (False, 4, [1.0, 2.0, 4.0])
    assert "ConnectError" in sent.detail
    assert KEY not in sent.detail + sent.to and "tok-123456789" not in sent.detail + sent.to


def test_feishu_checks_the_signature_as_feishu_does():
    secret = "nIMtb7r3N9pkXyXdtAbx6e"
    with Receiver() as rx:
        os.environ["DEVTUNE_TEST_FEISHU_SECRET"] = secret
        try:
            target = Target(name="f", format="feishu", url=f"{rx.url}/open-apis/bot/v2/hook/{KEY}",
                            secret_env="DEVTUNE_TEST_FEISHU_SECRET")
            (sent,) = deliver(event(), [target])
        finally:
            del os.environ["DEVTUNE_TEST_FEISHU_SECRET"]
    body = rx.received[0].body
    assert sent.arrived and body["msg_type"] == "post"
    assert abs(int(body["timestamp"]) - time.time()) < 3600  # Feishu: within an hour of now
    key = f"{body['timestamp']}\n{secret}".encode()
    assert body["sign"] == base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()


def test_dingtalk_gets_its_signature_in_the_query_url_encoded(tmp_path):
    secret_file = tmp_path / "dingtalk.secret"
    secret_file.write_text("SEC0123456789abcdef\n")
    secret_file.chmod(0o600)
    with Receiver(default=(200, '{"errcode": 0, "errmsg": "ok"}', {})) as rx:
        target = Target(name="d", format="dingtalk", url=f"{rx.url}/robot/send?access_token=tok{KEY}",
                        secret_file=str(secret_file))
        for _ in range(20):  # a Base64 signature with "+" or "/" in it is the one whose encoding matters
            (sent,) = deliver(event(), [target])
            assert sent.arrived
    for got in rx.received:
        assert got.query["access_token"] == [f"tok{KEY}"]
        stamp, sign = got.query["timestamp"][0], got.query["sign"][0]
        digest = hmac.new(b"SEC0123456789abcdef", f"{stamp}\nSEC0123456789abcdef".encode(), hashlib.sha256)
        assert sign == base64.b64encode(digest.digest()).decode()
        assert "+" not in got.raw_query.split("sign=", 1)[1].split("&")[0]  # a "+" would arrive as a space
        assert got.body["msgtype"] == "markdown"
    assert any("%2B" in got.raw_query or "%2F" in got.raw_query for got in rx.received)


def test_feishu_and_wecom_error_codes_in_a_200_reply():
    with Receiver(script=[(200, '{"code": 19021, "msg": "sign match fail"}', {}),
                          (200, '{"errcode": 45009, "errmsg": "api freq out of limit"}', {}),
                          (200, '{"errcode": 0, "errmsg": "ok"}', {})]) as rx:
        (feishu,) = deliver(event(), [Target(name="f", format="feishu", url=f"{rx.url}/hook/{KEY}")])
        (wecom,) = deliver(event(), [Target(name="w", format="wecom", url=f"{rx.url}/send?key={KEY}")],
                           sleep=lambda s: None)
    assert (feishu.arrived, feishu.attempts) == (False, 1) and "19021" in feishu.detail
    assert (wecom.arrived, wecom.attempts) == (True, 2)
    assert rx.received[-1].body["msgtype"] == "markdown"


def test_a_command_reads_the_event_on_stdin_never_in_argv(tmp_path):
    out = tmp_path / "got.json"
    script = "import sys, json; open(sys.argv[1], 'w').write(json.dumps({'argv': sys.argv, 'stdin': sys.stdin.read()}))"
    target = Target(name="c", format="command", command=[sys.executable, "-c", script, str(out)])
    (sent,) = deliver(NotifyEvent(kind=FAILED, run="r9", cause="out of memory"), [target])
    got = json.loads(out.read_text())
    assert sent.arrived and json.loads(got["stdin"])["cause"] == "out of memory"
    assert not any("out of memory" in a for a in got["argv"])
    (bad,) = deliver(event(), [Target(name="c", format="command", command=[sys.executable, "-c", "exit(3)"])])
    assert (bad.arrived, bad.status) == (False, 3)


def test_a_target_that_does_not_want_the_event_gets_nothing():
    with Receiver() as rx:
        assert deliver(event(), [Target(name="j", format="json", url=rx.url, events=["failed"])]) == []
    assert rx.received == []


def test_a_failed_run_sends_its_diagnosis_and_a_finished_run_its_last_loss(workspace):
    failed = place_recorded_run(workspace, "20260101-000000-bad", "lf_unknown_template", RunStatus.FAILED, 1,
                                started=time.time() - 90)
    done = place_recorded_run(workspace, "20260101-000100-ok", "lf_sft_cpu_demo", RunStatus.FINISHED, 0,
                              started=time.time() - 600, ended_by_supervisor=True)
    with Receiver() as rx:
        add_target(workspace, Target(name="hook", format="json", url=f"{rx.url}/hook/{KEY}"))
        assert notify_run_end(workspace.runs_dir / failed.id)[0].arrived
        assert notify_run_end(workspace.runs_dir / done.id)[0].arrived
    got_failed, got_done = (r.body for r in rx.received)
    first = diagnose_record(workspace, read_record(workspace.runs_dir / failed.id))[0]
    assert (got_failed["kind"], got_failed["cause"], got_failed["fix"]) == ("failed", first.title, first.fix)
    assert got_failed["exit_code"] == 1 and got_failed["duration_s"] == 30
    assert got_done["kind"] == "finished" and got_done["cause"] is None
    assert isinstance(got_done["last_loss"], float) and got_done["step"] >= 1
    record = json.loads((workspace.runs_dir / done.id / "notify.jsonl").read_text())
    assert record["arrived"] and KEY not in json.dumps(record)
    assert KEY not in (workspace.runs_dir / done.id / "run.json").read_text()


def test_a_stopped_run_sends_nothing(workspace):
    run = place_recorded_run(workspace, "20260101-000200-stop", "lf_sft_cpu_demo", RunStatus.STOPPED, 0,
                             started=time.time() - 60)
    with Receiver() as rx:
        add_target(workspace, Target(name="hook", format="json", url=rx.url))
        assert notify_run_end(workspace.runs_dir / run.id) == []
    assert rx.received == []


def test_a_stall_is_told_once(workspace):
    run = place_recorded_run(workspace, "20260101-000300-live", "lf_sft_cpu_demo", RunStatus.RUNNING, None,
                             started=time.time() - 3600)
    log = workspace.root / "saves" / run.id / "trainer_log.jsonl"
    old = time.time() - 1800  # no new step for half an hour
    os.utime(log, (old, old))
    for name in ("stdout.log", "stderr.log"):
        os.utime(workspace.runs_dir / run.id / name, (old, old))
    with Receiver() as rx:
        add_target(workspace, Target(name="hook", format="json", url=rx.url, events=["stalled"]))
        watch = StallWatch(workspace.runs_dir / run.id, os.getpid())
        assert watch.check(False) is True
        assert watch.check(True) is True  # the same stall: not told again
    (got,) = [r.body for r in rx.received]
    assert got["kind"] == "stalled" and "no new step" in got["cause"]
    record = read_record(workspace.runs_dir / run.id)
    write_record(workspace.runs_dir / run.id, record.model_copy(update={"stop_requested": time.time()}))
    assert StallWatch(workspace.runs_dir / run.id, os.getpid()).check(False) is False  # stopping is no stall


def test_an_eval_worse_than_its_base_is_told(workspace, tmp_path):
    def report(base: float, tuned: float) -> EvalReport:
        sets = {"heldout": SetSummary(rows=10, base=SideMetrics(chrf=base), tuned=SideMetrics(chrf=tuned))}
        return EvalReport(id="e1", dataset="kefu", run="r1", sets=sets,
                          base=TargetInfo(url="http://127.0.0.1:8001", model="base"),
                          tuned=TargetInfo(url="http://127.0.0.1:8002", model="tuned"))

    with Receiver() as rx:
        add_target(workspace, Target(name="hook", format="json", url=rx.url))
        assert notify_eval(workspace, report(0.6, 0.7), tmp_path / "n.jsonl") == []  # better: nothing
        (sent,) = notify_eval(workspace, report(0.7, 0.4), tmp_path / "n.jsonl")
    (got,) = [r.body for r in rx.received]
    assert sent.arrived and got["kind"] == "eval-worse" and got["eval_id"] == "e1" and got["run"] == "r1"
    assert "worse than its base" in got["note"]


def test_notify_test_says_each_outcome_with_its_exit_code(workspace, devtune_cli):
    ws = str(workspace.root)
    assert devtune_cli("-w", ws, "notify", "test").returncode == 2  # no target
    with Receiver(default=(200, "ok", {})) as rx:
        url = f"{rx.url}/services/T0/B0/{KEY}"
        out = devtune_cli("-w", ws, "notify", "add", "-", "--format", "slack", "--name", "team", input=url + "\n")
        assert out.returncode == 0 and KEY not in out.stdout
        listed = devtune_cli("-w", ws, "notify", "list", "--json")
        assert json.loads(listed.stdout)["targets"][0]["name"] == "team" and KEY not in listed.stdout
        ok = devtune_cli("-w", ws, "notify", "test", "--json")
        assert ok.returncode == 0, ok.stderr
        assert json.loads(ok.stdout)["deliveries"][0]["arrived"] is True
        assert rx.received[0].body["text"].startswith("devtune: a test notification")
        rx.default = (404, "no_service", {})
        bad = devtune_cli("-w", ws, "notify", "test")
        assert bad.returncode == 1 and "team" in bad.stderr and "no_service" in bad.stdout
    assert devtune_cli("-w", ws, "notify", "remove", "team").returncode == 0
    assert devtune_cli("-w", ws, "notify", "remove", "team").returncode == 2
