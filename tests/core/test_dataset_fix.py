"""Fix: a new file, never in place, atomically; rows in = rows out + rows rejected; safe fixes by default,
the others with --yes; the output lints without errors."""

import json
from pathlib import Path

import pytest

from core.files.atomic import FileExistsRefused
from core.data.fix import FixRefused, default_rejects_path, fix_file
from core.data.lint import lint_file

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
FIXTURES = ROOT / "tests" / "fixtures" / "data"


def read_jsonl(p: Path) -> list[dict]:
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines()]


def test_demo_file_safe_fixes_only(tmp_path):
    out = tmp_path / "clean.jsonl"
    report = fix_file(DATA / "support_messy.jsonl", out)
    assert report.balanced and (report.rows_in, report.rows_out, report.rows_rejected) == (33, 29, 4)
    rejected = read_jsonl(default_rejects_path(out))
    assert [r["line"] for r in rejected] == [16, 30, 31, 32]
    assert {r["rule"] for r in rejected} == {"non-string", "missing-keys", "truncated"}
    assert all(r["raw"] and r["reason"] for r in rejected)
    assert set(report.pending) == {"non-string", "missing-keys"}
    # dropping the exact duplicate (L18 of L1) is a fix the person asks for: named, the row written
    assert report.not_applied()["duplicate"] == {"rejected": 0, "kept": 1}
    rows = read_jsonl(out)
    assert all(list(r) == ["instruction", "input", "output"] for r in rows)
    assert any(r["output"] == "" for r in rows)  # an empty output is kept without --yes (it trains)
    assert any("13812345678" in r["input"] for r in rows)  # personal data untouched without --yes
    raw = out.read_bytes()
    assert b"\r" not in raw and raw.endswith(b"\n") and not raw.startswith(b"\xef\xbb\xbf")
    assert lint_file(out).errors == 0


def test_demo_file_with_yes(tmp_path):
    out = tmp_path / "clean.jsonl"
    report = fix_file(DATA / "support_messy.jsonl", out, yes=True)
    assert report.balanced and (report.rows_out, report.rows_rejected) == (29, 4)
    rows = read_jsonl(out)
    by_q = {r["instruction"]: r for r in rows}
    assert by_q["会员等级有几级？"]["output"] == "4"
    assert by_q["The item arrived damaged. What should I do?"]["output"].startswith("Sorry")
    assert by_q["订单可以取消吗？"]["output"].endswith("退货。")  # whitespace and zero-width stripped
    masked = by_q["客户来电要求回电"]["input"]
    assert "13812345678" not in masked and "138****5678" in masked and "***@example.com" in masked
    assert "有线下门店吗？" not in by_q  # empty output dropped with --yes
    report2 = lint_file(out)
    assert report2.errors == 0 and report2.warnings == 1  # the conflicting answer is for a person to decide


def test_never_in_place_and_never_over_a_file(tmp_path):
    src = tmp_path / "a.jsonl"
    src.write_text('{"instruction": "q", "input": "", "output": "aaaaaaaaaaaa"}\n')
    with pytest.raises(FixRefused):
        fix_file(src, src)
    out = tmp_path / "b.jsonl"
    out.write_text("mine\n")
    with pytest.raises(FileExistsRefused):
        fix_file(src, out)
    assert out.read_text() == "mine\n"
    fix_file(src, out, force=True)
    assert read_jsonl(out)[0]["instruction"] == "q"


def test_nothing_written_on_failure(tmp_path, monkeypatch):
    import core.data.fix as fixmod

    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps({"instruction": f"q{i}", "input": "", "output": "a" * 20}) + "\n"
                           for i in range(50)))
    out = tmp_path / "out.jsonl"
    calls = {"n": 0}
    real = fixmod._RowFixer.value

    def boom(self, *a, **kw):
        calls["n"] += 1
        if calls["n"] == 30:
            raise RuntimeError("disk gone")
        return real(self, *a, **kw)

    monkeypatch.setattr(fixmod._RowFixer, "value", boom)
    with pytest.raises(RuntimeError):
        fix_file(src, out)
    assert not out.exists() and not default_rejects_path(out).exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_dry_run_writes_nothing_and_previews(tmp_path):
    out = tmp_path / "x.jsonl"
    report = fix_file(DATA / "support_messy.jsonl", out, dry_run=True, preview=5)
    assert not out.exists() and len(report.preview) == 5 and report.rejected_preview
    assert report.balanced


