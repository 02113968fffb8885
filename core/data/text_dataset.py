"""A .txt file as LLaMA-Factory reads it: datasets' text builder makes a row of every line, in one column
`text`, which only a pre-training entry (`"columns": {"prompt": "text"}`, stage pt) reads. The rows come from
`reader.iter_text_rows`; this module decides which .txt files are such a dataset and how they are judged.

A .txt file is pre-training text when its dataset_info.json entry names it, when the person asks for the
pre-training kind, or when its lines carry no speaker tags; a chat log or Q&A text that is not registered
is left to `devtune data convert`, as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.data.findings import ERROR, INFO, Finding, finding
from core.data.records import FileProbe
from core.data.reader import TEXT_COLUMN
from core.data.schema import ALPACA, PRETRAIN, Schema
from core.data.speaker_tags import speaker_counts
from core.data.wording import convert_hint_paths
from core.i18n import _


@dataclass
class TextDataset:
    schema: Schema
    findings: list[Finding] = field(default_factory=list)


def text_schema(source: str = "detected") -> Schema:
    return Schema(kind=ALPACA, prompt=TEXT_COLUMN, query=None, response="output", task=PRETRAIN, text_file=True,
                  source=source)


def reads_text(entry_schema: Schema) -> bool:
    """Does this entry read a .txt file's rows: its prompt is the `text` column and nothing else is asked."""
    return entry_schema.kind == ALPACA and entry_schema.task == PRETRAIN and entry_schema.prompt == TEXT_COLUMN \
        and not (entry_schema.history or entry_schema.system or entry_schema.tools or entry_schema.media)


def text_dataset(probe: FileProbe, kind: str | None = None, use_entry: bool = True) -> TextDataset | None:
    """How to judge the plain text of a .txt file (`reader.is_text_file`); None for a chat log or Q&A text
    that is not registered (convert makes supervised rows of it)."""
    from core.data.dataset_entry import find_entry, schema_from_entry

    found = find_entry(probe.path) if use_entry else None
    out: list[Finding] = []
    if found is not None:
        entry = schema_from_entry(found.entry, found.name)
        if not reads_text(entry):
            out.append(finding("pretrain-text", 1, _(
                "L1: dataset_info.json entry {name} reads this file as {label}; LLaMA-Factory loads a .txt file "
                "as one \"text\" column, a row per line, which only \"columns\": {{\"prompt\": \"text\"}} reads "
                "(stage pt); register writes that entry", name=found.name, label=entry.kind_label), severity=ERROR))
        schema = text_schema(found.name)
    elif kind is None or kind == PRETRAIN:
        chat, qa = speaker_counts(probe.path, probe.encoding)
        if (chat or qa) and kind is None:
            return None
        schema = text_schema()
        src, dst = convert_hint_paths(probe.path)
        out.append(finding("pretrain-text", 1, _(
            "L1: plain text: LLaMA-Factory reads a .txt file as pre-training text (stage pt), a row per line; "
            "for a chat log or Q&A text, convert it to supervised rows: devtune data convert {file} -o {out}",
            file=src, out=dst), severity=INFO))
    else:
        schema = text_schema()
    if kind and kind != PRETRAIN:
        out.append(finding("pretrain-text", 1, _(
            "L1: LLaMA-Factory reads a .txt file as pre-training text only (a \"text\" column, a row per line); "
            "write the rows as JSON Lines for another kind"), severity=ERROR))
    return TextDataset(schema, out)
