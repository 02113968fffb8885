"""The lint's scan finds exactly what a plain reference lint finds.

- msgspec's typed rows checked column by column, the lines it rejects on the exact path, --jobs chunks:
  on random files mixing ordinary rows with every kind of trouble, `lint_file` reports what
  `reference_lint` (below: one line at a time, orjson and the per-row checks, duplicates by value)
  reports, finding for finding, and the same stats; the general loop (a UTF-16 copy) agrees too;
- the block content hints are a superset of the rows where the exact per-row checks find personal data,
  zero-width characters or mojibake;
- the duplicate finder agrees with a plain dict reference; the block reader cuts lines like split();
  the bulk finding builder and the early-exit repetition check agree with the plain versions.
"""

import json
import random
from types import SimpleNamespace

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import core.data.jsonl_scan as jsonl_scan
from core.data import content, content_hints
from core.data.duplicates import Fingerprints, find_duplicates
from core.data.findings import NONE, Finding, finding, findings_for_pairs, sort_findings
from core.data.json_repair import diagnose
from core.data.lint import LintOptions, _expected_keys, _file_findings, lint_file, sample_rows
from core.data.reader import ReadNotes, probe_file
from core.data.scan import key_count
from core.data.row_rules import check_row
from core.data.schema import UNKNOWN, Schema, detect_schema
from core.data.stats import StatsAccumulator, build_stats, cjk_chars, estimate_tokens

PIECES = ["13812345678", "+44 20 7946 0958", "555.123.4567", "(555) 123-4567", "555-123-4567",
          "li.lei@example.com", "a@b", "110101199003074518", "44030120080101123X", "2024-03-12", "12345",
          "\u200b", "\u200c", "\u2060", "\ufeff", "\ufffd", "锟斤拷", "Ã©", "â€œ", "Â¡", "错误", "生日",
          "中文", "，", "。", " ", "  ", "\t", "\n", "\u3000", "\xa0", "ok", "refund", "-", ".", "+", "@", ":", '"',
          "\\", "谢谢" * 45, "ab" * 50, "x", "x" * 3000]
TEXT = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)), max_size=8).map("".join)
SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@st.composite
def rows_file(draw) -> bytes:
    pool: list[dict] = []
    lines = []
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(["row"] * 8 + ["dup", "conflict", "broken", "blank", "extra", "number", "null",
                                                   "missing", "empty", "dupkey", "order", "comma", "two", "list"]))
        row = {"instruction": draw(TEXT), "input": draw(TEXT), "output": draw(TEXT)}
        if kind == "dup" and pool:
            row = dict(draw(st.sampled_from(pool)))
        elif kind == "conflict" and pool:
            row = {**draw(st.sampled_from(pool)), "output": draw(TEXT)}
        elif kind == "order":
            row = {"output": row["output"], "instruction": row["instruction"], "input": row["input"]}
        elif kind == "missing":
            del row[draw(st.sampled_from(sorted(row)))]
        elif kind == "empty":
            row["output"] = draw(st.sampled_from(["", "   "]))
        pool.append(row)
        style = draw(st.sampled_from(["orjson", "json", "ascii"]))
        text = (orjson.dumps(row).decode() if style == "orjson"
                else json.dumps(row, ensure_ascii=style == "ascii"))
        if kind == "broken":
            text = text[: draw(st.integers(0, max(0, len(text) - 1)))]
        elif kind == "blank":
            text = draw(st.sampled_from(["", " "]))
        elif kind == "extra":
            text = text[:-1] + ', "history": []}'
        elif kind in ("number", "null"):
            text = json.dumps({**row, draw(st.sampled_from(sorted(row))): 42 if kind == "number" else None})
        elif kind == "dupkey":
            text = text[:-1] + ', "output": "again and again"}'
        elif kind == "comma":
            text = text[:-1] + ",}"
        elif kind == "two":
            text = text + orjson.dumps(draw(st.sampled_from(pool))).decode()
        elif kind == "list":
            text = json.dumps([row])
        lines.append(text)
    sep = draw(st.sampled_from(["\n", "\r\n"]))
    body = (sep.join(lines) + (sep if draw(st.booleans()) else "")).encode("utf-8", "surrogatepass")
    return (b"\xef\xbb\xbf" if draw(st.integers(0, 5)) == 0 else b"") + body


