"""A model folder's chat template, rendered as transformers and vLLM render it (jinja2, sandboxed,
`trim_blocks` + `lstrip_blocks`, the `tojson` / `raise_exception` / `strftime_now` helpers, the
`{% generation %}` tag), and the probe conversations that compare it with LLaMA-Factory's template.

transformers >= 5 saves the template as `chat_template.jinja`; older ones put it in
`tokenizer_config.json` ("chat_template": a string, or a list of named templates) or
`chat_template.json`. All three are read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from core.errors import BadInput

# Conversations whose prompt (up to the assistant's turn) both sides render; contents carry no
# leading or trailing spaces (Meta's llama3 template trims them, LLaMA-Factory's does not).
PROBES: tuple[tuple[str, str, list[dict[str, str]]], ...] = (
    ("with-system", "You are a support agent.", [
        {"role": "user", "content": "How do I reset my password?"},
        {"role": "assistant", "content": "Click \"Forgot password\" on the login page."},
        {"role": "user", "content": "退款多久到账？"},
    ]),
    ("no-system", "", [
        {"role": "user", "content": "Hello?"},
    ]),
)


@dataclass(frozen=True)
class TemplateSource:
    text: str | None
    file: str | None  # where it was found, None when the folder has no chat template


def read_chat_template(model_dir: Path) -> TemplateSource:
    model_dir = Path(model_dir)
    jinja = model_dir / "chat_template.jinja"
    if jinja.is_file():
        return TemplateSource(jinja.read_text(encoding="utf-8"), jinja.name)
    for name in ("chat_template.json", "tokenizer_config.json"):
        try:
            data = json.loads((model_dir / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        value = data.get("chat_template") if isinstance(data, dict) else None
        if isinstance(value, list):  # [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
            named = {v.get("name"): v.get("template") for v in value if isinstance(v, dict)}
            value = named.get("default") or next(iter(named.values()), None)
        if isinstance(value, str) and value:
            return TemplateSource(value, name)
    return TemplateSource(None, None)


def _token_text(value) -> str:
    if isinstance(value, dict):
        return str(value.get("content", ""))
    return "" if value is None else str(value)


def special_tokens(model_dir: Path) -> dict[str, str]:
    """bos_token and eos_token as the tokenizer files name them (strings or AddedToken dicts)."""
    out = {"bos_token": "", "eos_token": ""}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        try:
            data = json.loads((Path(model_dir) / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for key in out:
            if data.get(key) is not None:
                out[key] = _token_text(data[key])
    return out


def _environment():
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationTag(Extension):
        """`{% generation %}...{% endgeneration %}` (assistant-mask markers): rendered as its body."""

        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


class TemplateRenderError(BadInput):
    pass


def render(template: str, messages: list[dict[str, str]], *, add_generation_prompt: bool = True,
           bos_token: str = "", eos_token: str = "") -> str:
    import jinja2

    try:
        compiled = _environment().from_string(template)
        return compiled.render(messages=messages, add_generation_prompt=add_generation_prompt,
                               bos_token=bos_token, eos_token=eos_token, tools=None, documents=None)
    except jinja2.exceptions.TemplateError as exc:
        raise TemplateRenderError(str(exc)) from exc


def probe_messages(system: str, turns: list[dict[str, str]]) -> list[dict[str, str]]:
    return ([{"role": "system", "content": system}] if system else []) + list(turns)


def render_probes(template: str, tokens: dict[str, str]) -> dict[str, str]:
    return {name: render(template, probe_messages(system, turns), **tokens) for name, system, turns in PROBES}


@dataclass(frozen=True)
class Difference:
    probe: str
    index: int  # first differing character
    expected: str  # LLaMA-Factory's text around it (what training saw)
    actual: str  # the chat template's text around it (what a server will send)


def first_difference(probe: str, expected: str, actual: str, context: int = 40) -> Difference | None:
    if expected == actual:
        return None
    i = 0
    for i, (a, b) in enumerate(zip(expected, actual)):  # noqa: B007 (i is read after the loop)
        if a != b:
            break
    else:
        i = min(len(expected), len(actual))
    for text in (expected, actual):  # report a special token (<|...|>) from its start, not from its middle
        opened = text.rfind("<|", 0, i + 1)
        if opened != -1 and text.find("|>", opened, i) == -1 and text.startswith(expected[opened:i], opened):
            i = min(i, opened)
    start = max(0, i - context // 2)
    return Difference(probe, i, expected[start:i + context], actual[start:i + context])
