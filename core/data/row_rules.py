"""The row-level rules of each kind of dataset (`check_row`): what LLaMA-Factory's converters need from an
alpaca, sharegpt or OpenAI `messages` row, a pre-training text, a preference pair, a KTO-tagged row, and the
tools and media a row declares. Table A4 rules 8, 9, 13, 15, 25/26 and 27-31 (core.data.findings). The format
and kind the rows are judged as come from `core.data.schema` (detected, or the file's dataset_info.json entry).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from core.data.findings import CONFIRM, NONE, SAFE, Finding, finding
from core.data.schema import ALIASES, ALPACA, FEEDBACK, MESSAGES, PREFERENCE, PRETRAIN, SHAREGPT, Schema
from core.i18n import _, _n


@dataclass(slots=True)
class RowView:
    """What the rest of lint needs from one row, whatever its format."""

    prompt: tuple  # hashable: the prompt side (instruction, input, history...)
    output: str
    lengths: tuple[int, ...]  # characters of each of Schema.fields
    texts: tuple[tuple[str, str], ...]  # (field, text) of every string to scan for content problems
    fix: str = "safe"  # strongest fix needed to keep this row: safe | confirm | none
    keys: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)
    # what else the prompt is made of: the tools and media a row declares (the same question with another tool
    # list or another image is another prompt for duplicates and conflicts)
    context: tuple = ()


def type_name(value: Any) -> str:
    """The JSON type of a value as a message fragment: null and NaN as written, the others in words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return _("boolean")
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, (int, float)):
        return _("a number")
    if isinstance(value, dict):
        return _("an object")
    if isinstance(value, list):
        return _("a list")
    return type(value).__name__


def non_string_fix(value: Any, is_output: bool) -> str:
    """null in a prompt field → "" is safe; number/boolean → text is a confirm fix; a null/NaN output,
    objects and lists cannot be fixed (the row is rejected)."""
    if value is None and not is_output:
        return SAFE
    if isinstance(value, bool) or isinstance(value, int) or (isinstance(value, float) and value == value):
        return CONFIRM
    return NONE


def check_row(value: Any, line: int, schema: Schema, out: list[Finding]) -> RowView | None:
    """Check one parsed row; append findings to `out`. None when the row cannot train (an error)."""
    if not isinstance(value, dict):
        out.append(finding("not-an-object", line, _(
            "L{line}: the row is {type}, not a JSON object; fix drops it into the rejects file",
            line=line, type=type_name(value))))
        return None
    if schema.task == PRETRAIN:
        view = _check_text(value, line, schema, out)
    elif schema.kind in (SHAREGPT, MESSAGES):
        view = _check_conversation(value, line, schema, out)
    elif schema.task == PREFERENCE:
        view = _check_alpaca_pair(value, line, schema, out)
    else:
        view = _check_alpaca(value, line, schema, out)
    if view is None or schema.plain:
        return view
    return _check_columns(value, line, schema, out, view)


def _strings(*items: Any):
    for item in items:
        if isinstance(item, str):
            yield item
        elif isinstance(item, (tuple, list)):
            yield from _strings(*item)