# ------------------------------------------------------------------ the reference lint

DUPLICATE = "L{line}: duplicate of L{other}; fix keeps the first (with --yes)"
CONFLICT = "L{line}: same prompt as L{other} with a different output; keep the right one by hand"
TOO_LONG = ("L{line}: ~{tokens} tokens > cutoff_len {cutoff}; will be truncated (raise cutoff_len or shorten the "
            "row)")


def reference_lint(path, cutoff: int = 2048):
    """An alpaca JSON Lines file one line at a time: orjson (or the diagnosis of a broken line), the
    per-row checks, every content check on every row, duplicates by value. Rows that are objects of
    exactly the three fields as strings get the token estimate from their byte length, as the lint's
    per-block numbers do; the others count their non-ASCII characters."""
    probe = probe_file(path)
    sample = sample_rows(probe)
    schema = detect_schema(v for _r, v in sample)
    schema = Schema() if schema.kind == UNKNOWN else schema
    expected, overhead = _expected_keys(sample, schema)
    plain_keys = (schema.prompt, schema.query, schema.response)
    escaped = any(b"\\u" in rec.raw for rec, _v in sample)
    out, stats, notes = [], StatsAccumulator(fields=schema.fields), ReadNotes()
    first_pair, first_prompt, keys_first, dups, conflicts = {}, {}, {}, [], []
    rows = good = offset = 0
    data = path.read_bytes()
    notes.bom = data.startswith(b"\xef\xbb\xbf")
    lines = data[3 if notes.bom else 0:].split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    else:
        notes.final_newline = False
    for n, raw in enumerate(lines, 1):
        at, offset = offset + (3 if n == 1 and notes.bom else 0), offset + len(raw) + 1
        line = raw[:-1] if raw.endswith(b"\r") else raw
        if line is not raw:
            notes.crlf_lines += 1
            notes.first_crlf_line = notes.first_crlf_line or n
        if not line.strip():
            notes.blank(n)
            continue
        try:
            values = [orjson.loads(line)]
            rows += 1
            if key_count(values[0]) != line.count(b'":'):
                out += [f for f in diagnose(line, n).findings if f.rule == "duplicate-key"]
        except orjson.JSONDecodeError:
            d = diagnose(line, n)
            out += d.findings
            values, raw = d.values, None
            rows += len(d.values) + (1 if d.fix == NONE or d.reason else 0)
        for value in values:
            view = check_row(value, n, schema, out)
            if view is None:
                continue
            good += 1
            if schema.prompt in value and schema.response in value:
                for k in value:
                    keys_first.setdefault(k, (n, at)) if k not in expected else None
            if not view.output.strip():
                out.append(finding("empty-output", n, "L{line}: empty output (trains on an empty target); fix "
                                   "drops the row (with --yes)".format(line=n)))
            content.check_texts(view.texts, view.output, n, out, pii=True)
            chars = sum(view.lengths)
            plain = (raw is not None and len(value) == 3 and all(type(value.get(k)) is str for k in plain_keys)
                     and len(expected) == 3 and set(expected) == set(plain_keys))
            if plain and not escaped:
                cjk = max(0, (len(raw) - overhead - chars) >> 1)
                tokens = ((chars - cjk + 3) >> 2) + cjk + 8
            else:
                cjk = sum(cjk_chars(t) for _f, t in view.texts)
                tokens = estimate_tokens(chars, cjk)
            if tokens > cutoff:
                out.append(finding("too-long", n, TOO_LONG.format(line=n, tokens=tokens, cutoff=cutoff)))
            stats.add_row(view.lengths, cjk, tokens)
            if (view.prompt, view.output) in first_pair:
                dups.append(n)
                out.append(finding("duplicate", n, DUPLICATE.format(line=n, other=first_pair[view.prompt, view.output])))
                continue
            first_pair[view.prompt, view.output] = n
            ref = first_prompt.setdefault(view.prompt, (n, view.output))
            if ref[1] != view.output:
                conflicts.append(n)
                out.append(finding("conflict", n, CONFLICT.format(line=n, other=ref[0])))
    notes.lines = notes.last_line = len(lines)
    out += _file_findings(probe, notes, SimpleNamespace(keys_first=keys_first), schema)
    sort_findings(out)
    return out, rows, good, build_stats(stats, rows=good, cutoff_len=cutoff, token_source="estimate",
                                        duplicates=len(dups), conflicts=len(conflicts), near_duplicates=None)


