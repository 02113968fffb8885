"""Rows inside one JSON document (API responses, CMS dumps), HTML left in text, an unanswered last turn trimmed,
and no command that writes 0 rows succeeding (issue 30)."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from core.data.convert import convert_file
from core.data.fix import fix_file
from core.data.html_text import html_remnants, strip_html
from core.data.lint import lint_file
from core.data.nested_json import find_rows, flat_row, lifted
from core.data.reader import JSON_NESTED, ReadNotes, iter_records, probe_file
from core.data.schema import FEEDBACK, SUPERVISED, detect_schema

SHAPES = Path(__file__).parent.parent / "fixtures" / "data" / "api_shapes"
# (fixture, where the rows are, a key beside them that is left out)
FOUND = [
    ("strapi_v4.json", "data", "meta"),
    ("contentful_delivery.json", "items", "includes"),
    ("directus_items.json", "data", "meta"),
    ("elasticsearch_hits.json", "hits.hits", "hits.max_score"),
    ("cn_cms_code_msg_data_list.json", "data.list", "data.total"),
    ("cms_code_message_data.json", "data", "page"),
    ("zendesk_guide_articles.json", "articles", "next_page"),
    ("result_items_nested.json", "result.items", "result.cursor"),
]
HELD_APART = ["held_notion_database_query.json", "held_algolia_search.json", "held_jsonapi_drupal.json",
              "held_cn_result_records.json"]


@pytest.mark.parametrize("name,where,beside", FOUND)
def test_rows_are_found_under_their_key_path_and_the_rest_is_named(name, where, beside):
    probe = probe_file(SHAPES / name)
    assert probe.layout == JSON_NESTED
    assert probe.nested.where == where
    assert beside in probe.nested.ignored
    rows = [orjson.loads(r.raw) for r in iter_records(probe, ReadNotes())]
    assert len(rows) == probe.nested.rows == 3
    lint = lint_file(SHAPES / name)
    said = [f.message for f in lint.findings if f.rule == "json-array"]
    assert said and f"under {where}" in said[0] and beside in said[0]


@pytest.mark.parametrize("name", [n for n, _w, _b in FOUND if n != "zendesk_guide_articles.json"] + HELD_APART)
def test_fix_yes_writes_every_question_and_answer_as_plain_text(tmp_path, name):
    out = tmp_path / "out.jsonl"
    report = fix_file(SHAPES / name, out, yes=True)
    assert (report.rows_in, report.rows_out, report.rows_rejected) == (3, 3, 0)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert all(r["instruction"] and r["output"] for r in rows)
    assert not any(html_remnants(r["output"]) for r in rows)  # the HTML in the answers was confirmed away
    assert convert_file(SHAPES / name, tmp_path / "conv.jsonl").rows_out == 3


# help-center and CMS articles: the title asks, the HTML body answers. The first two were there when the rule
# was written; the held_ ones were collected afterwards from the APIs' public docs (SOURCES.md)
ARTICLES = ["wordpress_rest_posts.json", "zendesk_guide_articles.json", "held_wordpress_posts_embed.json",
            "held_zendesk_articles_cursor.json", "held_intercom_articles.json"]


@pytest.mark.parametrize("name", ARTICLES)
def test_articles_become_title_to_body_rows_with_the_html_cleaned(tmp_path, name):
    titles = [r["title"] for r in (flat_row(v, "") for v in _elements(SHAPES / name))]
    lint = lint_file(SHAPES / name)
    assert lint.schema.task == SUPERVISED and lint.schema.prompt == "title"  # no boolean made it KTO feedback
    out = tmp_path / "out.jsonl"
    report = fix_file(SHAPES / name, out, yes=True)
    assert (report.rows_in, report.rows_out, report.rows_rejected) == (3, 3, 0)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["instruction"] for r in rows] == titles
    assert all(r["output"].strip() and not html_remnants(r["output"]) for r in rows)
    converted = convert_file(SHAPES / name, tmp_path / "conv.jsonl")  # renamed; the HTML stays a fix to confirm
    assert (converted.rows_out, converted.rows_rejected) == (3, 0)
    assert [json.loads(x)["instruction"] for x in (tmp_path / "conv.jsonl").read_text(encoding="utf-8").splitlines()
            ] == titles


def _elements(path: Path) -> list:
    doc = json.loads(path.read_text(encoding="utf-8"))
    return doc if isinstance(doc, list) else find_rows(doc) and _at(doc, find_rows(doc).at)


def _at(doc, at):
    for key in at:
        doc = doc[key]
    return doc


def test_a_boolean_beside_the_text_is_metadata_and_a_feedback_tag_is_kto():
    rows = [{"question": f"q{i}", "answer": f"a{i}", "status": True, "draft": False, "sticky": i % 2 == 0}
            for i in range(4)]
    assert detect_schema(rows).task == SUPERVISED
    for tag in ("kto_tag", "label", "is_helpful", "thumbs_up"):
        tagged = detect_schema([{**r, tag: i % 2 == 0} for i, r in enumerate(rows)])
        assert (tagged.task, tagged.kto_tag) == (FEEDBACK, tag)


def test_a_plain_json_array_is_read_as_it_is():
    rows = [{"instruction": "q", "output": "a", "meta": {"type": "faq", "faq": 1}}]
    assert not lifted(rows[0]) and find_rows(rows) is None
    assert lifted({"title": {"rendered": "T"}, "content": {"rendered": "<p>x</p>", "protected": False}})


def test_the_rows_of_one_document_are_numbered_and_named_by_their_path():
    probe = probe_file(SHAPES / "strapi_v4.json")  # pretty, but a minified document is one line: no line per row
    numbers = [r.line for r in iter_records(probe, ReadNotes())]
    assert numbers == list(range(1, probe.nested.rows + 1))
    assert [probe.nested.element(n) for n in numbers[:2]] == [f"{probe.nested.where}[0]", f"{probe.nested.where}[1]"]


def test_a_single_row_or_a_conversation_is_no_wrapper(tmp_path):
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps({"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]})
                   + "\n", encoding="utf-8")
    assert probe_file(one).layout != JSON_NESTED
    assert find_rows({"data": [{"turns": [{"a": 1}, {"a": 2}, {"a": 3}]}]}).where == "data"  # not inside rows


def test_the_largest_consistent_array_wins_and_wrappers_are_lifted():
    doc = {"included": [{"x": 1}], "data": [{"id": 1, "attributes": {"q": "a"}}, {"id": 2, "attributes": {"q": "b"}}],
           "mixed": [{"a": 1}, {"b": 2}, {"c": 3}]}
    found = find_rows(doc)
    assert found.where == "data" and found.unwrap == "attributes" and set(found.ignored) == {"included", "mixed"}
    assert flat_row(doc["data"][0], found.unwrap) == {"id": 1, "q": "a"}
    assert flat_row({"title": {"rendered": "T"}}, "") == {"title": "T"}


def test_html_becomes_plain_text_and_plain_text_is_left_alone():
    assert strip_html("Click <b>Save</b>.<br>Then&nbsp;wait &amp; see.") == "Click Save.\nThen wait & see."
    assert strip_html("<ul><li>one</li><li>two</li></ul>") == "- one\n- two"
    assert strip_html("<p>a</p><script>x()</script><p>b</p>") == "a\n\nb"
    for plain in ("if a < b and c > d", "List<String> x", "R&D costs", "Tom & Jerry"):
        assert html_remnants(plain) == [] and strip_html(plain) == plain


def test_html_is_a_confirmed_fix(tmp_path):
    src = tmp_path / "a.jsonl"
    src.write_text(json.dumps({"instruction": "q", "input": "", "output": "<p>Yes&nbsp;we do.</p>"}) + "\n",
                   encoding="utf-8")
    assert [f.rule for f in lint_file(src).findings if f.rule == "html"] == ["html"]
    kept = fix_file(src, tmp_path / "kept.jsonl")
    assert kept.kept_unfixed["html"] == 1 and "<p>" in (tmp_path / "kept.jsonl").read_text(encoding="utf-8")
    fixed = fix_file(src, tmp_path / "fixed.jsonl", yes=True)
    assert fixed.changes["html"] == 1
    assert json.loads((tmp_path / "fixed.jsonl").read_text(encoding="utf-8"))["output"] == "Yes we do."


def _turns(*texts: str) -> dict:
    return {"conversations": [{"from": "human" if k % 2 == 0 else "gpt", "value": t} for k, t in enumerate(texts)]}


def test_an_unanswered_last_turn_is_trimmed_and_the_answered_exchanges_kept(tmp_path):
    src = tmp_path / "sg.jsonl"
    rows = [_turns("where is my order?", "it ships tomorrow", "and the invoice?"), _turns("hello?")]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    report = fix_file(src, tmp_path / "out.jsonl", yes=True)
    assert (report.rows_in, report.rows_out, report.rows_rejected, report.trimmed) == (2, 1, 1, 1)
    written = json.loads((tmp_path / "out.jsonl").read_text(encoding="utf-8"))
    assert written == _turns("where is my order?", "it ships tomorrow")
    rejects = [json.loads(x) for x in (tmp_path / "out.rejects.jsonl").read_text(encoding="utf-8").splitlines()]
    trimmed = [r for r in rejects if r.get("trimmed")]
    assert trimmed[0]["line"] == 1 and trimmed[0]["raw"]["value"] == "and the invoice?"
    assert [r["line"] for r in rejects if not r.get("trimmed")] == [2]


@pytest.mark.parametrize("command", ["fix", "convert"])
def test_a_command_that_writes_no_row_exits_1_with_the_reason(devtune_cli, tmp_path, command):
    src = tmp_path / "none.jsonl"
    src.write_text('{"question": "q?", "answer": ""}\n', encoding="utf-8") if command == "convert" else \
        src.write_text('{"a": 1}\n', encoding="utf-8")
    args = ["data", command, str(src), "-o", str(tmp_path / "out.jsonl")] + (["--yes"] if command == "fix" else [])
    done = devtune_cli(*args)
    assert done.returncode == 1
    assert "no rows were written" in done.stderr


def test_the_cms_dump_of_the_issue_converts_with_fix_yes(devtune_cli, tmp_path):
    done = devtune_cli("data", "fix", str(SHAPES / "cms_code_message_data.json"), "-o", str(tmp_path / "o.jsonl"),
                       "--yes", "--json")
    assert done.returncode == 0
    assert json.loads(done.stdout)["rows_out"] == 3