def _check_columns(value: dict, line: int, schema: Schema, out: list[Finding], view: RowView) -> RowView | None:
    """The KTO tag, the media and the tools of a row LLaMA-Factory reads with them."""
    if schema.task == FEEDBACK and schema.kto_tag:
        tag = value.get(schema.kto_tag)
        if not isinstance(tag, bool):
            out.append(finding("kto-tag", line, _(
                "L{line}: \"{key}\" is {type}, not true or false; LLaMA-Factory's KTO stage drops the row; fix "
                "moves it to the rejects file", line=line, key=schema.kto_tag,
                type=_("missing") if schema.kto_tag not in value else type_name(tag))))
            return None
        view.notes.append("kto:" + ("1" if tag else "0"))
    texts = [t for f, t in view.texts if f != "rejected"]
    folder = schema.media_dir
    for column, placeholder in schema.media:
        listed = value.get(column)
        paths = [] if listed in (None, "", []) else listed if isinstance(listed, list) else [listed]
        if not all(isinstance(p, (str, list)) for p in paths):
            out.append(finding("media", line, _(
                "L{line}: \"{key}\" must be a list of file paths; LLaMA-Factory cannot open {type}", line=line,
                key=column, type=type_name(paths[0]) if paths else "null")))
            return None
        for path in _strings(paths):
            if folder is not None and not path.startswith(("http://", "https://", "data:")) and not (
                    os.path.isfile(os.path.join(folder, path)) or os.path.isabs(path) and os.path.isfile(path)):
                out.append(finding("media", line, _(
                    "L{line}: {key} file \"{path}\" not found in {folder}; LLaMA-Factory fails when it opens it",
                    line=line, key=column, path=path, folder=folder)))
                return None
        used = sum(t.count(placeholder) for t in texts)
        if used != len(paths):
            from core.data.wording import counted

            out.append(finding("media", line, _n(
                "L{line}: \"{key}\" lists {files} but the text holds {n} {placeholder} placeholder; LLaMA-Factory "
                "stops with \"The number of {key} does not match\"",
                "L{line}: \"{key}\" lists {files} but the text holds {n} {placeholder} placeholders; LLaMA-Factory "
                "stops with \"The number of {key} does not match\"", used, line=line, files=counted("file", len(paths)),
                key=column, placeholder=placeholder)))
            return None
    view.context = _context(value, schema)
    if schema.tools:
        return _check_tools(value, line, schema, out, view)
    return view


def _context(value: dict, schema: Schema) -> tuple:
    """The tools (as written, or as sorted JSON when a list) and the media paths of a row, hashable."""
    import json

    parts: list = []
    if schema.tools:
        tools = value.get(schema.tools)
        parts.append(tools if isinstance(tools, str) else "" if tools in (None, []) else
                     json.dumps(tools, sort_keys=True, ensure_ascii=False))
    for column, _placeholder in schema.media:
        parts.append(tuple(_strings(value.get(column))))
    return tuple(parts)


def _tool_names(tools: Any) -> set[str] | None:
    """The names a tools column declares (a JSON list of functions, as text or as a list); None: unreadable."""
    import json

    if tools in (None, "", []):
        return set()
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except ValueError:
            return None
    if isinstance(tools, dict):
        tools = [tools]
    if not isinstance(tools, list):
        return None
    names = set()
    for t in tools:
        if isinstance(t, dict):
            f = t.get("function") if isinstance(t.get("function"), dict) else t
            if isinstance(f.get("name"), str):
                names.add(f["name"])
    return names


def _check_tools(value: dict, line: int, schema: Schema, out: list[Finding], view: RowView) -> RowView | None:
    import json

    names = _tool_names(value.get(schema.tools))
    if names is None or (isinstance(value.get(schema.tools), (list, dict)) and not schema.openai):
        out.append(finding("tools", line, _(
            "L{line}: \"{key}\" is not a JSON list of tools written as a string; LLaMA-Factory cannot read it",
            line=line, key=schema.tools)))
        return None
    for role, text in view.texts:
        if role != schema.function_tag:
            continue
        try:
            calls = json.loads(text)
        except ValueError:
            out.append(finding("tools", line, _(
                "L{line}: a {role} turn is not JSON (LLaMA-Factory: Invalid JSON format in function message)",
                line=line, role=role)))
            return None
        calls = calls if isinstance(calls, list) else [calls]
        for call in calls:
            if not isinstance(call, dict) or "name" not in call or "arguments" not in call:
                out.append(finding("tools", line, _(
                    "L{line}: a tool call needs \"name\" and \"arguments\"; LLaMA-Factory cannot format it",
                    line=line)))
                return None
            if names and call["name"] not in names:
                out.append(finding("tools", line, _(
                    "L{line}: the call names \"{name}\", which the row's tools do not declare ({declared})",
                    line=line, name=call["name"], declared=", ".join(sorted(names))), severity="warning"))
    return view