def _key(findings):
    return [(f.rule, f.line, f.severity, f.fix, f.column, f.message) for f in findings]


@SETTINGS
@given(body=rows_file(), block=st.sampled_from([64, 300, 4096, 1 << 20]), jobs=st.sampled_from([1, 1, 3]))
def test_lint_finds_what_the_reference_lint_finds(tmp_path_factory, monkeypatch, body, block, jobs):
    d = tmp_path_factory.mktemp("scan")
    src = d / "t.jsonl"
    src.write_bytes(body)
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return  # a lone surrogate written raw: not a UTF-8 file (test_dataset_lint covers those)
    import core.data.parallel_scan as parallel_scan

    with monkeypatch.context() as m:
        m.setattr(jsonl_scan, "BLOCK", block)
        m.setattr(parallel_scan, "MIN_PART_BYTES", 16)  # --jobs 3 on a small file: several chunks
        m.setattr(parallel_scan, "MIN_CHUNK_BYTES", 200)
        got = lint_file(src, LintOptions(jobs=jobs, start_method="fork"))
    if got.layout != "jsonl" or not got.format.startswith("alpaca"):
        return
    want, rows, good, stats = reference_lint(src)
    assert _key(got.findings) == _key(want)
    assert (got.rows, got.trainable_rows) == (rows, good)
    assert got.stats.to_json() == stats.to_json()
    u16 = d / "t16.jsonl"
    u16.write_bytes(body.decode("utf-8").encode("utf-16"))
    general = lint_file(u16)
    skip = {"encoding", "too-long", "bom"}
    assert [(f.rule, f.line, f.message) for f in general.findings if f.rule not in skip] == [
        (f.rule, f.line, f.message) for f in got.findings if f.rule not in skip]
    assert (general.stats.duplicates, general.stats.conflicts) == (got.stats.duplicates, got.stats.conflicts)


@st.composite
def conversations_file(draw) -> bytes:
    """sharegpt or messages rows: in order, or with a turn missing, a role out of order, a non-string
    text, an extra key, a system turn, a repeated key, a broken line."""
    messages = draw(st.sampled_from(["sharegpt", "messages"]))
    key, role, text, user, bot = (("conversations", "from", "value", "human", "gpt") if messages == "sharegpt"
                                  else ("messages", "role", "content", "user", "assistant"))
    lines = []
    for _ in range(draw(st.integers(1, 25))):
        turns = [{role: user if k % 2 == 0 else bot, text: draw(TEXT)} for k in range(2 * draw(st.integers(1, 2)))]
        kind = draw(st.sampled_from(["ok"] * 6 + ["odd", "role", "number", "extra", "system", "dupkey", "broken",
                                                  "empty", "id"]))
        if kind == "odd":
            turns.pop()
        elif kind == "role":
            turns[0][role] = bot
        elif kind == "number":
            turns[-1][text] = 7
        elif kind == "extra":
            turns[0]["name"] = "x"
        elif kind == "system":
            turns.insert(0, {role: "system", text: draw(TEXT)})
        elif kind == "empty":
            turns = []
        row = {key: turns, **({"id": 3} if kind == "id" else {})}
        raw = json.dumps(row, ensure_ascii=draw(st.booleans()))
        if kind == "dupkey":
            raw = raw[:-1] + f', "{key}": []}}'
        elif kind == "broken":
            raw = raw[: draw(st.integers(0, len(raw) - 1))]
        lines.append(raw)
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")