@pytest.mark.parametrize("name", ["gbk.jsonl", "utf16.jsonl", "mixed_encoding.jsonl"])
def test_encodings_need_yes_to_transcode(tmp_path, name):
    out = tmp_path / "out.jsonl"
    without = fix_file(FIXTURES / name, out)
    assert without.balanced and without.pending["encoding"] >= 1 and without.rows_rejected >= 1
    with_yes = fix_file(FIXTURES / name, out, yes=True, force=True)
    assert with_yes.balanced and with_yes.rows_out == 3 and with_yes.rows_rejected == 0
    rows = read_jsonl(out)
    assert rows[0]["instruction"] == "如何重置密码？"
    assert lint_file(out).errors == 0


def test_arrays_streams_and_aliases_become_jsonl(tmp_path):
    out = tmp_path / "arr.jsonl"
    r = fix_file(FIXTURES / "broken_array.json", out)
    assert r.balanced and (r.rows_out, r.rows_rejected) == (3, 1)  # the NaN output cannot train
    assert lint_file(out).errors == 0 and lint_file(out).layout == "jsonl"
    stream = fix_file(FIXTURES / "pretty_stream.json", tmp_path / "s.jsonl")
    assert stream.rows_out == 2
    qa = fix_file(DATA / "qa_pairs.json", tmp_path / "qa.jsonl")
    assert list(read_jsonl(tmp_path / "qa.jsonl")[0]) == ["question", "answer"]  # renaming needs --yes
    assert qa.rows_out == 10
    fix_file(DATA / "qa_pairs.json", tmp_path / "qa2.jsonl", yes=True)
    assert list(read_jsonl(tmp_path / "qa2.jsonl")[0]) == ["instruction", "input", "output"]
    sg = fix_file(DATA / "sharegpt_chats.json", tmp_path / "sg.jsonl")
    assert sg.rows_out == 3 and lint_file(tmp_path / "sg.jsonl").format == "sharegpt"


def test_uniform_keys_and_extra_columns_kept(tmp_path):
    src = tmp_path / "a.jsonl"
    src.write_text('{"instruction": "q1", "input": "", "output": "answer one here", "id": 7}\n'
                   '{"instruction": "q2", "output": "answer two here"}\n')
    out = tmp_path / "o.jsonl"
    fix_file(src, out)
    rows = read_jsonl(out)
    assert [list(r) for r in rows] == [["instruction", "input", "output", "id"]] * 2
    assert rows[0]["id"] == 7 and rows[1]["id"] is None


def test_fix_is_idempotent(tmp_path):
    first, second = tmp_path / "1.jsonl", tmp_path / "2.jsonl"
    fix_file(DATA / "support_messy.jsonl", first, yes=True)
    r = fix_file(first, second, yes=True)
    assert r.rows_rejected == 0 and first.read_bytes() == second.read_bytes()


def test_unicode_line_separators_inside_strings_are_not_line_ends(tmp_path):
    """Found by the fuzz test: U+0085 (NEL) in an answer made the reader take the file for
    pretty-printed objects, so the fixed file linted with an error."""
    from core.data.fix import fix_file
    from core.data.lint import lint_file

    src = tmp_path / "in.jsonl"
    src.write_bytes('[{"instruction": "q", "input": "", "output": ",\u00850 \u2028 x"}]'.encode())
    out = tmp_path / "out.jsonl"
    fix_file(src, out)
    again = lint_file(out)
    assert again.errors == 0 and again.rows == 1, [f.message for f in again.findings]


