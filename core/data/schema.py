"""Which dataset format and kind the rows follow (`Schema`, `detect_schema`), and the dataset_info.json
entry that reads them. The row-level rules of each kind are in `core.data.row_rules`.

Formats LLaMA-Factory reads: alpaca (`instruction`, `input`, `output`, optional `history`, `system`),
alpaca under other names (question/answer, prompt/response, query/response, ... registered with a
`columns` map or renamed by `fix --yes`), sharegpt (`conversations` of `from`/`value` turns) and OpenAI
`messages` (`role`/`content`); kinds: supervised, pre-training text, preference pairs, KTO feedback, with
tools and media columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from core.i18n import _

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
# a boolean column is KTO feedback only when its name says it rates the answer (LLaMA-Factory's `kto_tag`, its demo's
# `label`, and words of the same family); any other boolean beside the text (`status`, `draft`, `sticky`, `published`,
# `comments_disabled`, `is_active`...) is a record's metadata, not feedback on its answer
FEEDBACK_NAME = re.compile(r"kto|label|desirable|\btag\b|feedback|helpful|thumbs?_?up|upvoted?|liked?\b|\bgood\b"
                           r"|accepted|approved_answer|preferred", re.IGNORECASE)
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
    # help-center and CMS articles (WordPress posts, Zendesk Help Center / Intercom articles): the title asks,
    # the body answers; last, so a row's own question/answer keys win over its title
    ("title", "body"),
    ("title", "content"),
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
        (k for k, c in booleans.items() if c * 2 >= n and k not in known and FEEDBACK_NAME.search(k)), None)
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
