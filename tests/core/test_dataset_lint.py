"""Lint: every rule of table A4 fires on the line that shows it, with its severity and fix kind; the
hot loop, the general loop and --jobs parts agree; the demo file's findings are the ones the demo shows."""

import json
import os
from pathlib import Path

import pytest

from core.data import duplicates
from core.data.findings import RULES
from core.data.lint import LintOptions, lint_file

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
FIXTURES = ROOT / "tests" / "fixtures" / "data"
OK = '{"instruction": "How do I reset my password?", "input": "", "output": "Use the Forgot password link."}'


def lint_text(tmp_path, text: str, name: str = "t.jsonl", **opts):
    p = tmp_path / name
    p.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return lint_file(p, LintOptions(**opts))


def rules_at(report) -> set[tuple[str, int]]:
    return {(f.rule, f.line) for f in report.findings}


def row(i: int, **kw) -> str:
    base = {"instruction": f"question number {i} about orders", "input": "", "output": f"answer number {i}, "
            "with enough words to be a real answer"}
    base.update(kw)
    return json.dumps(base, ensure_ascii=False)


CASES = [
    # (name, lines, rule, line, column, severity, fix)
    ("trailing comma", [OK, '{"instruction": "a b", "input": "", "output": "ccccccccccccc",}'],
     "trailing-comma", 2, 62, "error", "safe"),
    ("python repr", [OK, "{'instruction': 'a', 'input': '', 'output': 'bbbbbbbbbbbbb'}"], "python-repr", 2, None,
     "error", "safe"),
    ("raw tab", [OK, '{"instruction": "a\tb", "input": "", "output": "ccccccccccccc"}'], "control-char", 2, 19,
     "error", "safe"),
    ("smart quotes", [OK, '{“instruction”: “a”, “input”: “”, “output”: “bbbbbbbbbbbbb”}'], "smart-quotes", 2, None,
     "error", "confirm"),
    ("truncated", [OK, '{"instruction": "a", "input": "", "output": "bbb'], "truncated", 2, 45, "error", "none"),
    ("syntax", [OK, '{"instruction": "a" "input": ""}'], "json-syntax", 2, 21, "error", "none"),
    ("renamed keys", [OK, '{"question": "qqqqqqqqqq", "answer": "aaaaaaaaaaaaa"}'], "missing-keys", 2, None,
     "error", "confirm"),
    ("no output", [OK, '{"instruction": "qqqqqqqqqq", "input": ""}'], "missing-keys", 2, None, "error", "none"),
    ("number output", [OK, '{"instruction": "q", "input": "", "output": 42}'], "non-string", 2, None, "error",
     "confirm"),
    ("null output", [OK, '{"instruction": "q", "input": "", "output": null}'], "non-string", 2, None, "error", "none"),
    ("null input", [OK, '{"instruction": "q", "input": null, "output": "aaaaaaaaaaaaa"}'], "non-string", 2, None,
     "error", "safe"),
    ("object output", [OK, '{"instruction": "q", "input": "", "output": {"a": 1}}'], "non-string", 2, None, "error",
     "none"),
    ("NaN output", [OK, '{"instruction": "q", "input": "", "output": NaN}'], "non-string", 2, None, "error", "none"),
    ("duplicate key", [OK, '{"instruction": "q", "input": "", "output": "aaaaaaaaaaaaa", "output": "b"}'],
     "duplicate-key", 2, None, "error", "confirm"),
    ("lone surrogate", [OK, '{"instruction": "q\\ud800", "input": "", "output": "aaaaaaaaaaaaa"}'],
     "lone-surrogate", 2, None, "error", "confirm"),
    ("not an object", [OK, '["a", "b"]'], "not-an-object", 2, None, "error", "none"),
    ("empty output", [OK, '{"instruction": "q", "input": "", "output": "   "}'], "empty-output", 2, None, "warning",
     "confirm"),
    ("duplicate", [OK, row(1), OK], "duplicate", 3, None, "warning", "confirm"),
    ("conflict", [OK, row(1), OK.replace("Use the Forgot", "Call the support desk")], "conflict", 3, None,
     "warning", "none"),
    ("phone", [OK, row(1, input="call me at 13812345678")], "pii", 2, None, "warning", "confirm"),
    ("email", [OK, row(1, output="write to li.lei@example.com for help")], "pii", 2, None, "warning", "confirm"),
    ("id number", [OK, row(1, input="ID 110101199003074518")], "pii", 2, None, "warning", "confirm"),
    ("id number 20xx", [OK, row(1, input="ID 440301200801011234")], "pii", 2, None, "warning", "confirm"),
    ("us phone", [OK, row(1, output="call (555) 123-4567 today")], "pii", 2, None, "warning", "confirm"),
    ("intl phone", [OK, row(1, output="call +44 20 7946 0958 today")], "pii", 2, None, "warning", "confirm"),
    ("U+FFFD", [OK, row(1, output="bad \ufffd char here in the text")], "mojibake", 2, None, "warning", "confirm"),
    ("latin-1 mojibake", [OK, row(1, output="cafÃ© au lait is what we serve")], "mojibake", 2, None, "warning",
     "confirm"),
    ("锟斤拷", [OK, row(1, output="锟斤拷锟斤拷 garbage from a bad conversion")], "mojibake", 2, None, "warning",
     "confirm"),
    ("two objects", [OK, OK.replace("reset", "change") + row(2)], "multi-object-line", 2, None, "warning", "safe"),
    ("blank line", [OK, "", row(1)], "blank-line", 2, None, "info", "safe"),
    ("missing input", [OK, '{"instruction": "qqqqqqqqqq", "output": "aaaaaaaaaaaaa"}'], "missing-input", 2, None,
     "info", "safe"),
    ("whitespace", [OK, row(1, instruction="  padded question  ")], "whitespace", 2, None, "info", "safe"),
    ("zero width", [OK, row(1, output="zero\u200bwidth inside the answer text")], "whitespace", 2, None, "info",
     "safe"),
    ("short output", [OK, row(1, output="ok")], "short-output", 2, None, "info", "none"),
    ("repetition", [OK, row(1, output="谢谢" * 60)], "repetition", 2, None, "info", "none"),
]


