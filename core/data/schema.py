"""Which dataset format the rows follow, and the row-level checks of each format.

Formats LLaMA-Factory reads: alpaca (`instruction`, `input`, `output`, optional `history`, `system`),
alpaca under other names (question/answer, prompt/response, query/response, ... registered with a
`columns` map or renamed by `fix --yes`), sharegpt (`conversations` of `from`/`value` turns) and OpenAI
`messages` (`role`/`content`). Table A4 rules 8, 9, 13, 15 and 25/26 for the text of the fields.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable

from core.data.findings import CONFIRM, NONE, SAFE, Finding, finding
from core.i18n import _, _n

ALPACA, SHAREGPT, MESSAGES, UNKNOWN = "alpaca", "sharegpt", "messages", "unknown"
# what the rows train: the dataset kinds LLaMA-Factory's stages read (data/README.md)
SUPERVISED, PRETRAIN, PREFERENCE, FEEDBACK = "supervised", "pretrain", "preference", "kto"
KINDS = (SUPERVISED, PRETRAIN, PREFERENCE, FEEDBACK)
# the stages that can train on each kind (LLaMA-Factory's loader: pt reads the first user turn of any row,
# dpo/rm read ranked pairs, kto reads a boolean tag; sft drops a tagged row: its response has two turns)
STAGES_FOR_KIND = {SUPERVISED: ("sft", "pt"), PRETRAIN: ("pt",), PREFERENCE: ("dpo", "rm", "pt"),
                   FEEDBACK: ("kto", "pt")}
MEDIA = (("images", "<image>"), ("videos", "<video>"), ("audios", "<audio>"))
KTO_TAG_NAMES = ("kto_tag", "label", "kto", "desirable", "tag")
TEXT_NAMES = ("text", "content", "document")

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
    # the other kinds and columns of LLaMA-Factory's dataset_info.json (parser.DatasetAttr)
    task: str = SUPERVISED  # supervised | pretrain | preference | kto
    chosen: str | None = None
    rejected: str | None = None
    kto_tag: str | None = None
    tools: str | None = None
    images: str | None = None
    videos: str | None = None
    audios: str | None = None
    observation_tag: str = "observation"
    function_tag: str = "function_call"
    openai: bool = False  # formatting "openai" (messages read by LLaMA-Factory's OpenAI converter)
    source: str = "detected"  # detected | the name of the file's dataset_info.json entry
    text_file: bool = False  # the lines of a .txt file, a row each (datasets' text builder: one column, "text")
    media_dir: str | None = field(default=None, compare=False)  # where media paths are looked up

    @property
    def plain(self) -> bool:
        """Supervised rows with no tools, media or tag column: what the block scan's fast paths handle."""
        return self.task == SUPERVISED and not (self.tools or self.images or self.videos or self.audios)

    @property
    def required(self) -> tuple[str, ...]:
        """The keys a well-formed alpaca row of this schema has."""
        if self.task == PRETRAIN:
            return (self.prompt,)
        if self.task == PREFERENCE:
            return (self.prompt, self.chosen or "chosen", self.rejected or "rejected")
        return (self.prompt, self.response)

    @property
    def columns_used(self) -> tuple[str, ...]:
        """Every key of a row this schema reads (alpaca): the expected key set of a well-formed row."""
        names = (self.prompt, self.query) + self.required[1:] + (self.kto_tag, self.history, self.system,
                                                                 self.tools, self.images, self.videos, self.audios)
        return tuple(k for k in dict.fromkeys(names) if k)

    @property
    def media(self) -> tuple[tuple[str, str], ...]:
        """(column, placeholder) of the media columns this schema reads."""
        return tuple((getattr(self, name), tag) for name, tag in MEDIA if getattr(self, name))

    @property
    def kind_label(self) -> str:
        return {SUPERVISED: _("supervised (sft)"), PRETRAIN: _("pre-training text (pt)"),
                PREFERENCE: _("preference pairs (dpo)"), FEEDBACK: _("KTO feedback (kto)")}[self.task]

    @property
    def aliased(self) -> bool:
        return self.kind == ALPACA and (self.prompt, self.response) != ("instruction", "output")

    @property
    def label(self) -> str:
        if self.text_file:
            return _("plain text, a row per line")
        if self.task == PRETRAIN:
            return f"{self.kind} ({self.prompt})"
        if self.kind == ALPACA and self.task == PREFERENCE:
            return f"alpaca ({self.prompt}/{self.chosen}/{self.rejected})"
        if self.kind == ALPACA and self.aliased:
            return f"alpaca ({self.prompt}/{self.response})"
        return self.kind

    @property
    def fields(self) -> tuple[str, ...]:
        """The string fields whose lengths stats reports."""
        if self.task == PRETRAIN:
            return (self.prompt,)
        if self.task == PREFERENCE:
            return ("prompt", "chosen", "rejected")
        if self.kind == ALPACA:
            return ("instruction", "input", "output")
        return ("prompt", "output")

    def dataset_info_entry(self, file_name: str) -> dict[str, Any]:
        """The dataset_info.json entry LLaMA-Factory needs to read rows of this schema as they are."""
        entry: dict[str, Any] = {"file_name": file_name}
        if not self.plain:
            return self._kind_entry(entry)
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

    def _kind_entry(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Pre-training, preference and KTO rows, and rows with tools or media: always a columns map
        (with one, LLaMA-Factory sets every column not named to None)."""
        cols: dict[str, str] = {}
        if self.kind == ALPACA:
            cols["prompt"] = self.prompt
            if self.query and self.task != PRETRAIN:
                cols["query"] = self.query
            if self.task in (SUPERVISED, FEEDBACK):
                cols["response"] = self.response
            if self.history:
                cols["history"] = self.history
        else:
            entry["formatting"] = "openai" if self.openai else "sharegpt"
            cols["messages"] = self.messages
        if self.task == PREFERENCE:
            entry["ranking"] = True
            cols["chosen"] = self.chosen or "chosen"
            cols["rejected"] = self.rejected or "rejected"
        if self.task == FEEDBACK and self.kto_tag:
            cols["kto_tag"] = self.kto_tag
        for name in ("system", "tools", "images", "videos", "audios"):
            if getattr(self, name):
                cols[name] = getattr(self, name)
        entry["columns"] = cols
        if self.kind != ALPACA:
            tags = {"role_tag": self.role_tag, "content_tag": self.content_tag, "user_tag": self.user_tag,
                    "assistant_tag": self.assistant_tag, "observation_tag": self.observation_tag,
                    "function_tag": self.function_tag, "system_tag": self.system_tag}
            defaults = {"role_tag": "from", "content_tag": "value", "user_tag": "human", "assistant_tag": "gpt",
                        "observation_tag": "observation", "function_tag": "function_call", "system_tag": "system"}
            tags = {k: v for k, v in tags.items() if v != defaults[k]}
            if tags:
                entry["tags"] = tags
        return entry


def detect_schema(rows: Iterable[Any]) -> Schema:
    """Decide the format from the first rows (dicts; other values are ignored)."""
    counts: dict[str, int] = {}
    booleans: dict[str, int] = {}  # key → rows where its value is true or false
    dict_chosen = 0
    first_messages: list | None = None
    n = 0
    for row in rows:
        if not isinstance(row, dict):
            continue
        n += 1
        for k, v in row.items():
            counts[k] = counts.get(k, 0) + 1
            if isinstance(v, bool):
                booleans[k] = booleans.get(k, 0) + 1
            if first_messages is None and isinstance(v, list) and v and isinstance(v[0], dict):
                first_messages = v
        if isinstance(row.get("chosen"), dict):
            dict_chosen += 1
    if not n:
        return Schema(kind=UNKNOWN)
    base = _detect_format(counts, first_messages, n)
    return _detect_kind(base, counts, booleans, dict_chosen, n)


def _detect_kind(base: Schema, counts: dict[str, int], booleans: dict[str, int], dict_chosen: int,
                 n: int) -> Schema:
    """The kind of rows (preference, KTO, pre-training text) and the tools / media columns, from the keys."""
    from dataclasses import replace

    def most(key: str) -> bool:
        return counts.get(key, 0) * 2 >= n

    extras = {name: name for name in ("tools", "images", "videos", "audios") if most(name)}
    conversation = base.kind in (SHAREGPT, MESSAGES)
    if most("chosen") and most("rejected"):
        if conversation or dict_chosen * 2 >= n:
            conv = base if conversation else _conversation_schema("conversations", None, counts)
            return replace(conv, task=PREFERENCE, chosen="chosen", rejected="rejected", **extras)
        prompt = next((p for p in ("instruction", "prompt", "question", "query", "input") if p in counts),
                      "instruction")
        query = "input" if prompt != "input" and "input" in counts else None
        return Schema(kind=ALPACA, prompt=prompt, query=query, response="output", task=PREFERENCE,
                      chosen="chosen", rejected="rejected", history="history" if "history" in counts else None,
                      system="system" if "system" in counts else None, **extras)
    known = {base.prompt, base.query, base.response, base.messages, base.system, base.history}
    tag = next((k for k in KTO_TAG_NAMES if booleans.get(k, 0) * 2 >= n and k not in known), None) or next(
        (k for k, c in booleans.items() if c * 2 >= n and k not in known), None)
    if tag and base.kind != UNKNOWN:
        return replace(base, task=FEEDBACK, kto_tag=tag, **extras)
    if base.kind == UNKNOWN:
        text = next((k for k in TEXT_NAMES if most(k)), None)
        if text:
            return Schema(kind=ALPACA, prompt=text, query=None, response="output", task=PRETRAIN)
        return base
    return replace(base, **extras) if extras else base


def _detect_format(counts: dict[str, int], first_messages: list | None, n: int) -> Schema:
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