def test_without_yes_the_summary_lists_every_fix_it_did_not_apply(tmp_path):
    """Issue 21 #13: the no-`--yes` summary named only the fixes that sent rows to the rejects file; the
    rows it wrote without a fix `--yes` makes (personal data, mojibake, an empty output, renamed keys)
    went unmentioned. Now every fix `--yes` applies and this run did not is in the report."""
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in [
        {"instruction": "Where is my parcel?", "input": "", "output": "It left the warehouse today."},
        {"instruction": "Which café?", "input": "", "output": "The cafÃ© on Main Street, open daily."},
        {"instruction": "Call me back", "input": "", "output": "We will call 13812345678 this afternoon.",
         "note": "from ops@example.com"},
        {"instruction": "Is there a store?", "input": "", "output": ""},
    ]), encoding="utf-8")
    for src in (DATA / "support_messy.jsonl", DATA / "qa_pairs.json", FIXTURES / "gbk.jsonl", mixed):
        without = fix_file(src, tmp_path / "a.jsonl", force=True)
        with_yes = fix_file(src, tmp_path / "b.jsonl", yes=True, force=True)
        only_with_yes = set(with_yes.changes) - set(without.changes)
        if "empty output" in with_yes.reasons:
            only_with_yes.add("empty-output")
        assert only_with_yes and only_with_yes <= set(without.not_applied()), (src.name, only_with_yes,
                                                                              without.not_applied())
        text = "\n".join(without.lines())
        doc = without.to_json()
        assert doc["not_applied"] == without.not_applied()  # text and JSON render the one report
        for rule, n in without.not_applied().items():
            assert n["rejected"] + n["kept"] > 0
            assert f"{rule} (" in text, (rule, text)
    without = fix_file(mixed, tmp_path / "a.jsonl", force=True)
    assert without.not_applied() == {"empty-output": {"rejected": 0, "kept": 1}, "mojibake": {"rejected": 0, "kept": 1},
                                     "pii": {"rejected": 0, "kept": 1}}
    assert without.rows_out == 4 and not without.pending  # nothing rejected: the rows are kept as they are


def test_exact_duplicates_are_dropped_only_with_yes_and_only_when_their_content_matches(tmp_path):
    """Lint's duplicate pairs (xxhash fingerprints of the prompt and the output) are dropped with --yes once
    the fixed rows' content is compared: rows with tools are whole-row duplicates, so a row whose other
    columns differ is kept."""
    tools = json.dumps([{"name": "lookup", "parameters": {}}])
    turns = [{"from": "human", "value": "Where is my order?"}, {"from": "gpt", "value": "On its way to you."}]
    rows = [{"conversations": turns, "tools": tools, "id": 1}, {"conversations": turns, "tools": tools, "id": 1},
            {"conversations": turns, "tools": tools, "id": 2}]
    src = tmp_path / "tools.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [(f.line, f.fix) for f in lint_file(src).findings if f.rule == "duplicate"] == [(2, "confirm"), (3, "confirm")]
    kept = fix_file(src, tmp_path / "kept.jsonl")
    assert (kept.rows_out, kept.rows_rejected, kept.kept_unfixed["duplicate"]) == (3, 0, 1)
    dropped = fix_file(src, tmp_path / "dropped.jsonl", yes=True)
    assert (dropped.rows_out, dropped.rows_rejected) == (2, 1)
    assert [r["id"] for r in read_jsonl(tmp_path / "dropped.jsonl")] == [1, 2]
    assert read_jsonl(default_rejects_path(tmp_path / "dropped.jsonl"))[0]["line"] == 2


def test_fix_output_does_not_depend_on_the_hash_seed(tmp_path):
    import os
    import subprocess
    import sys

    outs = []
    for seed in ("1", "2"):
        out = tmp_path / f"clean{seed}.jsonl"
        code = "import sys; from core.data.fix import fix_file; fix_file(sys.argv[1], sys.argv[2], yes=True)"
        subprocess.run([sys.executable, "-c", code, str(DATA / "support_messy.jsonl"), str(out)],
                       check=True, cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": seed})
        outs.append((out.read_bytes(), default_rejects_path(out).read_bytes()))
    assert outs[0] == outs[1]