@pytest.mark.parametrize("name,lines,rule,line,column,severity,fix", CASES, ids=[c[0] for c in CASES])
def test_each_rule_on_its_line(tmp_path, name, lines, rule, line, column, severity, fix):
    report = lint_text(tmp_path, "\n".join(lines) + "\n")
    hits = [f for f in report.findings if f.rule == rule and f.line == line]
    assert hits, f"{rule} not at L{line}: {[(f.rule, f.line, f.message) for f in report.findings]}"
    f = hits[0]
    assert (f.severity, f.fix) == (severity, fix)
    assert f.message.startswith(f"L{line}")
    if column is not None:
        assert f.column == column and f.message.startswith(f"L{line}:{column}:")
    assert RULES[rule].id == rule
    # the good first line is never blamed
    assert not [g for g in report.findings if g.line == 1 and g.severity == "error"]


def test_clean_rows_have_no_findings(tmp_path):
    report = lint_text(tmp_path, "\n".join(row(i) for i in range(50)) + "\n")
    assert report.findings == []
    assert report.rows == 50 and report.stats.rows == 50 and report.format == "alpaca"


def test_file_level_findings_sit_on_the_line_that_shows_them(tmp_path):
    text = "\ufeff" + OK + "\r\n" + row(1) + "\r\n" + row(2)
    report = lint_text(tmp_path, text)
    assert {("bom", 1), ("crlf", 1), ("no-final-newline", 3)} <= rules_at(report)
    assert report.encoding == "utf-8-sig"


