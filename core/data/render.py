"""A row as the prompt a chat template renders it: what the model will actually be trained on.

`render_row(value, schema, "llama3")` uses a built-in renderer for the common templates (llama3, qwen,
qwen3_nothink, chatml, alpaca, default, empty: copied from LLaMA-Factory's `data/template.py`), fast
and without importing LLaMA-Factory. `render_with_llamafactory` runs LLaMA-Factory's own Template on the
same messages with a tokenizer stand-in that keeps text as text (any of its ~120 templates; importing it
takes seconds, so callers run it in a worker).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from core.data.schema import ALPACA, PREFERENCE, PRETRAIN, SUPERVISED, Schema
from core.i18n import _

EOS = "<eos>"
BOS = "<bos>"


@dataclass(frozen=True)
class BuiltinTemplate:
    user: str
    assistant: str
    system: str = "{content}"
    prefix: str = ""
    default_system: str = ""


_CHATML_USER = "<|im_start|>user\n{content}<|im_end|>\n<|im_start|>assistant\n"
_CHATML = dict(user=_CHATML_USER, assistant="{content}<|im_end|>\n", system="<|im_start|>system\n{content}<|im_end|>\n")
BUILTIN: dict[str, BuiltinTemplate] = {
    "llama3": BuiltinTemplate(
        user="<|start_header_id|>user<|end_header_id|>\n\n{content}<|eot_id|>"
             "<|start_header_id|>assistant<|end_header_id|>\n\n",
        assistant="{content}<|eot_id|>",
        system="<|start_header_id|>system<|end_header_id|>\n\n{content}<|eot_id|>",
        prefix="<|begin_of_text|>"),
    "qwen": BuiltinTemplate(**_CHATML, default_system="You are Qwen, created by Alibaba Cloud. You are a helpful "
                                                      "assistant."),
    "qwen3_nothink": BuiltinTemplate(**_CHATML),
    "chatml": BuiltinTemplate(**_CHATML),
    "alpaca": BuiltinTemplate(
        user="### Instruction:\n{content}\n\n### Response:\n", assistant="{content}" + EOS + "\n\n",
        default_system="Below is an instruction that describes a task. Write a response that appropriately "
                       "completes the request.\n\n"),
    "default": BuiltinTemplate(user="Human: {content}" + EOS + "\nAssistant:", assistant="{content}" + EOS + "\n",
                               system="System: {content}" + EOS + "\n"),
    "empty": BuiltinTemplate(user="{content}", assistant="{content}"),
}
TEMPLATE_NAMES = tuple(BUILTIN)


def _answer(value: dict, schema: Schema, key: str | None) -> dict[str, str]:
    """A preference row's chosen / rejected answer as an assistant message."""
    answer = value.get(key or "")
    if isinstance(answer, dict):
        answer = answer.get(schema.content_tag, "")
    return {"role": "assistant", "content": answer if isinstance(answer, str) else ""}


def row_messages(value: Any, schema: Schema, answer: str = "chosen") -> tuple[str, list[dict[str, str]]]:
    """(system, messages) the way LLaMA-Factory's converters build them from a row; for a preference row
    the prompt with its `answer` ("chosen" or "rejected"); for pre-training text, the text alone."""
    if not isinstance(value, dict):
        return "", []
    if schema.task == PRETRAIN:
        text = value.get(schema.prompt)
        return "", [{"role": "user", "content": text if isinstance(text, str) else ""}]
    if schema.task == PREFERENCE:
        key = schema.chosen if answer == "chosen" else schema.rejected
        plain = replace(schema, task=SUPERVISED, chosen=None, rejected=None)
        if schema.kind == ALPACA:
            system, msgs = row_messages({**value, plain.response: None}, plain)
            return system, msgs[:-1] + [_answer(value, schema, key)]
        system, msgs = row_messages(value, plain)
        return system, msgs + [_answer(value, schema, key)]
    if schema.kind == ALPACA:
        msgs: list[dict[str, str]] = []
        history = value.get(schema.history or "history")
        if isinstance(history, list):
            for pair in history:
                if isinstance(pair, list) and len(pair) == 2:
                    msgs += [{"role": "user", "content": str(pair[0])}, {"role": "assistant", "content": str(pair[1])}]
        query = [str(value[k]) for k in (schema.prompt, schema.query) if k and value.get(k)]
        msgs.append({"role": "user", "content": "\n".join(query)})
        out = value.get(schema.response)
        msgs.append({"role": "assistant", "content": out if isinstance(out, str) else ""})
        system = value.get(schema.system or "system", "")
        return (system if isinstance(system, str) else ""), msgs
    turns = value.get(schema.messages)
    system = ""
    msgs = []
    roles = {schema.user_tag: "user", schema.assistant_tag: "assistant", "human": "user", "gpt": "assistant",
             "user": "user", "assistant": "assistant"}
    for t in turns if isinstance(turns, list) else []:
        if not isinstance(t, dict):
            continue
        role = t.get(schema.role_tag)
        if role == schema.system_tag and not msgs:
            system = str(t.get(schema.content_tag, ""))
            continue
        msgs.append({"role": roles.get(role, "user"), "content": str(t.get(schema.content_tag, ""))})
    return system, msgs


def render_messages(system: str, messages: list[dict[str, str]], template: str) -> str:
    t = BUILTIN[template]
    system = system or t.default_system
    out = [t.prefix]
    for i, m in enumerate(messages):
        if i == 0 and system:
            out.append(t.system.format(content=system))
        fmt = t.user if m["role"] == "user" else t.assistant
        out.append(fmt.replace("{content}", m["content"]))
    return "".join(out)


def render_row(value: Any, schema: Schema, template: str) -> str:
    """The row rendered by a built-in template (KeyError for a template that is not built in)."""
    if schema.task == PREFERENCE:
        chosen = render_messages(*row_messages(value, schema, "chosen"), template)
        rejected = render_messages(*row_messages(value, schema, "rejected"), template)
        return f"{_('── chosen ──')}\n{chosen}\n{_('── rejected ──')}\n{rejected}"
    if schema.task == PRETRAIN:
        text = value.get(schema.prompt) if isinstance(value, dict) else None
        return text if isinstance(text, str) else ""  # LLaMA-Factory trains on the text as it is (+ eos)
    system, msgs = row_messages(value, schema)
    return render_messages(system, msgs, template)


class _TextTokenizer:
    """Stands in for a tokenizer: 'encodes' text to itself so a Template's output can be read."""

    def __init__(self, bos: str, eos: str) -> None:
        self.bos_token_id = bos
        self.eos_token_id = eos

    def encode(self, text: str, add_special_tokens: bool = False) -> list[str]:
        return [text]

    def convert_tokens_to_ids(self, token: str) -> str:
        return token


def llamafactory_templates() -> list[str]:
    from llamafactory.data.template import TEMPLATES

    return sorted(TEMPLATES)


def render_with_llamafactory(value: Any, schema: Schema, template: str, bos: str = BOS, eos: str = EOS) -> str:
    """The row rendered by LLaMA-Factory's own Template (imports llamafactory: seconds)."""
    from llamafactory.data.template import TEMPLATES

    if template not in TEMPLATES:
        raise KeyError(template)
    t = TEMPLATES[template]
    if t.replace_eos and t.stop_words:
        eos = t.stop_words[0]
    system, msgs = row_messages(value, schema)
    if not msgs:
        return ""
    pairs = t.encode_multiturn(_TextTokenizer(bos, eos), msgs, system or None, None)
    return "".join("".join(p) + "".join(r) for p, r in pairs)