def _missing_keys(value: dict, line: int, schema: Schema, out: list[Finding]) -> RowView | None:
    found = next(((p, r) for p, r in ALIASES if p in value and r in value), None)
    want = f"{schema.prompt}/{schema.response}"
    if found:
        out.append(finding("missing-keys", line, _(
            "L{line}: no \"{want}\"; found {found}; fix renames them (with --yes)",
            line=line, want=want, found=f"{found[0]}/{found[1]}")))
        fixed = {schema.prompt: value[found[0]], schema.response: value[found[1]]}
        if schema.query:
            fixed[schema.query] = value.get(schema.query, "")
        view = _check_alpaca(fixed, line, schema, [])
        if view is not None:
            view.fix = CONFIRM if view.fix != NONE else NONE
        return view
    missing = [k for k in (schema.prompt, schema.response) if k not in value]
    out.append(finding("missing-keys", line, _(
        "L{line}: no \"{missing}\" key (keys here: {keys}); add it by hand, or fix drops the row",
        line=line, missing="/".join(missing), keys=", ".join(list(value)[:6]) or "none"), fix=NONE))
    return None


def _check_alpaca(value: dict, line: int, schema: Schema, out: list[Finding]) -> RowView | None:
    if schema.prompt not in value or schema.response not in value:
        return _missing_keys(value, line, schema, out)
    fix = "safe"
    strings: dict[str, str] = {}
    for key in (schema.prompt, schema.query, schema.response, schema.system):
        if key is None or key not in value:
            continue
        v = value[key]
        if isinstance(v, str):
            strings[key] = v
            continue
        kind = non_string_fix(v, key == schema.response)
        how = (_("fix writes it as \"\"") if kind == SAFE else _("fix turns it into text (with --yes)")
               if kind == CONFIRM else _("LLaMA-Factory drops the row; fix moves it to the rejects file"))
        out.append(finding("non-string", line, _(
            "L{line}: \"{key}\" is {type}, not a string; {how}", line=line, key=key, type=type_name(v), how=how),
            fix=kind))
        if kind == NONE:
            return None
        if kind == CONFIRM:
            fix = CONFIRM
        strings[key] = "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
    if schema.query and schema.query not in value:
        out.append(finding("missing-input", line, _(
            "L{line}: no \"{key}\" key (LLaMA-Factory reads it as empty); fix adds \"{key}\": \"\"",
            line=line, key=schema.query)))
    history: tuple = ()
    if schema.history and schema.history in value and value[schema.history] not in (None, []):
        h = value[schema.history]
        ok = isinstance(h, list) and all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in h)
        if not ok:
            out.append(finding("non-string", line, _(
                "L{line}: \"{key}\" must be a list of [prompt, response] pairs of strings; fix moves the row to "
                "the rejects file", line=line, key=schema.history), fix=NONE))
            return None
        history = tuple(tuple(p) for p in h)
    ins = strings.get(schema.prompt, "")
    inp = strings.get(schema.query, "") if schema.query else ""
    output = strings.get(schema.response, "")
    texts = tuple(strings.items()) + tuple((schema.history, x) for p in history for x in p)
    return RowView((ins, inp, history, strings.get(schema.system, "")) if history or schema.system in strings
                   else (ins, inp), output, (len(ins), len(inp), len(output)), texts, fix, tuple(value))


def _check_text(value: dict, line: int, schema: Schema, out: list[Finding]) -> RowView | None:
    """A pre-training row: LLaMA-Factory trains on its text column (the alpaca prompt) as it is."""
    text = value.get(schema.prompt)
    if text is not None and not isinstance(text, str):
        out.append(finding("pretrain-text", line, _(
            "L{line}: \"{key}\" is {type}, not a string; LLaMA-Factory cannot join it into text; fix moves the "
            "row to the rejects file", line=line, key=schema.prompt, type=type_name(text))))
        return None
    text = text or ""
    return RowView((text,), text, (len(text),), ((schema.prompt, text),), SAFE, tuple(value))


