"""pydantic's ValidationError as a log printed it: which field of which model, what it wanted, what it was given.

    pydantic_core._pydantic_core.ValidationError: 1 validation error for AxolotlConfigWCapabilities
    pretraining_dataset
      Input should be a valid list [type=list_type, input_value={'path': 'c4'}, input_type=dict]
        For further information visit https://errors.pydantic.dev/2.6/v/list_type

    read_field_errors(header_line, following_lines) -> [FieldError(model, loc, message, kind, value, value_type)]

pydantic 2 (`[type=..., input_value=..., input_type=...]`) and 1 (`(type=value_error.missing)`); a block
flattened onto one line (an issue's copy: fields separated by runs of spaces); a blank line between a field and
its message; a model-level error with no field (vLLM's `Value error, <the tool's own sentence>`). Tools that
check their config with pydantic (axolotl, vLLM's engine arguments, eole, ms-swift) all print this shape, so the
field to change is read from it whatever the tool.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEADER = re.compile(r"\b(\d+) validation errors? for (\w[\w.]*)")
_V2 = re.compile(r"^(?P<msg>.*?)\s*\[type=(?P<kind>[\w.]+)(?:, input_value=(?P<value>.*?))?"
                 r"(?:, input_type=(?P<vtype>\w+))?\]$")
_V1 = re.compile(r"^(?P<msg>.*?)\s*\(type=(?P<kind>[\w.]+)(?:;[^)]*)?\)$")
_LOC = re.compile(r"^[\w`'\"\[\]<>-]+(?:(?:\.|\s->\s)[\w`'\"\[\]<>-]+)*$")  # a.b.0.c, v1's `a -> b`
_INFO = "For further information visit"
MODEL_LEVEL = ("value_error", "assertion_error", "model_type", "dataclass_args_type")  # the tool's own message


@dataclass(frozen=True)
class FieldError:
    model: str
    loc: str  # "" for an error of the whole model
    message: str
    kind: str  # pydantic's error type: list_type, missing, extra_forbidden, literal_error, value_error, ...
    value: str = ""
    value_type: str = ""
    printed: str = ""  # the message's line as the log printed it

    @property
    def own_message(self) -> bool:
        """The tool's own sentence (a validator's ValueError), not pydantic's wording about a field's type."""
        return self.kind in MODEL_LEVEL or self.kind.startswith("value_error") and self.kind != "value_error.missing"

    def short(self) -> str:
        given = f" (given {self.value_type} {_clip(self.value)})" if self.value_type and not self.own_message else ""
        return f"{self.loc}: {self.message}{given}" if self.loc else f"{self.message}{given}"


def _clip(value: str, most: int = 60) -> str:
    return value if len(value) <= most else value[: most - 3] + "..."


def read_field_errors(header: str, after: list[str]) -> list[FieldError]:
    """The errors listed under a `N validation errors for Model` line (`after`: the lines that followed, with
    any rank or logger prefix already taken off), at most N."""
    m = HEADER.search(header)
    if m is None:
        return []
    count, model = int(m.group(1)), m.group(2)
    rest = header[m.end():].strip()
    lines = [p for p in re.split(r"\s{2,}", rest) if p] + after if rest else after
    found: list[FieldError] = []
    loc = ""
    for line in lines[: 6 * count + 8]:
        text = line.strip()
        if not text or text.startswith(_INFO):
            continue
        e = _V2.match(text) or _V1.match(text)
        if e is not None:
            message = re.sub(r"^(?:Value|Assertion) error, ", "", e.group("msg"))
            found.append(FieldError(model, loc, message, e.group("kind"), (e.groupdict().get("value") or "").strip(),
                                    e.groupdict().get("vtype") or "", text))
            loc = ""
            if len(found) == count:
                break
        elif _LOC.match(text) and not loc:
            loc = text.replace(" -> ", ".")
        else:
            break  # the block ended (a log line, the next traceback)
    return found


def summary(errors: list[FieldError], most: int = 3) -> str:
    """`loc: message (given type value)`, the first few; the count of the others."""
    text = "; ".join(e.short() for e in errors[:most])
    return text + (f"; ... (+{len(errors) - most})" if len(errors) > most else "")
