"""Which dataset format the rows follow, and the row-level checks of each format.

Formats LLaMA-Factory reads: alpaca (`instruction`, `input`, `output`, optional `history`, `system`),
alpaca under other names (question/answer, prompt/response, query/response, ... registered with a
`columns` map or renamed by `fix --yes`), sharegpt (`conversations` of `from`/`value` turns) and OpenAI
`messages` (`role`/`content`). Table A4 rules 8, 9, 13, 15 and 25/26 for the text of the fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from core.data.findings import CONFIRM, NONE, SAFE, Finding, finding
from core.i18n import _

ALPACA, SHAREGPT, MESSAGES, UNKNOWN = "alpaca", "sharegpt", "messages", "unknown"

# (prompt key, response key) pairs that mean instruction/output, most specific first
ALIASES: tuple[tuple[str, str], ...] = (
    ("instruction", "output"),
    ("instruction", "response"),
    ("instruction", "answer"),
    ("question", "answer"),
    ("question", "response"),
    ("prompt", "response"),
    ("prompt", "completion"),
    ("prompt", "answer"),
    ("prompt", "output"),
    ("query", "response"),
    ("query", "answer"),
    ("input", "output"),
    ("input", "target"),
    ("q", "a"),
    ("Q", "A"),
    ("问题", "答案"),
    ("问题", "回答"),
    ("问", "答"),
)
QUERY_ALIASES = ("input", "context", "query")
SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                  "observation": "observation", "function_call": "function", "system": "system",
                  "tool": "observation", "function": "function"}


@dataclass(frozen=True)
class Schema:
    kind: str = ALPACA  # alpaca | sharegpt | messages | unknown
    prompt: str = "instruction"
    query: str | None = "input"
    response: str = "output"
    history: str | None = None
    system: str | None = None
    messages: str = "conversations"
    role_tag: str = "from"
    content_tag: str = "value"
    user_tag: str = "human"
    assistant_tag: str = "gpt"
    system_tag: str = "system"

    @property
    def aliased(self) -> bool:
        return self.kind == ALPACA and (self.prompt, self.response) != ("instruction", "output")

    @property
    def label(self) -> str:
        if self.kind == ALPACA and self.aliased:
            return f"alpaca ({self.prompt}/{self.response})"
        return self.kind

    @property
    def fields(self) -> tuple[str, ...]:
        """The string fields whose lengths stats reports."""
        if self.kind == ALPACA:
            return ("instruction", "input", "output")
        return ("prompt", "output")

    def dataset_info_entry(self, file_name: str) -> dict[str, Any]:
        """The dataset_info.json entry LLaMA-Factory needs to read rows of this schema as they are."""
        entry: dict[str, Any] = {"file_name": file_name}
        if self.kind == ALPACA:
            if self.aliased or self.query != "input" or self.history or self.system:
                # with a `columns` map LLaMA-Factory sets every column not named to None
                cols = {"prompt": self.prompt, "response": self.response}
                if self.query:
                    cols["query"] = self.query
                if self.history:
                    cols["history"] = self.history
                if self.system:
                    cols["system"] = self.system
                entry["columns"] = cols
            return entry
        entry["formatting"] = "sharegpt"
        entry["columns"] = {"messages": self.messages}
        if self.system:
            entry["columns"]["system"] = self.system
        if (self.role_tag, self.content_tag, self.user_tag, self.assistant_tag) != ("from", "value", "human", "gpt"):
            entry["tags"] = {"role_tag": self.role_tag, "content_tag": self.content_tag, "user_tag": self.user_tag,
                             "assistant_tag": self.assistant_tag, "system_tag": self.system_tag}
        return entry


def detect_schema(rows: Iterable[Any]) -> Schema:
    """Decide the format from the first rows (dicts; other values are ignored)."""
    counts: dict[str, int] = {}
    first_messages: list | None = None
    n = 0
    for row in rows:
        if not isinstance(row, dict):
            continue
        n += 1
        for k, v in row.items():
            counts[k] = counts.get(k, 0) + 1
            if first_messages is None and isinstance(v, list) and v and isinstance(v[0], dict):
                first_messages = v
    if not n:
        return Schema(kind=UNKNOWN)
    for key in ("conversations", "messages"):
        if counts.get(key, 0) * 2 >= n:
            return _conversation_schema(key, first_messages, counts)
    best = None
    for p, r in ALIASES:
        score = min(counts.get(p, 0), counts.get(r, 0))
        if score and (best is None or score > best[0]):
            best = (score, p, r)
    if best is None:
        return Schema(kind=UNKNOWN)
    _, p, r = best
    query = next((q for q in QUERY_ALIASES if q in counts and q not in (p, r)), None)
    return Schema(kind=ALPACA, prompt=p, query=query, response=r,
                  history="history" if "history" in counts else None,
                  system="system" if "system" in counts else None)


def _conversation_schema(key: str, first: list | None, counts: dict[str, int]) -> Schema:
    msg = first[0] if first else {}
    if "role" in msg or key == "messages":
        return Schema(kind=MESSAGES if key == "messages" else SHAREGPT, messages=key, role_tag="role",
                      content_tag="content", user_tag="user", assistant_tag="assistant", system_tag="system",
                      query=None, system="system" if "system" in counts else None)
    return Schema(kind=SHAREGPT, messages=key, query=None, system="system" if "system" in counts else None)


# ------------------------------------------------------------------ row checks

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
    if schema.kind in (SHAREGPT, MESSAGES):
        return _check_conversation(value, line, schema, out)
    return _check_alpaca(value, line, schema, out)


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


def _check_conversation(value: dict, line: int, schema: Schema, out: list[Finding]) -> RowView | None:
    msgs = value.get(schema.messages)
    if not isinstance(msgs, list) or not msgs:
        what = _("missing") if msgs is None else _("empty") if msgs == [] else type_name(msgs)
        out.append(finding("missing-keys", line, _(
            "L{line}: \"{key}\" is {what}; each row needs a list of turns; fix moves it to the rejects file",
            line=line, key=schema.messages, what=what), fix=NONE))
        return None
    user_tags = {schema.user_tag, "observation", "tool"}
    assistant_tags = {schema.assistant_tag, "function_call", "function"}
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
    if len(turns) % 2 != 0 or not turns:
        out.append(finding("sharegpt-roles", line, _(
            "L{line}: {count} turns after the system turn; LLaMA-Factory needs user/assistant pairs (Invalid "
            "message count, row skipped); fix moves it to the rejects file", line=line, count=len(turns))))
        return None
    prompt = tuple(t for _r, t in texts[:-1])
    output = texts[-1][1]
    plen = sum(len(t) for t in prompt)
    return RowView(prompt, output, (plen, len(output)), tuple(texts), "safe", tuple(value))
