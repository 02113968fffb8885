"""A config the tool's own schema rejected (pydantic's ValidationError, core.train.validation_errors): the field,
what the schema wants, what the config gave, and the edit that fixes it.

axolotl, vLLM's engine arguments, eole, ms-swift and many others check their config with pydantic before a run
starts; whatever the tool, the block names the field (`pretraining_dataset`, `data.corpus_1.src_lang`), the
error type (`list_type`, `missing`, `extra_forbidden`, `literal_error`, `int_parsing`) and the value given. The
fix follows from the error type, not from the tool: write the mapping as a list, add the required key, remove or
move a key this release does not have, pick one of the listed values, drop the quotes around a number. A
validator's own sentence (vLLM's `Value error, rope_scaling should have a 'rope_type' key`) is no field error:
it is the root's message, and the other families read it there.
"""

from __future__ import annotations

import re

from core.i18n import _
from core.train import log_facts
from core.train.diagnosis_families import FamilyFinding
from core.train.root_cause import PREFIX, WORKER
from core.train.validation_errors import HEADER, FieldError, read_field_errors

_WANTED = re.compile(r"Input should be (?:a valid |an? |greater|less)?(\w+)")
_FLAG = re.compile(r"argument (--[\w-]+)")
_CONFIG = re.compile(r"(?<![\w/.-])([\w./~-]+\.(?:ya?ml|json|toml))\b")
_SCALARS = ("integer", "number", "float", "boolean", "string")


def _scalar(wanted: str) -> str:
    if wanted == "integer":
        return _("an integer")
    if wanted == "boolean":
        return _("true or false")
    return _("a string") if wanted == "string" else _("a number")


def _strip(line: str) -> str:
    m = PREFIX.match(line)
    text = line[m.end():] if m else line
    w = WORKER.match(text)
    return text[w.end():] if w else text


def field_errors_of(root: str, log_text: str) -> tuple[list[FieldError], str]:
    """The errors under the root's `N validation errors for Model` line, and that line as the log printed it."""
    h = HEADER.search(root)
    if h is None:
        return [], ""
    lines = [_strip(t) for t in log_text.splitlines()]
    for i, text in enumerate(lines):
        if h.group(0) in text:
            return read_field_errors(text[text.index(h.group(0)):], lines[i + 1: i + 200]), text
    return [], ""


def _where(error: FieldError, header: str, log_text: str) -> str:
    """The field as the person wrote it: a command-line flag when the command (or argparse's line) has it."""
    flag = _FLAG.search(header)
    if flag:
        return flag.group(1)
    leaf = error.loc.rsplit(".", 1)[-1]
    for form in (f"--{leaf.replace('_', '-')}", f"--{leaf}"):
        if re.search(re.escape(form) + r"(?![\w-])", log_text):
            return form
    return error.loc


def _fix(e: FieldError, where: str) -> str:
    w = _WANTED.search(e.message)
    wanted = w.group(1).lower() if w else ""
    given = f"{e.value_type} {e.value}".strip()
    kind = e.kind
    if kind in ("missing", "value_error.missing"):
        return _("Add `{field}` to the config: {model} requires it.", field=where, model=e.model)
    if kind in ("extra_forbidden", "value_error.extra", "unexpected_keyword_argument"):
        return _("Remove `{field}` from the config, or correct its name or its place: {model} of this release has "
                 "no such setting (a misspelling, or a setting renamed or moved to another section; compare with "
                 "this release's examples).", field=where, model=e.model)
    if kind in ("literal_error", "enum") or kind.startswith("type_error.enum"):
        return _("Set `{field}` to one of the values the message lists ({message}); it is {given}.", field=where,
                 message=e.message, given=given)
    if wanted == "list" and e.value_type in ("dict", "DictConfig"):
        return _("Write `{field}` as a YAML list: put `- ` before its first key, so that the mapping becomes the "
                 "list's one item.", field=where)
    if wanted in ("dictionary", "object", "mapping") or kind in ("dict_type", "model_type", "dataclass_type"):
        return _("Write `{field}` as a mapping of keys and values (on a command line as JSON, "
                 "`'{{\"key\": value}}'`); it is {given}.", field=where, given=given)
    if wanted in _SCALARS or kind.endswith(("_parsing", "_type")):
        return _("Set `{field}` to {wanted} (it is {given}): no quotes around a number or true/false, no units.",
                 field=where, wanted=_scalar(wanted) if wanted in _SCALARS else wanted, given=given)
    return _("Change `{field}` in the config so that: {message} (it is {given}).", field=where, message=e.message,
             given=given)


def validation_finding(root: str, log_text: str) -> FamilyFinding | None:
    errors, header = field_errors_of(root, log_text)
    fields = [e for e in errors if not e.own_message and e.loc]
    if not fields:
        return None  # no field named: the validator's own sentence is the root's message
    first = fields[0]
    where = _where(first, header, log_text)
    facts = [f"{e.model}: {e.loc}: {e.printed}" for e in fields[:8]]
    config = next((m.group(1) for c in reversed(log_facts.shell_commands(log_text)) if (m := _CONFIG.search(c.command))),
                  None)
    if config:
        facts.append(_("the config the command read: {path}", path=config))
    if len(fields) > 1 and all(e.kind == first.kind for e in fields):
        title = _("{model} rejects {count} settings of the config ({kind}), first `{field}`", model=first.model,
                  count=len(fields), kind=first.kind, field=where)
    else:
        title = _("{model} rejects `{field}` of the config: {message}", model=first.model, field=where,
                  message=first.message)
    explanation = _("The tool checks its config against its schema (pydantic) before it runs, and names each field "
                    "that does not fit, what it wants and what it was given: the config, not the model or the "
                    "machine, is what to change.")
    return FamilyFinding("config-field-rejected", title, explanation, _fix(first, where), [], facts, own_cause=True)
