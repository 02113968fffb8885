"""The source units of `convert`: one Unit per session of a chat log, per Q&A pair, per CSV row, per JSON
row (alpaca with other key names, sharegpt, OpenAI messages). `convert.unit_to_row` turns a unit into an
alpaca row or a reason to reject it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from core.errors import BadInput
from core.data.csv_table import csv_reader
from core.data.reader import JSON_LAYOUTS, ReadNotes, iter_records, iter_text_lines, probe_file
from core.data.schema import ALIASES, detect_schema
from core.data.speaker_tags import CHAT as _CHAT, QA as _QA, TIME as _TIME
from core.i18n import _, _n

_HEADER = re.compile(r"^\s*(?:={2,}|-{3,}|#{1,6}\s|\*{2,}).*$|^\s*(?:会话|对话|Session|Conversation|Chat)\s*[#:：\w-]*"
                     r"\s*(?:={2,})?\s*$", re.IGNORECASE)
PROMPT_COLUMNS = ("instruction", "question", "prompt", "query", "q", "customer_question", "user", "问题", "用户问题")
RESPONSE_COLUMNS = ("output", "answer", "response", "reply", "agent_reply", "a", "completion", "答案", "回复", "回答")
INPUT_COLUMNS = ("input", "context")


class ConvertError(BadInput):
    """The source cannot be converted as asked (message says which file/column and what to do)."""


@dataclass
class Unit:
    """One source unit that becomes one row (or a reject): a session, a pair, a CSV or JSON row."""

    line: int
    turns: list[tuple[str, str]] = field(default_factory=list)  # (user|assistant, text)
    system: str = ""
    context: str = ""
    raw: str = ""
    problem: str = ""  # set when the unit cannot become a row
    notes: list[str] = field(default_factory=list)  # repaired on the way (reported, row kept)


# ------------------------------------------------------------------ text sources

def text_units(path: Path, mode: str, report) -> Iterator[Unit]:
    """`report.ignored_lines` collects the lines that are no turn."""
    probe = probe_file(path)
    pattern = _QA if mode == "qa" else _CHAT
    unit: Unit | None = None
    last_role = None

    def close() -> Iterator[Unit]:
        nonlocal unit, last_role
        if unit is not None and unit.turns:
            yield unit
        unit, last_role = None, None

    for line, text in iter_text_lines(path, probe.encoding, ReadNotes()):
        stripped = text.strip()
        if not stripped:
            if mode == "chatlog" or (unit is not None and unit.turns and unit.turns[-1][0] == "assistant"):
                yield from close()
            continue
        if _HEADER.match(stripped) and not pattern.match(_TIME.sub("", stripped, count=1)):
            yield from close()
            continue
        body = _TIME.sub("", stripped, count=1).strip()
        m = pattern.match(body) or (_CHAT.match(body) if mode == "qa" else _QA.match(body))
        if m is None:
            if unit is not None and unit.turns:  # a continuation line of the last turn
                role, prev = unit.turns[-1]
                unit.turns[-1] = (role, prev + "\n" + body)
                unit.raw += "\n" + text
            else:
                report.ignored_lines.append(line)
            continue
        role = "user" if m.group("user") else "assistant"
        said = m.group("text").strip()
        if mode == "qa" and role == "user" and unit is not None and unit.turns:
            yield from close()  # Q&A: every question starts a new pair
        if unit is None:
            unit = Unit(line)
        unit.raw += ("\n" if unit.raw else "") + text
        if role == last_role and unit.turns:
            unit.turns[-1] = (role, unit.turns[-1][1] + "\n" + said)
            unit.notes.append(_("consecutive lines of one speaker joined"))
        else:
            unit.turns.append((role, said))
        last_role = role
    yield from close()


# ------------------------------------------------------------------ CSV

def csv_units(path: Path, columns: dict[str, str] | None, report) -> Iterator[Unit]:
    """A CSV/TSV table's rows, or each sheet's of a spreadsheet (core.data.spreadsheet), as units."""
    from core.data.spreadsheet import is_spreadsheet, read_tables

    if is_spreadsheet(path):
        tables = list(read_tables(path, names_question_and_answer))
        if not tables:
            raise ConvertError(_("{file}: no sheet has a header row (two filled cells in a row)", file=path))
        for table in tables:
            yield from table_units(path, table.header, table.rows, columns, where=table.name)
        return
    reader = csv_reader(path)
    header = next(reader, None)
    if not header:
        raise ConvertError(_("{file}: no header row", file=path))
    rows = ((reader.line_num or n, row) for n, row in enumerate(reader, start=2))
    yield from table_units(path, [h.strip().lstrip("\ufeff") for h in header], rows, columns)


def table_units(path: Path, header: list[str], rows, columns: dict[str, str] | None, where: str = "") \
        -> Iterator[Unit]:
    """The rows of a table (line, cells) below its header as units: the columns named by `columns`, or guessed
    from the header; `where` (a sheet's name) starts each unit's raw text."""
    cols = _pick_columns(header, columns, path if not where else f"{path} [{where}]")
    strict = not where  # a sheet's rows end where their cells end: no cell count to hold them to
    for line, row in rows:
        if not any(c.strip() for c in row):
            continue
        get = {name: (row[i].strip() if i < len(row) else "") for name, i in cols.items()}
        unit = Unit(line, raw=(f"{where}!{line}: " if where else "") + ",".join(row))
        if strict and len(row) != len(header):
            unit.problem = _n("{n} cell, the header has {want}", "{n} cells, the header has {want}", len(row),
                              want=len(header))
        elif not get.get("instruction") or not get.get("output"):
            unit.problem = _("empty {what}", what="instruction" if not get.get("instruction") else "output")
        unit.turns = [("user", get.get("instruction", "")), ("assistant", get.get("output", ""))]
        unit.context = get.get("input", "")
        yield unit


def names_question_and_answer(header: list[str]) -> bool:
    """Whether a row of cells reads as a header naming a question and an answer column."""
    try:
        _pick_columns(header, None, Path(""))
    except ConvertError:
        return False
    return True


def _pick_columns(header: list[str], columns: dict[str, str] | None, path: Path) -> dict[str, int]:
    lower = [h.lower() for h in header]
    chosen: dict[str, int] = {}
    if columns:
        for target, name in columns.items():
            if target not in ("instruction", "input", "output"):
                raise ConvertError(_("--columns: {target} is not instruction, input or output", target=target))
            if name not in header and name.lower() not in lower:
                raise ConvertError(_("{file}: no column \"{name}\"; columns are: {columns}", file=path, name=name,
                                     columns=", ".join(header)))
            chosen[target] = header.index(name) if name in header else lower.index(name.lower())
    for target, names in (("instruction", PROMPT_COLUMNS), ("output", RESPONSE_COLUMNS), ("input", INPUT_COLUMNS)):
        if target in chosen:
            continue
        idx = next((lower.index(n.lower()) for n in names if n.lower() in lower), None)
        if idx is None and target != "input":
            key = ("question", "问") if target == "instruction" else ("answer", "reply", "response", "答", "回复")
            idx = next((i for i, h in enumerate(lower) if any(k in h for k in key)), None)
        if idx is not None:
            chosen[target] = idx
    if "instruction" not in chosen or "output" not in chosen:
        raise ConvertError(_("{file}: cannot tell which columns are the question and the answer (columns: "
                             "{columns}); pass --columns instruction=COL,output=COL", file=path,
                             columns=", ".join(header)))
    return chosen


# ------------------------------------------------------------------ JSON sources

def json_units(path: Path, kind: str) -> Iterator[Unit]:
    import orjson

    from core.data.json_repair import diagnose
    from core.data.lint import sample_rows

    probe = probe_file(path)
    if probe.layout not in JSON_LAYOUTS:
        raise ConvertError(_("{file} is not JSON; use --from chatlog, qa or csv", file=path))
    schema = detect_schema(v for _r, v in sample_rows(probe))
    for rec in iter_records(probe, ReadNotes()):
        raw = rec.raw.decode("utf-8", "replace")
        try:
            values = [orjson.loads(rec.raw)]
        except orjson.JSONDecodeError:
            d = diagnose(rec.raw, rec.line)
            values = d.values
            if not values:
                yield Unit(rec.line, raw=raw, problem=d.reason or _("invalid JSON"))
                continue
        for value in values:
            yield _conversation_unit(value, rec.line, raw, schema) if kind in ("sharegpt", "messages") else \
                _qa_unit(value, rec.line, raw)


def _qa_unit(value: Any, line: int, raw: str) -> Unit:
    unit = Unit(line, raw=raw)
    if not isinstance(value, dict):
        unit.problem = _("not a JSON object")
        return unit
    pair = next(((p, r) for p, r in ALIASES if p in value and r in value), None)
    if pair is None:
        unit.problem = _("no question/answer keys (keys: {keys})", keys=", ".join(list(value)[:6]))
        return unit
    q, a = value[pair[0]], value[pair[1]]
    if not isinstance(q, str) or not isinstance(a, str):
        unit.problem = _("question or answer is not text")
        return unit
    ctx = next((value[k] for k in ("input", "context") if k in value and k not in pair), "")
    unit.context = ctx if isinstance(ctx, str) else ""
    history = value.get("history")
    if isinstance(history, list):
        for h in history:
            if isinstance(h, list) and len(h) == 2 and all(isinstance(x, str) for x in h):
                unit.turns += [("user", h[0]), ("assistant", h[1])]
    unit.turns += [("user", q), ("assistant", a)]
    if isinstance(value.get("system"), str):
        unit.system = value["system"]
    return unit


def _conversation_unit(value: Any, line: int, raw: str, schema) -> Unit:
    unit = Unit(line, raw=raw)
    msgs = value.get(schema.messages) if isinstance(value, dict) else None
    if not isinstance(msgs, list) or not msgs:
        unit.problem = _("no \"{key}\" list of turns", key=schema.messages)
        return unit
    for k, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get(schema.content_tag), str):
            unit.problem = _("turn {turn} is not a {{role, content}} object with text", turn=k + 1)
            return unit
        role = str(m.get(schema.role_tag, "")).lower()
        text = m[schema.content_tag]
        if role in ("system",):
            if unit.turns:
                unit.problem = _("a system turn in the middle of the conversation (turn {turn})", turn=k + 1)
                return unit
            unit.system = text
        elif role in ("human", "user"):
            unit.turns.append(("user", text))
        elif role in ("gpt", "assistant", "model"):
            unit.turns.append(("assistant", text))
        else:
            unit.problem = _("turn {turn} has role \"{role}\" (tool or function calls have no alpaca form)",
                             turn=k + 1, role=role)
            return unit
    if isinstance(value.get("system"), str) and not unit.system:
        unit.system = value["system"]
    return unit