def _answer_text(answer: Any, schema: Schema) -> tuple[str | None, str]:
    """(text, what is wrong) of a chosen / rejected answer: a string (alpaca) or a turn (sharegpt)."""
    if schema.kind == ALPACA:
        return (answer, "") if isinstance(answer, str) else (None, type_name(answer) if answer is not None
                                                              else _("missing"))
    if not isinstance(answer, dict):
        return None, type_name(answer) if answer is not None else _("missing")
    role, text = answer.get(schema.role_tag), answer.get(schema.content_tag)
    if role not in (schema.assistant_tag, schema.function_tag):
        return None, _("a turn of role \"{role}\", not \"{expected}\"", role=role, expected=schema.assistant_tag)
    if not isinstance(text, str):
        return None, _("a turn whose content is {type}", type=type_name(text))
    return text, ""


def _pair(value: dict, line: int, schema: Schema, out: list[Finding]) -> tuple[str, str] | None:
    """The chosen and rejected answers of a preference row, or None (a finding said why)."""
    answers = []
    for key in (schema.chosen or "chosen", schema.rejected or "rejected"):
        text, wrong = _answer_text(value.get(key), schema)
        if text is None:
            out.append(finding("preference", line, _(
                "L{line}: \"{key}\" is {what}; a preference row needs a chosen and a rejected answer "
                "(LLaMA-Factory drops the row); fix moves it to the rejects file", line=line, key=key, what=wrong)))
            return None
        answers.append(text)
    if answers[0] == answers[1]:
        out.append(finding("preference", line, _(
            "L{line}: the chosen and the rejected answer are the same; the pair teaches nothing", line=line),
            severity="warning"))
    return answers[0], answers[1]


def _check_alpaca_pair(value: dict, line: int, schema: Schema, out: list[Finding]) -> RowView | None:
    pair = _pair(value, line, schema, out)
    if pair is None:
        return None
    prompt = []
    for key in (schema.prompt, schema.query, schema.system):
        v = value.get(key) if key else None
        if v is not None and not isinstance(v, str):
            out.append(finding("non-string", line, _(
                "L{line}: \"{key}\" is {type}, not a string; LLaMA-Factory cannot join it into the prompt; fix "
                "moves the row to the rejects file", line=line, key=key, type=type_name(v)), fix=NONE))
            return None
        prompt.append(v or "")
    if not (prompt[0] or prompt[1]).strip():
        out.append(finding("preference", line, _(
            "L{line}: no prompt (\"{key}\" is empty); both answers answer nothing", line=line, key=schema.prompt),
            severity="warning"))
    chosen, rejected = pair
    texts = ((schema.prompt, prompt[0]), (schema.query or "input", prompt[1]), ("chosen", chosen),
             ("rejected", rejected))
    return RowView((prompt[0], prompt[1], rejected), chosen, (len(prompt[0]) + len(prompt[1]), len(chosen),
                   len(rejected)), texts, SAFE, tuple(value))