@SETTINGS
@given(body=conversations_file())
def test_typed_conversations_find_what_the_exact_path_finds(tmp_path_factory, body):
    """sharegpt / messages rows msgspec decodes are judged as the exact path (the general loop over a
    UTF-16 copy, which decodes every row with orjson) judges them."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return
    d = tmp_path_factory.mktemp("chats")
    src, u16 = d / "c.jsonl", d / "c16.jsonl"
    src.write_bytes(body)
    u16.write_bytes(text.encode("utf-16"))
    got, want = lint_file(src), lint_file(u16)
    skip = {"encoding", "bom"}
    assert got.format == want.format
    assert [(f.rule, f.line, f.message) for f in got.findings if f.rule not in skip] == [
        (f.rule, f.line, f.message) for f in want.findings if f.rule not in skip]
    assert (got.rows, got.trainable_rows) == (want.rows, want.trainable_rows)
    assert got.stats.to_json() == want.stats.to_json()


def test_a_large_clean_file_takes_the_typed_path(tmp_path, monkeypatch):
    calls = {"columns": 0, "exact": 0}
    columns, exact = jsonl_scan.JsonlScan._alpaca_rows, jsonl_scan.JsonlScan._exact_line

    def count_columns(self, *a):
        calls["columns"] += 1
        return columns(self, *a)

    def count_exact(self, *a):
        calls["exact"] += 1
        return exact(self, *a)

    monkeypatch.setattr(jsonl_scan.JsonlScan, "_alpaca_rows", count_columns)
    monkeypatch.setattr(jsonl_scan.JsonlScan, "_exact_line", count_exact)
    monkeypatch.setattr(jsonl_scan, "BLOCK", 4096)
    rng = random.Random(3)
    rows = [{"instruction": f"question {i} 请问", "input": "", "output": " ".join(rng.choices(PIECES[20:40], k=9))}
            for i in range(400)]
    src = tmp_path / "c.jsonl"
    src.write_bytes(b"\n".join(orjson.dumps(r) for r in rows) + b"\n")
    report = lint_file(src)
    assert report.rows == 400 and calls["columns"] >= 5 and calls["exact"] == 0


# ------------------------------------------------------------------ the content hints are a superset

CONTENT_RULES = {"pii", "mojibake", "whitespace"}


@SETTINGS
@given(texts=st.lists(st.tuples(TEXT, TEXT, TEXT), min_size=1, max_size=12), ascii_=st.booleans())
def test_hints_cover_every_row_with_content_findings(texts, ascii_):
    raws = [json.dumps({"instruction": a, "input": b, "output": c}, ensure_ascii=ascii_).encode()
            for a, b, c in texts]
    body = b"\n".join(raws)
    hinted = set(content_hints.hit_lines(body))
    for i, (x, y, z) in enumerate(texts):
        out: list = []
        content.check_texts((("instruction", x), ("input", y), ("output", z)), z, i + 1, out, pii=True)
        needed = {f.rule for f in out} & CONTENT_RULES
        if "whitespace" in needed and not any(content._ZW_RE.search(t) for t in (x, y, z)):
            needed.discard("whitespace")  # edge whitespace is checked on every row, not hinted
        if needed:
            assert i in hinted, (i, needed, texts[i])
        assert content_hints.row_may_hit(raws[i]) or not needed


@pytest.mark.parametrize("text", ["call 13812345678 now", "mail li.lei@example.com", "+44 20 7946 0958",
                                  "555.123.4567", "(555) 123-4567", "ID 110101199003074518", "a\u200bb",
                                  "bad \ufffd", "锟斤拷", "cafÃ© ok", "â€œquotedâ€", "Â¡hola"])
@pytest.mark.parametrize("ascii_", [False, True])
def test_each_marker_is_hinted(text, ascii_):
    raw = json.dumps({"instruction": "q", "input": "", "output": text}, ensure_ascii=ascii_).encode()
    body = b"\n".join([b'{"instruction":"x","input":"","output":"plain text here"}'] * 300 + [raw])
    assert content_hints.hit_lines(body) == [300]


# ------------------------------------------------------------------ duplicates, reader, builders

# prompt hashes in one bucket and in others, the extremes of uint64
_PROMPTS = [7919, 3, 5 << 40, (5 << 40) + 1, (5 << 58) + 1, (1 << 64) - 1, (1 << 63), 0]


@settings(max_examples=120, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(_PROMPTS), st.integers(0, 3)), max_size=80),
       shuffle=st.booleans(), cuts=st.lists(st.integers(0, 80), max_size=3), spill=st.booleans())
def test_duplicate_finder_agrees_with_the_dict_reference(rows, shuffle, cuts, spill):
    """In memory or from disk buckets, in parts shifted by their line offset, lines in any order (the
    exact path's rows interleave): what a plain dict over the rows in line order finds."""
    lines = list(range(1, len(rows) + 1))
    if shuffle:
        random.Random(len(rows)).shuffle(lines)
    first_pair, first_prompt, want_d, want_c = {}, {}, [], []
    for line, (p, o) in sorted(zip(lines, rows)):
        if (p, o) in first_pair:
            want_d.append((line, first_pair[p, o]))
            continue
        first_pair[p, o] = line
        ref = first_prompt.setdefault(p, (line, o))
        if ref[1] != o:
            want_c.append((line, ref[0]))
    bounds = sorted({0, len(rows), *(min(c, len(rows)) for c in cuts)})
    parts = []
    for a, b in zip(bounds, bounds[1:]):
        fp = Fingerprints()
        for line, (p, o) in zip(lines[a:b], rows[a:b]):
            fp.add(line - 100, p, o)
        if spill:
            fp.spill()
        parts.append(fp.shifted(100))
    got = find_duplicates(parts)
    assert got.duplicates == want_d and got.conflicts == want_c
    for fp in parts:
        fp.discard()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=30),
       final=st.booleans(), block=st.sampled_from([1, 2, 7, 64]))
