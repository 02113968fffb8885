"""An Ollama Modelfile for a GGUF, from the chat template the GGUF carries.

Ollama formats a conversation with a Go template (TEMPLATE), not with the Jinja one embedded in the GGUF. The
Jinja template is taken apart by rendering it around a marker, one role at a time (what comes before and after
a system, user and assistant message; what the generation prompt adds), and put back together as a Go template
over `.Messages`. Each literal goes in a Go string constant (`{{ "..." }}`), so the template's own whitespace
trimming never touches the training format's newlines. The same pieces are joined in Python over the probe
conversations and compared with the Jinja rendering: a template that cannot be taken apart this way (one that
depends on a message's position beyond the first, or adds a default system prompt) is reported, not written
wrong.

The tokenizer's BOS is left out of TEMPLATE when the GGUF says llama.cpp adds it (tokenizer.ggml.add_bos_token),
as Ollama's own templates do: written twice, it would be a token the model never saw in training.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from core.errors import Refused
from core.merge.chat_template import PROBES, TemplateRenderError, probe_messages, render

MARK = "\x00devtune-content\x00"
ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class TemplatePieces:
    lead: str  # written once, before the first message (a BOS llama.cpp does not add)
    around: dict[str, tuple[str, str]]  # role -> (before the content, after it)
    generation: str  # what add_generation_prompt appends


class ModelfileError(Refused):
    """The chat template cannot be written as an Ollama template; the message says where it differs."""


def _strip_bos(text: str, bos: str) -> tuple[str, bool]:
    return (text[len(bos):], True) if bos and text.startswith(bos) else (text, False)


def template_pieces(template: str, *, bos_token: str = "", eos_token: str = "", add_bos: bool = True
                    ) -> TemplatePieces:
    tokens = {"bos_token": bos_token, "eos_token": eos_token}
    around: dict[str, tuple[str, str]] = {}
    lead = ""
    try:
        for role in ROLES:
            text = render(template, [{"role": role, "content": MARK}], add_generation_prompt=False, **tokens)
            if text.count(MARK) != 1:
                raise ModelfileError(f"the template does not write a {role} message's content once")
            text, had_bos = _strip_bos(text, bos_token)
            if had_bos and not add_bos:
                lead = bos_token
            before, after = text.split(MARK)
            around[role] = (before, after)
        user = [{"role": "user", "content": MARK}]
        closed = render(template, user, add_generation_prompt=False, **tokens)
        opened = render(template, user, add_generation_prompt=True, **tokens)
    except TemplateRenderError as exc:
        raise ModelfileError(str(exc)) from exc
    if not opened.startswith(closed):
        raise ModelfileError("the generation prompt is not appended after the conversation")
    pieces = TemplatePieces(lead, around, opened[len(closed):])
    _prove(template, pieces, tokens, add_bos)
    return pieces


def joined(pieces: TemplatePieces, messages: list[dict[str, str]]) -> str:
    """What the Go template (go_template) writes for `messages`, followed by the generation prompt."""
    body = "".join(pieces.around[m["role"]][0] + m["content"] + pieces.around[m["role"]][1] for m in messages)
    return pieces.lead + body + pieces.generation


def _prove(template: str, pieces: TemplatePieces, tokens: dict[str, str], add_bos: bool) -> None:
    for name, system, turns in PROBES:
        messages = probe_messages(system, turns)
        expected = render(template, messages, add_generation_prompt=True, **tokens)
        if add_bos:
            expected, _had = _strip_bos(expected, tokens["bos_token"])
        actual = joined(pieces, messages)
        if actual != expected:
            i = next((k for k, (a, b) in enumerate(zip(expected, actual)) if a != b), min(len(expected), len(actual)))
            raise ModelfileError(f"probe {name}: the Jinja template writes {expected[i:i + 40]!r} at character {i}, "
                                 f"its pieces {actual[i:i + 40]!r}")


def _go(text: str) -> str:
    """A Go template action printing `text` (a Go string literal: JSON's escapes are Go's)."""
    return "{{ " + json.dumps(text, ensure_ascii=False) + " }}" if text else ""


def go_template(pieces: TemplatePieces) -> str:
    lines = [_go(pieces.lead) + "{{- range .Messages }}"]
    for i, role in enumerate(ROLES):
        before, after = pieces.around[role]
        keyword = "if" if i == 0 else "else if"
        lines.append(f'{{{{- {keyword} eq .Role "{role}" }}}}{_go(before)}{{{{ .Content }}}}{_go(after)}')
    lines.append("{{- end }}")
    lines.append("{{- end }}" + _go(pieces.generation))
    return "\n".join(lines)


def modelfile_text(gguf_file: str, pieces: TemplatePieces, stop: list[str]) -> str:
    """The Modelfile: FROM the GGUF beside it, TEMPLATE, one PARAMETER stop per stop token."""
    template = go_template(pieces)
    if '"""' in template:
        raise ModelfileError('the template holds """, which a Modelfile cannot quote')
    out = [f"FROM ./{gguf_file}", "", f'TEMPLATE """{template}"""', ""]
    out += [f"PARAMETER stop {json.dumps(s, ensure_ascii=False)}" for s in dict.fromkeys(s for s in stop if s)]
    return "\n".join(out) + "\n"