def test_every_repeat_is_reported_and_counted(tmp_path):
    lines = [OK] + [OK] * 5 + ['{"instruction": "q", "input": "", "output": 1}'] * 3
    report = lint_text(tmp_path, "\n".join(lines) + "\n")
    assert [f.line for f in report.findings if f.rule == "duplicate"] == [2, 3, 4, 5, 6, 8, 9]
    assert [f.line for f in report.findings if f.rule == "non-string"] == [7, 8, 9]
    assert report.stats.duplicates == 7
    assert "L3: duplicate of L1" in {f.message.split(";")[0] for f in report.findings}


def test_demo_file_findings(tmp_path):
    report = lint_file(DATA / "support_messy.jsonl")
    got = rules_at(report)
    expected = {("bom", 1), ("crlf", 1), ("blank-line", 4), ("trailing-comma", 6), ("python-repr", 15),
                ("non-string", 16), ("empty-output", 17), ("duplicate", 18), ("conflict", 19), ("pii", 20),
                ("multi-object-line", 21), ("missing-input", 22), ("whitespace", 23), ("missing-keys", 30),
                ("non-string", 31), ("truncated", 32), ("no-final-newline", 33)}
    assert expected <= got, expected - got
    assert report.errors == 6 and report.rows == 33


def test_encodings_are_named_and_placed(tmp_path):
    gbk = lint_file(FIXTURES / "gbk.jsonl")
    assert gbk.encoding == "gb18030" and ("encoding", 1) in rules_at(gbk) and gbk.stats.rows == 3
    mixed = lint_file(FIXTURES / "mixed_encoding.jsonl")
    assert ("encoding", 2) in rules_at(mixed) and mixed.stats.rows == 3
    utf16 = lint_file(FIXTURES / "utf16.jsonl")
    assert utf16.encoding == "utf-16-le" and ("encoding", 1) in rules_at(utf16)
    assert "bom" not in {f.rule for f in utf16.findings}  # the UTF-16 BOM is part of the encoding finding
    junk = lint_text(tmp_path, OK.encode() + b"\n" + b'{"instruction": "\xff\xfe\xfa", "output": "x"}\n', "j.jsonl")
    assert any(f.rule == "encoding" and f.line == 2 and f.fix == "none" for f in junk.findings)


def test_arrays_streams_and_text(tmp_path):
    arr = lint_file(FIXTURES / "broken_array.json")
    assert {("json-array", 1), ("trailing-comma", 5), ("python-repr", 7), ("non-string", 8)} <= rules_at(arr)
    assert arr.layout == "json-array" and arr.rows == 4
    stream = lint_file(FIXTURES / "pretty_stream.json")
    assert stream.layout == "json-stream" and stream.rows == 2 and stream.errors == 1
    one_line = lint_text(tmp_path, "[" + ",".join([OK, row(1), row(2)]) + "]", "one.json")
    assert one_line.rows == 3 and one_line.layout == "json-array"
    text = lint_file(DATA / "cs_chatlog_zh.txt")
    assert text.layout == "text" and [f.rule for f in text.findings] == ["not-json"]
    assert "devtune data convert" in text.findings[0].message
    csv = lint_file(DATA / "tickets.csv")
    assert csv.layout == "csv" and csv.errors == 1
    assert lint_text(tmp_path, "", "e.jsonl").findings[0].rule == "not-json"


def test_schemas(tmp_path):
    assert lint_file(DATA / "qa_pairs.json").format == "alpaca (question/answer)"
    assert lint_file(DATA / "sharegpt_chats.json").format == "sharegpt"
    msgs = lint_file(FIXTURES / "messages.jsonl")
    assert msgs.format == "messages" and {("sharegpt-roles", 3), ("sharegpt-roles", 4)} <= rules_at(msgs)
    odd = '{"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}, {"from": "human", ' \
          '"value": "c"}]}'
    ok = '{"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "bbbbbbbbbbbb"}]}'
    assert ("dangling-turn", 2) in rules_at(lint_text(tmp_path, ok + "\n" + odd + "\n"))  # trimmed by fix