def test_block_reader_cuts_lines_like_split(tmp_path_factory, monkeypatch, lines, final, block):
    data = b"\n".join(lines) + (b"\n" if final and lines else b"")
    p = tmp_path_factory.mktemp("reader") / "r.bin"
    p.write_bytes(data)
    got, offsets = [], []
    with monkeypatch.context() as m:
        m.setattr(jsonl_scan, "BLOCK", block)
        for body, offset, _final in jsonl_scan.read_blocks(str(p), 0, len(data)):
            assert data[offset:offset + len(body)] == body
            got += body.split(b"\n")
            offsets.append(offset)
    want = data.split(b"\n")
    if data.endswith(b"\n"):
        want.pop()
    assert got == (want if data else [])
    assert offsets == sorted(offsets)


def test_findings_for_pairs_follows_the_template():
    pairs = [3, 9], [1, 2]
    plain = findings_for_pairs("duplicate", "L{line}: duplicate of L{other}; 100% sure", *pairs)
    assert [f.message for f in plain] == ["L3: duplicate of L1; 100% sure", "L9: duplicate of L2; 100% sure"]
    assert [(f.rule, f.severity, f.line, f.fix, f.column, f.fixable) for f in plain] == [
        ("duplicate", "warning", 3, "confirm", None, False), ("duplicate", "warning", 9, "confirm", None, False)]
    swapped = findings_for_pairs("duplicate", "与 L{other} 重复：L{line}", *pairs)
    assert [f.message for f in swapped] == ["与 L1 重复：L3", "与 L2 重复：L9"]
    odd = findings_for_pairs("conflict", "L{line:>4}: see {other!r}", *pairs)
    assert odd[0].message == "L   3: see 1" and odd[0].severity == "warning" and odd[1].line == 9
    edges = findings_for_pairs("conflict", "{line}{other}", [0, 7, 1 << 62], [-(1 << 63), 10, 5])
    assert [f.message for f in edges] == ["0" + str(-(1 << 63)), "710", str(1 << 62) + "5"]
    assert findings_for_pairs("conflict", "{other}-{line}", [], []) == []
    assert all(type(f) is Finding for f in plain + swapped + odd + edges)
    edges[0].line += 1  # an ordinary, mutable Finding
    assert edges[0].sort_key() == (1, 0, 1, "conflict")


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet="ab谢c ", max_size=200))
def test_repetition_over_matches_the_plain_ratio(text):
    ratio = content.repetition_ratio(text)
    got = content.repetition_over(text, 0.6)
    assert got == (ratio if ratio > 0.6 else None)
