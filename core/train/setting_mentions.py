"""What a failure's message says about settings, read as language rather than matched as one message:

- the settings it names (`max_lora_rank`, `--max-lora-rank`, "tensor parallel size", `find_unused_parameters=True`,
  a quoted choice such as 'spawn'), resolved through the libraries' own index (core.train.knobs);
- the value it asks for: `name=value`, or a comparison it states ("64 is greater than max_lora_rank 16",
  "heads (28) must be divisible by tensor parallel size (8)", "X (N) must be at most M"), solved for the setting;
- two settings it says cannot go together ("Cannot specify `val_size` if `eval_dataset` is not None");
- the sentences in which the library itself says what to do ("you must use the 'spawn' start method",
  "Please use FORCE_TORCHRUN=1", "Try `pip install x`").

Nothing here knows a particular message; core.train.diagnosis_settings turns these readings into a diagnosis.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from core.train.knobs import Knob, exists, lookup, normal, with_choice

TICKED = re.compile(r"`([^`\s]{2,80})`|'([^'\s]{2,60})'|\"([^\"\s]{2,60})\"")
FLAGGED = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]+)")
IDENT = re.compile(r"\b([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+)\b")  # snake_case and UPPER_SNAKE
ASSIGN = re.compile(r"`?([A-Za-z_][\w.-]*)`?\s*=\s*`?([\w.'\"-]+)`?")
WORDS = re.compile(r"[A-Za-z][A-Za-z0-9]*")
NUM = r"\(?(\d[\d,]*)\)?"
# "<A> (N) is greater than <setting> (M)", "N exceeds the <setting> M": the setting must be at least N
GREATER = re.compile(NUM + r"\s+(?:is\s+|are\s+)?(?:greater|larger|bigger|more|higher)\s+than\s+(?:the\s+)?(.{0,60}?)"
                     + NUM + r"|" + NUM + r"\s+exceeds?\s+(?:the\s+)?(.{0,60}?)" + NUM, re.I)
DIVISIBLE = re.compile(NUM + r"\s+(?:must|should|has to|needs to)\s+be\s+divisible\s+by\s+(?:the\s+)?(.{0,60}?)" + NUM,
                       re.I)
# "<setting> (N) must be less than / at most / at least M"
BOUND = re.compile(r"(.{0,60}?)\s*" + NUM + r"\s+(?:must|should)\s+(?:be\s+)?(less than or equal to|less than|smaller than|"
                   r"at most|no more than|not exceed|greater than or equal to|at least|no less than)\s+(?:the\s+)?"
                   r"(?:[a-z_ ]{0,40}?)\s*" + NUM, re.I)
CONFLICT = re.compile(r"(?i)\b(?:cannot|can't|can not|could not|unable to|not allowed|not supported|incompatible|"
                      r"mutually exclusive|only one of|conflict|at the same time|together)\b")
ADVICE = re.compile(r"(?i)^(?:please|try|consider|you (?:can(?!'t|not)|may|should|must|need|might)|to (?:fix|use|enable|avoid|"
                    r"solve|resolve|support|run|disable)|make sure|ensure|set|use|pass|install|upgrade|downgrade|"
                    r"reduce|increase|decrease|lower|raise|enable|disable|specify|add|remove|did you mean|"
                    r"if you (?:want|are|need))\b|pip install|conda install")
GENERIC = {"model", "device", "dtype", "name", "path", "seed", "port", "host", "task", "config", "tokenizer",
           "revision", "input", "output", "data", "size", "type", "mode", "device_map", "input_ids", "labels"}


@dataclass
class Mention:
    text: str  # as the message writes it
    knobs: list[Knob]
    how: str  # name (its own spelling), phrase (words of its name), documented (named in its help), choice
    start: int = 0
    value: str | None = None  # `name=value` in the message, or the choice it names


@dataclass
class Reading:
    mentions: list[Mention] = field(default_factory=list)
    wanted: str | None = None  # the value the message's comparison asks for
    why: str | None = None  # the comparison, as the message states it
    options: list[int] = field(default_factory=list)  # other values that satisfy it (divisors)
    current: str | None = None  # the value the message says the setting has
    conflict: bool = False  # the message says the named settings cannot go together
    advice: list[str] = field(default_factory=list)


def sentences(message: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z`'\"(])|;\s+|\n+", message)
    return [p.strip() for p in parts if p.strip()]


def advice_of(message: str) -> list[str]:
    return [s for s in sentences(message) if ADVICE.search(s) and len(s) <= 300][:3]


def _owned(found: list[Knob], libs: set[str]) -> list[Knob]:
    """Of the settings a name can mean, those of the libraries this failure passed through (all, if none)."""
    mine = [k for k in found if k.lib in libs]
    return mine if libs else found


def mentions(message: str, libs: set[str]) -> list[Mention]:
    """The settings the message names, in the order it names them."""
    out: list[Mention] = []
    seen: set[str] = set()

    def add(text: str, start: int, how: str, value: str | None = None) -> None:
        key = normal(text)
        if key in seen or key in GENERIC or len(key) < 3:
            return
        if message[start + len(text):start + len(text) + 1] == "(" or message[start - 1:start] == ".":
            return  # a function or a method (`tokenizer.add_special_tokens({...})`), not a setting
        found = lookup(text)
        if how == "name" and found and not exists(text):
            how = "documented"  # the name is another library's argument, documented by this setting
        else:
            found = _owned(found, libs)
        if not found:
            return
        seen.add(key)
        out.append(Mention(text, found, how, start, value))

    for m in ASSIGN.finditer(message):
        add(m.group(1), m.start(), "name", m.group(2).strip("'\""))
    for m in FLAGGED.finditer(message):
        add(m.group(1), m.start(), "name")
    for m in TICKED.finditer(message):
        group = next(i for i, g in enumerate(m.groups(), 1) if g)
        word = m.group(group)
        if re.fullmatch(r"[\w.-]+", word):
            add(word, m.start(group), "name")
    for m in IDENT.finditer(message):
        add(m.group(1), m.start(), "name")
    words = [(w.group(0), w.start()) for w in WORDS.finditer(message)]
    for n in (5, 4, 3, 2):
        for i in range(len(words) - n + 1):
            phrase = " ".join(w for w, _s in words[i:i + n])
            if normal(phrase) not in seen and exists(phrase) and not any(
                    m.start <= words[i][1] < m.start + len(m.text) + 40 and normal(phrase) in normal(m.text)
                    for m in out):
                add(phrase, words[i][1], "phrase")
    if not out:  # a quoted value that is a declared choice of a setting of these libraries ('spawn')
        for m in TICKED.finditer(message):
            word = next(g for g in m.groups() if g)
            choices = with_choice(word, libs) if libs else []
            if len(choices) == 1:
                out.append(Mention(word, choices, "choice", m.start(), word))
    out.sort(key=lambda m: m.start)
    return out


def _num(text: str) -> int:
    return int(text.replace(",", ""))


def _near(found: list[Mention], text: str) -> Mention | None:
    """The mention this stretch of the message names (the setting written between a comparison's words)."""
    low = normal(text)
    for m in sorted(found, key=lambda m: -len(normal(m.text))):
        if normal(m.text) in low or low.endswith(normal(m.text)):
            return m
    return None


def read(message: str, libs: set[str]) -> Reading:
    found = mentions(message, libs)
    reading = Reading(found, advice=advice_of(message))
    if not found:
        return reading
    for m in GREATER.finditer(message):
        need, between, have = (m.group(1), m.group(2), m.group(3)) if m.group(1) else (m.group(4), m.group(5),
                                                                                          m.group(6))
        target = _near(found, between)
        if target is not None:
            _move_first(found, target)
            reading.wanted, reading.current = _at_least(_num(need), target.knobs[0]), have
            reading.why = m.group(0).strip().lstrip("(")
            return reading
    for m in DIVISIBLE.finditer(message):
        target = _near(found, m.group(2))
        if target is not None:
            whole, have = _num(m.group(1)), _num(m.group(3))
            _move_first(found, target)
            divisors = [d for d in range(have - 1, 0, -1) if whole % d == 0]
            common = math.gcd(whole, have)
            reading.wanted = str(common if common > 1 else (divisors[0] if divisors else 1))
            reading.options, reading.current = divisors, str(have)
            reading.why = _whole_clause(message, m.start())
            return reading
    for m in BOUND.finditer(message):
        target = _near(found, m.group(1))
        if target is not None:
            _move_first(found, target)
            reading.current, reading.wanted, reading.why = m.group(2), str(_num(m.group(4))), m.group(0).strip()
            return reading
    named = {normal(m.text) for m in found if m.how in ("name", "documented")}
    reading.conflict = len(named) >= 2 and bool(CONFLICT.search(message))
    return reading


def _whole_clause(message: str, start: int) -> str:
    """The sentence a comparison is in, from its start ("Total number of attention heads (28) must be ...")."""
    begin = max(message.rfind(". ", 0, start) + 2, 0) if message.rfind(". ", 0, start) >= 0 else 0
    end = message.find(". ", start)
    return message[begin:end if end >= 0 else len(message)].strip().rstrip(".")


def _move_first(found: list[Mention], target: Mention) -> None:
    found.remove(target)
    found.insert(0, target)


def _at_least(need: int, knob: Knob) -> str:
    """The smallest value at least `need` that the setting accepts (its declared choices, when it has them)."""
    numeric = sorted(int(c) for c in knob.choices if c.isdigit())
    return str(next((c for c in numeric if c >= need), need))