def test_key_set_change_after_10_mib_is_an_error(tmp_path):
    filler = row(0, output="x" * 2000)
    n = (10 << 20) // len(filler) + 50
    lines = [filler.replace("number 0", f"number {i}") for i in range(n)]
    lines.append(json.dumps({"instruction": "late", "input": "", "output": "late answer here ok",
                             "history": []}))
    report = lint_text(tmp_path, "\n".join(lines) + "\n", "big.jsonl", jobs=1)
    late = [f for f in report.findings if f.rule == "key-set-change"]
    assert late and late[0].severity == "error" and late[0].line == n + 1
    early = lint_text(tmp_path, OK + "\n" + json.dumps({**json.loads(OK), "history": []}) + "\n", "s.jsonl")
    assert [f.severity for f in early.findings if f.rule == "key-set-change"] == ["info"]


def test_token_lengths_against_cutoff(tmp_path):
    long_row = row(1, output="word " * 1500)
    report = lint_text(tmp_path, OK + "\n" + long_row + "\n", cutoff_len=256)
    too_long = [f for f in report.findings if f.rule == "too-long"]
    assert [f.line for f in too_long] == [2] and "cutoff_len 256" in too_long[0].message
    assert report.stats.over_cutoff == 1 and report.stats.over_cutoffs["512"] == 1


def test_tokenizer_counts_replace_the_estimate(tmp_path, tiny_model):
    long_row = row(1, output="退款 " * 600)
    report = lint_text(tmp_path, OK + "\n" + long_row + "\n", cutoff_len=300, tokenizer=str(tiny_model))
    assert report.stats.token_source == str(tiny_model)
    assert [f.line for f in report.findings if f.rule == "too-long"] == [2]
    assert not report.findings[0].message.startswith("L2: ~")  # exact counts, not "~"


def test_jobs_and_loops_agree(tmp_path):
    """--jobs 2 (byte-offset parts), --jobs 1 (hot loop) and the general loop (UTF-16) find the same."""
    lines = []
    for i in range(72000):
        if i % 997 == 5:
            lines.append(row(i - 1))  # duplicate of the previous row, often across the part boundary
        elif i % 1009 == 7:
            lines.append(row(i, output=None))
        elif i % 1013 == 3:
            lines.append('{"instruction": "broken", "output": "x",}')
        else:
            lines.append(row(i))
    text = "\n".join(lines) + "\n"
    p = tmp_path / "big.jsonl"
    p.write_text(text)
    assert p.stat().st_size > 8 << 20  # big enough to be split in parts
    one = lint_file(p, LintOptions(jobs=1))
    two = lint_file(p, LintOptions(jobs=2))
    spawn = lint_file(p, LintOptions(jobs=2, start_method="spawn"))
    with pytest.MonkeyPatch.context() as m:  # workers and the parent put the fingerprints on disk past 1000
        m.setattr(duplicates, "SPILL_ROWS", 1000)
        spilled = lint_file(p, LintOptions(jobs=2, start_method="fork"))
    key = lambda r: [(f.rule, f.line, f.message) for f in r.findings]  # noqa: E731
    assert key(one) == key(two) == key(spawn) == key(spilled)
    assert one.stats.to_json() == two.stats.to_json() == spawn.stats.to_json() == spilled.stats.to_json()
    u16 = tmp_path / "big16.jsonl"
    u16.write_bytes(text.encode("utf-16"))
    general = lint_file(u16, LintOptions(jobs=2))
    assert [(f.rule, f.line) for f in general.findings if f.rule != "encoding"] == [
        (f.rule, f.line) for f in one.findings]
    assert general.stats.tokens == one.stats.tokens and general.stats.duplicates == one.stats.duplicates


def _two_part_file(tmp_path):
    p = tmp_path / "parts.jsonl"
    p.write_text("\n".join(row(i) for i in range(70000)) + "\n")
    assert p.stat().st_size > 8 << 20
    return p