def _check_conversation(value: dict, line: int, schema: Schema, out: list[Finding]) -> RowView | None:
    msgs = value.get(schema.messages)
    if not isinstance(msgs, list) or not msgs:
        what = _("missing") if msgs is None else _("empty") if msgs == [] else type_name(msgs)
        out.append(finding("missing-keys", line, _(
            "L{line}: \"{key}\" is {what}; each row needs a list of turns; fix moves it to the rejects file",
            line=line, key=schema.messages, what=what), fix=NONE))
        return None
    user_tags = {schema.user_tag, "observation", "tool", schema.observation_tag}
    assistant_tags = {schema.assistant_tag, "function_call", "function", schema.function_tag}
    turns = msgs
    system = ""
    if isinstance(turns[0], dict) and turns[0].get(schema.role_tag) == schema.system_tag:
        system = turns[0].get(schema.content_tag, "")
        turns = turns[1:]
    texts: list[tuple[str, str]] = [(schema.system_tag, system)] if isinstance(system, str) and system else []
    for k, turn in enumerate(turns):
        expected = schema.user_tag if k % 2 == 0 else schema.assistant_tag
        if not isinstance(turn, dict) or schema.role_tag not in turn or schema.content_tag not in turn:
            out.append(finding("sharegpt-roles", line, _(
                "L{line}: turn {turn} is not a {{\"{role}\": ..., \"{content}\": ...}} object; fix moves the row "
                "to the rejects file", line=line, turn=k + 1, role=schema.role_tag, content=schema.content_tag)))
            return None
        role = turn[schema.role_tag]
        if role not in (user_tags if k % 2 == 0 else assistant_tags):
            out.append(finding("sharegpt-roles", line, _(
                "L{line}: turn {turn} role \"{role}\" expected \"{expected}\" (LLaMA-Factory: Invalid role tag, "
                "row skipped); fix moves it to the rejects file", line=line, turn=k + 1, role=role,
                expected=expected)))
            return None
        content = turn[schema.content_tag]
        if not isinstance(content, str):
            out.append(finding("non-string", line, _(
                "L{line}: turn {turn} content is {type}, not a string; fix moves the row to the rejects file",
                line=line, turn=k + 1, type=type_name(content)), fix=NONE))
            return None
        texts.append((str(role), content))
    if schema.task == PREFERENCE:
        return _conversation_pair(value, line, schema, out, turns, texts)
    if len(turns) % 2 and len(turns) > 1:  # an unanswered last question: the answered exchanges stay
        out.append(finding("dangling-turn", line, _(
            "L{line}: the last turn (turn {turn}) has no answer; LLaMA-Factory skips the whole row (Invalid "
            "message count); fix trims that turn and keeps the answered exchanges", line=line, turn=len(turns))))
        texts = texts[:-1]
        turns = turns[:-1]
    if len(turns) % 2 != 0 or not turns:
        out.append(finding("sharegpt-roles", line, _n(
            "L{line}: {n} turn after the system turn; LLaMA-Factory needs user/assistant pairs (Invalid "
            "message count, row skipped); fix moves it to the rejects file",
            "L{line}: {n} turns after the system turn; LLaMA-Factory needs user/assistant pairs (Invalid "
            "message count, row skipped); fix moves it to the rejects file", len(turns), line=line)))
        return None
    prompt = tuple(t for _r, t in texts[:-1])
    output = texts[-1][1]
    plen = sum(len(t) for t in prompt)
    return RowView(prompt, output, (plen, len(output)), tuple(texts), "safe", tuple(value))


def _conversation_pair(value: dict, line: int, schema: Schema, out: list[Finding], turns: list,
                       texts: list[tuple[str, str]]) -> RowView | None:
    """A sharegpt preference row: the turns end with the user's (an odd count), then a chosen and a
    rejected answer turn."""
    if len(turns) % 2 != 1:
        out.append(finding("sharegpt-roles", line, _n(
            "L{line}: {n} turn after the system turn; a preference row ends with the user's turn (an odd "
            "count; LLaMA-Factory: Invalid message count, row skipped); fix moves it to the rejects file",
            "L{line}: {n} turns after the system turn; a preference row ends with the user's turn (an odd "
            "count; LLaMA-Factory: Invalid message count, row skipped); fix moves it to the rejects file",
            len(turns), line=line)))
        return None
    pair = _pair(value, line, schema, out)
    if pair is None:
        return None
    chosen, rejected = pair
    prompt = tuple(t for _r, t in texts)
    plen = sum(len(t) for t in prompt)
    return RowView(prompt + (rejected,), chosen, (plen, len(chosen), len(rejected)),
                   tuple(texts) + (("chosen", chosen), ("rejected", rejected)), SAFE, tuple(value))
