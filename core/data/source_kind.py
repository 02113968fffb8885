"""What a file to convert holds, decided once for `convert` (its `--from auto`) and `fix` (which refuses a chat
export: its rows are messages, not examples): a chat log or Q&A text with speaker tags, a CSV table, sharegpt,
OpenAI messages, alpaca-like JSON, or a chat transcript (`core.data.transcripts`). `unit_to_row` turns a source
unit (`core.data.sources`) into an alpaca row or the reason it cannot be one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.data.reader import CSV, EMPTY, JSON_LAYOUTS, TEXT, probe_file
from core.data.schema import ALPACA, MESSAGES, SHAREGPT, detect_schema
from core.data.sources import ConvertError, Unit, json_units
from core.data.speaker_tags import tag_counts
from core.data.spreadsheet import SPREADSHEET_SUFFIXES
from core.i18n import _

TRANSCRIPT = "transcript"


def detect_source(path: Path) -> str:
    if Path(path).suffix.lower() in SPREADSHEET_SUFFIXES:  # a workbook's sheets are tables (core.data.spreadsheet)
        return "csv"
    from core.data.transcripts.detect import read_transcript
    from core.data.transcripts.text_shape import text_transcript_lines

    probe = probe_file(path)
    if probe.layout == CSV:
        return TRANSCRIPT if not _qa_columns(path) and read_transcript(path) else "csv"
    if probe.layout == EMPTY:
        raise ConvertError(_("{file} is empty", file=path))
    if probe.layout == TEXT:
        chat, qa = tag_counts(path, probe.encoding)
        if text_transcript_lines(path, probe.encoding) > chat + qa:
            return TRANSCRIPT
        if not chat and not qa:
            raise ConvertError(_("{file}: no speaker tags (用户：/客服：, Q:/A:, 问：/答：) and no chat-export header "
                                 "lines (time and speaker); nothing to convert", file=path))
        return "qa" if qa > chat else "chatlog"
    from core.data.lint import sample_rows

    from core.data.transcripts.record_shape import find_messages

    rows = sample_rows(probe)
    schema = detect_schema(v for _r, v in rows)
    kind = {SHAREGPT: "sharegpt", MESSAGES: "messages", ALPACA: "qa"}.get(schema.kind)
    if kind and (_some_row(path, kind) or _trains_as_is(rows, schema)):
        return kind  # a dataset (sharegpt with tool turns, preference pairs...), whatever alpaca makes of it
    # the first rows decide whether the whole file is read as a transcript (a large corpus is not read twice);
    # with no JSON row at all, its text lines may be one (a LINE export that opens with "[")
    if (not rows or find_messages([v for _r, v in rows]) is not None) and read_transcript(path) is not None:
        return TRANSCRIPT
    if kind:
        return kind
    raise ConvertError(_("{file}: rows have no recognised keys (instruction/output, question/answer, conversations, "
                         "messages); use --from, or --columns for CSV", file=path))


def _qa_columns(path: Path) -> bool:
    """Does the CSV have question and answer columns (then it is a Q&A table, not a message log)."""
    from core.data.csv_table import csv_reader
    from core.data.sources import _pick_columns

    header = [h.strip().lstrip("\ufeff") for h in next(csv_reader(path), [])]
    try:
        _pick_columns(header, None, path)
    except ConvertError:
        return False
    return True


def _some_row(path: Path, kind: str, sample: int = 20) -> bool:
    """Does any of the first units of this JSON read as `kind` make a row (else the keys only look alike:
    a Telegram export's `messages`, an Intercom list's `conversations`)."""
    for n, unit in enumerate(json_units(path, kind)):
        if isinstance(unit_to_row(unit, True, True), dict):
            return True
        if n >= sample:
            break
    return False


def _trains_as_is(rows: list, schema) -> bool:
    """Do most of the first rows read as rows of their format by lint's row rules, empty answers and all (then
    the file is a dataset, not a chat export whose keys only look alike: a WeCom archive's `text` objects)?"""
    from core.data.row_rules import check_row

    good = sum(check_row(value, rec.line, schema, []) is not None for rec, value in rows)
    return good * 2 > len(rows)


def unit_to_row(unit: Unit, with_history: bool, with_system: bool) -> dict | str:
    """An alpaca row, or the reason the unit cannot be one."""
    if unit.problem:
        return unit.problem
    turns = [(r, t.strip()) for r, t in unit.turns]
    while turns and turns[0][0] == "assistant":
        turns.pop(0)
        unit.notes.append(_("agent turn before the first question dropped"))
    while turns and turns[-1][0] == "user":
        turns.pop()
        unit.notes.append(_("question without an answer dropped"))
    if not turns:
        return _("no question with an answer")
    pairs: list[list[str]] = []
    for i in range(0, len(turns) - 1, 2):
        (r1, t1), (r2, t2) = turns[i], turns[i + 1]
        if r1 != "user" or r2 != "assistant":
            return _("turns do not alternate question/answer at turn {turn}", turn=i + 1)
        pairs.append([t1, t2])
    if len(turns) % 2:
        return _("turns do not alternate question/answer")
    instruction, output = pairs[-1]
    if not instruction or not output:
        return _("empty question or answer")
    row: dict[str, Any] = {"instruction": instruction, "input": unit.context.strip(), "output": output}
    if with_history:
        row["history"] = pairs[:-1]
    if with_system:
        row["system"] = unit.system.strip()
    return row


def is_chat_transcript(path: Path) -> bool:
    """Is this JSON or CSV file a chat export (what `detect_source` reads as a transcript)?"""
    if probe_file(path).layout not in (*JSON_LAYOUTS, CSV):
        return False
    try:
        return detect_source(path) == TRANSCRIPT
    except ConvertError:
        return False