def test_spans_cover_the_file_at_line_starts(tmp_path, monkeypatch):
    import core.data.parallel_scan as parallel_scan

    monkeypatch.setattr(parallel_scan, "MIN_CHUNK_BYTES", 64 << 10)

    p = tmp_path / "spans.jsonl"
    text = "\n".join(row(i) for i in range(200000)) + "\n"
    p.write_text(text)
    size = p.stat().st_size
    data = p.read_bytes()
    for jobs in (1, 2, 3, 8):
        spans = parallel_scan.plan_spans(p, size, jobs)
        assert spans[0][0] == 0 and spans[-1][1] == size
        assert all(b == c for (_a, b), (c, _d) in zip(spans, spans[1:]))  # contiguous, no gap, no overlap
        assert all(a == 0 or data[a - 1:a] == b"\n" for a, _b in spans)
        workers = parallel_scan.workers_for(size, jobs)
        assert workers == min(jobs, size // parallel_scan.MIN_PART_BYTES) and (jobs == 1) == (len(spans) == 1)
        if jobs > 1:
            sizes = [b - a for a, b in spans]
            assert len(spans) > 2 * workers  # more chunks than workers: the free one takes the next
            assert all(b <= a + 200 for a, b in zip(sizes, sizes[1:]))  # smaller and smaller (± a line)
            assert sizes[0] > 4 * sizes[-2] and max(sizes[-2:]) < (64 << 10) + 4096


def test_jobs_progress_counts_every_process_bytes(tmp_path):
    """The progress a --jobs lint reports is the bytes all processes scanned, rising to the file's
    size, not one process's share."""
    p = _two_part_file(tmp_path)
    size = p.stat().st_size
    seen = []
    lint_file(p, LintOptions(jobs=2, start_method="fork"), progress=seen.append)
    scan = [x for x in seen if x.phase == "scan"]
    assert {x.total for x in scan} == {size}
    done = [x.done for x in scan]
    assert done == sorted(done) and size <= done[-1] <= size + 1
    assert [x.phase for x in seen][-1] == "duplicates"


def test_the_tail_goes_to_whichever_process_is_free(tmp_path, monkeypatch):
    """Each worker takes the next chunk when it is free: a worker slowed on its first chunk leaves the
    rest to the other; the merged report is still the one process's report."""
    import time

    import core.data.parallel_scan as parallel_scan

    p = _two_part_file(tmp_path)
    want = lint_file(p, LintOptions(jobs=1))
    scan = parallel_scan.scan_jsonl_part
    log = tmp_path / "taken"
    log.mkdir()

    def slowed(ctx, start, end, relative, progress=None):
        (log / f"{start}").write_text(str(os.getpid()))
        if start == 0:
            time.sleep(1.5)
        return scan(ctx, start, end, relative, progress)

    spans = parallel_scan.plan_spans(p, p.stat().st_size, 2)
    monkeypatch.setattr(parallel_scan, "scan_jsonl_part", slowed)
    got = lint_file(p, LintOptions(jobs=2, start_method="fork"))
    taken = {int(f.name): f.read_text() for f in log.iterdir()}
    assert sorted(taken) == [a for a, _b in spans]
    slow = taken[0]
    assert [pid for pid in taken.values()].count(slow) < len(spans) // 2  # the other worker took the tail
    assert [(f.rule, f.line, f.message) for f in got.findings] == [(f.rule, f.line, f.message)
                                                                   for f in want.findings]
    assert got.stats.to_json() == want.stats.to_json() and got.rows == want.rows


@pytest.mark.parametrize("how", ["raises", "dies"])
def test_a_failing_jobs_worker_fails_the_lint_with_a_clear_error(tmp_path, monkeypatch, how):
    """A worker's exception, or a worker killed outright, ends the lint with an error that names the
    part; never a hang waiting for a result that will not come."""
    import core.data.parallel_scan as parallel_scan

    scan = parallel_scan.scan_jsonl_part
    parent = os.getpid()

    def flaky(ctx, start, end, relative, progress=None):
        if os.getpid() != parent:  # the worker (forked: it runs this patched module)
            if how == "dies":
                os._exit(3)
            raise OSError("disk went away")
        return scan(ctx, start, end, relative, progress)

    monkeypatch.setattr(parallel_scan, "scan_jsonl_part", flaky)
    with pytest.raises(RuntimeError) as err:
        lint_file(_two_part_file(tmp_path), LintOptions(jobs=2, start_method="fork"))
    assert "the lint worker for bytes" in str(err.value)
    assert ("OSError: disk went away" if how == "raises" else "exit code 3") in str(err.value)


def test_near_duplicates_are_opt_in(tmp_path):
    a = row(1, output="Please open the order details page and choose Edit address before the parcel ships out")
    b = row(1, output="Please open the order details page and choose Edit address before the parcel ship out")
    text = "\n".join([OK, a, b]) + "\n"
    assert not [f for f in lint_text(tmp_path, text).findings if f.rule == "near-duplicate"]
    report = lint_text(tmp_path, text, near_dups=True)
    near = [f for f in report.findings if f.rule == "near-duplicate"]
    assert [f.line for f in near] == [3] and "similar to L2" in near[0].message
    assert report.stats.near_duplicates == 1


def test_json_contract(tmp_path):
    report = lint_text(tmp_path, OK + "\n" + '{"instruction": "q", "output": 1}\n')
    doc = report.to_json()
    assert {"file", "rows", "format", "encoding", "findings", "stats"} <= set(doc)
    for f in doc["findings"]:
        assert {"rule", "severity", "line", "column", "message", "fixable"} <= set(f)
        assert isinstance(f["fixable"], bool) and f["severity"] in ("error", "warning", "info")
    json.dumps(doc)


def test_spilled_fingerprints_find_the_same(tmp_path, monkeypatch):
    """Memory stays bounded: fingerprints go to disk buckets, and duplicates are still all found."""
    import glob
    import tempfile

    from core.data.duplicates import Fingerprints, find_duplicates

    lines = [row(i % 900, output=f"answer {i % 1300} long enough to be real") for i in range(20000)]
    p = tmp_path / "d.jsonl"
    p.write_text("\n".join(lines) + "\n")
    plain = lint_file(p)
    monkeypatch.setattr(duplicates, "SPILL_ROWS", 1500)
    spilled = lint_file(p)
    assert plain.stats.duplicates > 1000 and plain.stats.conflicts > 1000
    assert [(f.rule, f.line, f.message) for f in spilled.findings] == [(f.rule, f.line, f.message)
                                                                        for f in plain.findings]
    assert not glob.glob(str(Path(tempfile.gettempdir()) / "devtune-fingerprints-*"))
    parts, rows = [], []
    for k in range(3):
        fp = Fingerprints()
        for i in range(400):
            fp.add(i + 1, ((i * 7 + k) % 50) << 58 | k, i % 3)  # every bucket, and several in one
            rows.append((k * 1000 + i + 1, ((i * 7 + k) % 50) << 58 | k, i % 3))
        if k != 1:
            fp.spill()
        parts.append(fp.shifted(k * 1000))
    got = find_duplicates(parts)
    first_pair, first_prompt, want_d, want_c = {}, {}, [], []  # the plain reference, in line order
    for line, pr, o in sorted(rows):
        if (pr, o) in first_pair:
            want_d.append((line, first_pair[(pr, o)]))
            continue
        first_pair[(pr, o)] = line
        if pr not in first_prompt:
            first_prompt[pr] = (line, o)
        elif first_prompt[pr][1] != o:
            want_c.append((line, first_prompt[pr][0]))
    assert got.duplicates == want_d and got.conflicts == want_c and want_d and want_c
    for fp in parts:
        fp.discard()
