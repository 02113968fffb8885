"""Exact token counts with the model's tokenizer (opt-in, `lint --tokenizer PATH`).

A `tokenizer.json` is read with the `tokenizers` library alone (fast, no transformers import); other
tokenizers go through `transformers.AutoTokenizer`. Rows are encoded in batches; each row counts its
prompt and output plus the chat template's overhead, and rows over `cutoff_len` are findings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from core.errors import Unavailable
from core.data.findings import Finding
from core.data.lint_progress import LintProgress
from core.data.reader import FileProbe, ReadNotes, iter_records
from core.data.scan import too_long
from core.data.row_rules import check_row
from core.data.schema import PRETRAIN, Schema
from core.data.stats import TEMPLATE_OVERHEAD, Histogram
from core.i18n import _

BATCH = 512


class TokenizerError(Unavailable):
    """The tokenizer could not be loaded (message says which path and why)."""


@dataclass
class TokenCount:
    histogram: Histogram
    findings: list[Finding] = field(default_factory=list)


def load_encoder(path: str) -> Callable[[list[str]], list[int]]:
    """A function that returns the token count of each text."""
    p = Path(path).expanduser()
    if not p.exists():
        raise TokenizerError(_("tokenizer {path} not found; give a model folder or a tokenizer.json", path=path))
    file = p / "tokenizer.json" if p.is_dir() else p
    if file.name.endswith(".json") and file.is_file():
        try:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(file))
            return lambda texts: [len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)]
        except Exception as exc:  # a broken file: say so rather than crash
            raise TokenizerError(_("cannot read tokenizer {path}: {error}", path=str(file), error=exc)) from exc
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(p), trust_remote_code=False)
    except Exception as exc:
        raise TokenizerError(_("cannot load a tokenizer from {path}: {error}", path=str(p), error=exc)) from exc
    return lambda texts: [len(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"]]


def count_tokens(probe: FileProbe, schema: Schema, tokenizer: str, cutoff_len: int,
                 progress: Callable | None = None) -> TokenCount:
    import orjson

    from core.data.json_repair import diagnose

    encode = load_encoder(tokenizer)
    result = TokenCount(Histogram())
    text_batch: list[str] = []
    line_batch: list[int] = []

    def flush() -> None:
        for line, n in zip(line_batch, encode(text_batch)):
            tokens = n + TEMPLATE_OVERHEAD
            result.histogram.add(tokens)
            if tokens > cutoff_len:
                result.findings.append(too_long(line, tokens, cutoff_len, schema.task == PRETRAIN, estimated=False))
        text_batch.clear()
        line_batch.clear()

    for n, rec in enumerate(iter_records(probe, ReadNotes())):
        try:
            values = [orjson.loads(rec.raw)]
        except orjson.JSONDecodeError:
            values = diagnose(rec.raw, rec.line).values
        for value in values:
            view = check_row(value, rec.line, schema, [])
            if view is None:
                continue
            parts = [x for x in view.prompt if isinstance(x, str) and x] + [view.output]
            text_batch.append("\n".join(parts))
            line_batch.append(rec.line)
        if len(text_batch) >= BATCH:
            flush()
            if progress:
                progress(LintProgress("tokens", n, 0))
    if text_batch:
        flush()
    return result
