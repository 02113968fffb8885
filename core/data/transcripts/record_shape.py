"""Messages in JSON or CSV exports, found by their shape: the lists of objects (at any depth: `messages`,
`data.items`, `chats[].thread.events`, a CSV's rows, a JSON Lines file) whose items share a text field and
a speaker field; the fields are chosen by what their values look like (long varied text, a few recurring
names or ids, timestamps, a few role words) and by their names only as a tie-break. Users side-loaded
beside the messages (`users: [{id, name, role}]`) name the speakers and say who is an agent; a message
object beside a list of them (`source` beside `conversation_parts`) is the conversation's first one."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator

from core.data.transcripts.messages import Message
from core.data.transcripts.noise import clean_text, is_notice, is_system_speaker
from core.data.transcripts.roles import role_of_value
from core.data.transcripts.stamps import value_seconds

TEXT_KEY = re.compile(r"text|content|body|message|msg|内容|消息|value", re.IGNORECASE)
SPEAKER_KEY = re.compile(r"from|sender|author|speaker|talker|actor|user|发送|昵称|nick", re.IGNORECASE)
NAME_KEY = re.compile(r"(?:^|[._])(?:nick_?name|name|display_?name|昵称)$|name$", re.IGNORECASE)
NOT_SPEAKER = re.compile(r"type|role|key|tenant|email|mail|status", re.IGNORECASE)
TIME_KEY = re.compile(r"time|date|created|timestamp|时间", re.IGNORECASE)
CHAT_KEY = re.compile(r"chat|conversation|session|ticket|room|thread|talker|channel|会话|群", re.IGNORECASE)
TO_KEY = re.compile(r"^(?:to|tolist|to_list|to_ids?|receivers?|recipients?)$", re.IGNORECASE)
PRIVATE_KEY = re.compile(r"^_?(?:private|is_private|internal|is_internal)$", re.IGNORECASE)
PUBLIC_KEY = re.compile(r"^(?:public|is_public)$", re.IGNORECASE)
MAX_DEPTH = 5


@dataclass
class Fields:
    pattern: str          # where the message lists are (`conversations[].conversation_parts.conversation_parts`)
    text: str
    speaker: str
    role: str = ""
    time: str = ""
    chat: str = ""
    to: str = ""
    private: str = ""
    public: str = ""

    @property
    def label(self) -> str:
        where = f"`{self.pattern}`" if self.pattern else "the top level"
        parts = [f"text `{self.text}`", f"speaker `{self.speaker}`"] + \
            [f"{what} `{key}`" for what, key in (("role", self.role), ("time", self.time), ("chat", self.chat)) if key]
        return f"message objects under {where} ({', '.join(parts)})"


# ------------------------------------------------------------------ flattening

def flatten(value: Any, prefix: str = "", depth: int = 0, out: dict | None = None) -> dict[str, Any]:
    """Leaves by dotted path; JSON held in a string is opened; a list of text pieces is joined."""
    out = {} if out is None else out
    if depth > MAX_DEPTH:
        return out
    if isinstance(value, str) and value[:1] == "{" and value[-1:] == "}":
        import orjson

        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            pass
    if isinstance(value, dict):
        for k, v in value.items():
            flatten(v, f"{prefix}.{k}" if prefix else str(k), depth + 1, out)
    elif isinstance(value, list):
        if value and all(isinstance(x, str) or (isinstance(x, dict) and isinstance(x.get("text"), str))
                         for x in value) and any(isinstance(x, dict) for x in value):
            out[prefix] = "".join(x if isinstance(x, str) else x["text"] for x in value)
        elif all(not isinstance(x, (dict, list)) for x in value):
            out[prefix] = tuple(value)
    else:
        out[prefix] = value
    return out


def object_lists(value: Any, pattern: str = "", where: str = "", depth: int = 0) -> Iterator[tuple[str, str, list]]:
    """(pattern, concrete path, list) of every list of objects."""
    if depth > MAX_DEPTH:
        return
    if isinstance(value, list):
        if value and sum(isinstance(x, dict) for x in value) * 2 >= len(value):
            yield pattern, where, value
        for i, x in enumerate(value):
            yield from object_lists(x, pattern + "[]", f"{where}[{i}]", depth + 1)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from object_lists(v, f"{pattern}.{k}" if pattern else str(k), f"{where}.{k}" if where else str(k),
                                    depth + 1)


# ------------------------------------------------------------------ choosing fields

def _last(path: str) -> str:
    return path.rsplit(".", 1)[-1]


def choose_fields(items: list[dict[str, Any]], pattern: str) -> Fields | None:
    n = len(items)
    if n < 2:
        return None
    seen: dict[str, list] = {}
    for flat in items:
        for k, v in flat.items():
            seen.setdefault(k, []).append(v)
    timed = {k for k, vs in seen.items() if sum(value_seconds(v) is not None for v in vs) >= 0.8 * len(vs)}
    text = _best(((k, _text_score(k, vs, n)) for k, vs in seen.items() if k not in timed))
    if text is None:
        return None
    speaker = _best(((k, _speaker_score(k, vs, n)) for k, vs in seen.items() if k != text and k not in timed))
    if speaker is None:
        return None
    fields = Fields(pattern, text, speaker)
    fields.time = _best(((k, (2 if TIME_KEY.search(_last(k)) else 1) - ("update" in k.lower()))
                         for k in timed), floor=0) or ""
    used = {text, speaker, fields.time}
    fields.role = _best(((k, _role_score(k, vs)) for k, vs in seen.items() if k not in used), floor=0) or ""
    fields.chat = _best(((k, 1.0) for k, vs in seen.items()
                         if k not in used and CHAT_KEY.search(_last(k)) and _scalar(vs)), floor=0) or ""
    fields.to = next((k for k in seen if TO_KEY.match(_last(k))), "")
    fields.private = next((k for k, vs in seen.items() if PRIVATE_KEY.match(_last(k)) and _bools(vs)), "")
    fields.public = next((k for k, vs in seen.items() if PUBLIC_KEY.match(_last(k)) and _bools(vs)), "")
    return fields


def _best(scored, floor: float = 0.0) -> str | None:
    best = max(((s, k) for k, s in scored if s > floor), default=None, key=lambda t: (t[0], -len(t[1])))
    return best[1] if best else None


def _scalar(vs: list) -> bool:
    return all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in vs)


def _bools(vs: list) -> bool:
    return all(isinstance(v, bool) for v in vs)


def _text_score(key: str, vs: list, n: int) -> float:
    texts = [v for v in vs if isinstance(v, str)]
    if len(texts) < 0.3 * n:
        return 0.0
    mean = sum(len(t) for t in texts) / len(texts)
    if all(t.isascii() and " " not in t.strip() for t in texts):  # ids, urls, codes
        return 0.0
    htmlish = sum("<" in t and ">" in t for t in texts) > len(texts) / 2
    return len(texts) / n * mean * (1.5 if TEXT_KEY.search(_last(key)) else 1.0) * (0.6 if htmlish else 1.0)


def _speaker_score(key: str, vs: list, n: int) -> float:
    vals = [str(v) for v in vs if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v).strip()]
    distinct = set(vals)
    if len(vals) < 0.5 * n or len(distinct) < 2 or len(distinct) > max(8, 0.8 * n) or distinct <= {"0", "1"}:
        return 0.0
    if sum(len(v) for v in vals) / len(vals) > 64:
        return 0.0
    last = _last(key)
    score = (2.0 if SPEAKER_KEY.search(key) else 0.0) + (2.0 if NAME_KEY.search(last) else 0.0)
    if not score:
        return 0.0
    score -= 1.0 if re.search(r"id$", last, re.IGNORECASE) else 0.0
    score -= 3.0 if NOT_SPEAKER.search(last) else 0.0
    return score


def _role_score(key: str, vs: list) -> float:
    roles = {role_of_value(_last(key), v) for v in vs} - {""}
    return 2.0 if len(roles - {"system"}) >= 2 else 0.0


# ------------------------------------------------------------------ messages

def find_messages(root: Any, lines: list[int] | None = None) -> tuple[list[Message], Fields] | None:
    """The messages of a JSON document (or of a CSV's / JSON Lines file's rows: `root` a list, `lines` their
    line numbers), or None when no list of objects reads as messages."""
    groups: dict[str, list[tuple[str, list]]] = {}
    for pattern, where, items in object_lists(root):
        groups.setdefault(pattern, []).append((where, items))
    best: tuple[int, Fields, list] | None = None
    for pattern, lists in groups.items():
        flat = [flatten(x) for _w, items in lists for x in items if isinstance(x, dict)]
        fields = choose_fields(flat, pattern)
        if fields is None:
            continue
        score = sum(1 for f in flat if f.get(fields.text) and f.get(fields.speaker) not in (None, ""))
        if score >= 2 and (best is None or score > best[0]):
            best = (score, fields, lists)
    if best is None:
        return None
    _score, fields, lists = best
    people = side_loaded(root, {id(items) for _w, items in lists})
    out: list[Message] = []
    for where, items in lists:
        first = _first_message(root, where, fields) if where else None
        for k, item in enumerate(([first] if first else []) + list(items)):
            if isinstance(item, dict):
                line = lines[k] if lines is not None and len(lists) == 1 and k < len(lines) else 1
                out.append(_message(flatten(item), fields, people, where if len(lists) > 1 else "", line, item))
    return out, fields


def _message(flat: dict, f: Fields, people: dict, where: str, line: int, item: dict) -> Message:
    import orjson

    who = flat.get(f.speaker)
    who = "" if who is None else str(who)
    person = people.get(who, {})
    text = flat.get(f.text)
    role = role_of_value(_last(f.role), flat.get(f.role)) if f.role else ""
    role = role or person.get("role", "")
    chat = where or str(flat.get(f.chat) or "")
    if not chat and f.to and isinstance(flat.get(f.to), tuple):
        chat = " ".join(sorted({who, *map(str, flat[f.to])}))
    msg = Message(line, person.get("name") or who, clean_text(text) if isinstance(text, str) else "",
                  value_seconds(flat.get(f.time)) if f.time else None, chat, raw=orjson.dumps(item).decode())
    msg.role = role if role in ("agent", "customer") else ""
    msg.notice = role == "system" or not who or is_system_speaker(msg.speaker) or is_notice(msg.text) \
        or any(role_of_value(_last(k), v) == "system" for k, v in flat.items() if k.endswith("type"))
    msg.hidden = (bool(f.private) and flat.get(f.private) is True) or (bool(f.public) and flat.get(f.public) is False)
    return msg


def side_loaded(root: Any, message_lists: set[int]) -> dict[str, dict[str, str]]:
    """id → {name, role} from lists of people objects anywhere in the document."""
    people: dict[str, dict[str, str]] = {}
    for _p, _w, items in object_lists(root):
        if id(items) in message_lists:
            continue
        for x in items:
            if not isinstance(x, dict) or "id" not in x:
                continue
            name = next((v for k, v in x.items() if NAME_KEY.search(k) and isinstance(v, str) and v), "")
            role = next((r for k, v in x.items() if re.search(r"role|type", k, re.IGNORECASE)
                         for r in [role_of_value(k, v)] if r in ("agent", "customer")), "")
            if name or role:
                people[str(x["id"])] = {"name": name, "role": role}
    return people


def _first_message(root: Any, where: str, f: Fields) -> dict | None:
    """A message object beside the list's parents (`source` beside `conversation_parts`)."""
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", where)
    node, chain = root, []
    for p in parts:
        node = node[int(p[1:-1])] if p.startswith("[") else node.get(p) if isinstance(node, dict) else None
        if node is None:
            return None
        chain.append(node)
    on_path = {id(x) for x in chain}
    for parent in reversed(chain[:-1][-3:]):
        if isinstance(parent, dict):
            for v in parent.values():
                if isinstance(v, dict) and id(v) not in on_path:
                    flat = flatten(v)
                    if flat.get(f.text) and flat.get(f.speaker):
                        return v
    return None
