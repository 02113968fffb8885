"""The prompts of `data synth`, as files the person reads and edits.

devtune ships `questions.md` and `answer.md` (package data, beside this module). On first use they are copied
into the workspace's `configs/synth/`; from then on the workspace's copies are what is sent, so an edit there
changes the next run (and, because a request's journal key includes the prompt's text, an edited prompt is
sent again rather than answered from the journal). Placeholders are `{{name}}`: `chunk`, `heading`,
`document`, `language`, `n` (questions) and `question` (answer); any other `{{...}}` is an error naming the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from core.errors import BadInput
from core.files.atomic import write_new
from core.i18n import _

SHIPPED = Path(__file__).with_name("prompts")
NAMES = ("questions", "answer")
PLACEHOLDERS = {"questions": {"chunk", "heading", "document", "language", "n"},
                "answer": {"chunk", "heading", "document", "language", "question"}}
LANGUAGE_NAMES = {"zh": "Simplified Chinese (简体中文)", "en": "English"}
_FIELD = re.compile(r"\{\{\s*(\w+)\s*\}\}")


class PromptError(BadInput):
    """A prompt file is missing or uses a placeholder devtune does not fill."""


@dataclass(frozen=True)
class Prompts:
    questions: str
    answer: str
    folder: str  # where they were read from

    def render(self, name: str, **values) -> str:
        template = self.questions if name == "questions" else self.answer
        return _FIELD.sub(lambda m: str(values.get(m.group(1), "")), template)


def prompt_folder(configs_dir: Path) -> Path:
    return configs_dir / "synth"


def ensure_prompts(configs_dir: Path) -> Path:
    """Copy the shipped prompts into `configs/synth/` where they are missing (an existing file is kept)."""
    folder = prompt_folder(configs_dir)
    for name in NAMES:
        target = folder / f"{name}.md"
        if not target.exists():
            write_new(target, (SHIPPED / f"{name}.md").read_text(encoding="utf-8"))
    return folder


def load_prompts(folder: Path) -> Prompts:
    texts = {}
    for name in NAMES:
        path = folder / f"{name}.md"
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise PromptError(_("{path} is missing; delete the folder {folder} and devtune writes the shipped "
                                "prompts again", path=path, folder=folder)) from exc
        unknown = sorted({m.group(1) for m in _FIELD.finditer(text)} - PLACEHOLDERS[name])
        if unknown:
            raise PromptError(_("{path} uses {fields}, which devtune does not fill; it fills {known}", path=path,
                                fields=", ".join("{{" + u + "}}" for u in unknown),
                                known=", ".join("{{" + k + "}}" for k in sorted(PLACEHOLDERS[name]))))
        if "{{chunk}}" not in text.replace(" ", ""):
            raise PromptError(_("{path} never shows the model the chunk: put {{chunk}} where it goes", path=path))
        texts[name] = text
    return Prompts(texts["questions"], texts["answer"], str(folder))


def workspace_prompts(configs_dir: Path) -> Prompts:
    return load_prompts(ensure_prompts(configs_dir))
