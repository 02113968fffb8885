"""From a registered dataset's rows to the questions `devtune eval` and `devtune verify` ask: one reader of rows
as LLaMA-Factory reads them, and which rows are asked.

- Rows: alpaca rows give instruction + "\\n" + input (LLaMA-Factory's join) and expect `output`, with
  `history` as prior turns; sharegpt / openai rows give the turns before the last assistant message and
  expect that message. The entry (its file, formatting, columns and tags) comes from dataset_info.json
  through core.data.dataset_info, the one reader of that file.
- `devtune eval` asks every row of the held-out set (`N_eval`, registered beside `N` by `devtune data register
  FILE --name N --holdout F`, found through core.data.holdout) and a seeded sample of `--train-sample K`
  training rows of `N`. Without a held-out set the training sample is still asked, and the report says how to
  make one.
- `devtune verify` asks `--n` rows spread evenly over the run's training data and its eval_dataset
  (core.serve.verify's `run_questions`, through `pick`).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import BadInput
from core.i18n import _
from core.workspace.layout import Workspace

HELDOUT, TRAIN = "heldout", "train"
DEFAULT_TRAIN_SAMPLE = 20


class QuestionsError(BadInput):
    """A dataset's rows cannot be read as questions (not registered, not a local file, a row that is not JSON,
    an unreadable dataset_info.json); the message names the file and what to do."""


class EvalInputError(BadInput):
    """The dataset or the servers to evaluate cannot be used; the message says what to do (exit 2)."""


@dataclass
class Question:
    prompt: str
    expected: str
    history: list[tuple[str, str]] = field(default_factory=list)
    system: str = ""
    split: str = TRAIN  # the set it is asked as: train | heldout (eval) | held-out (verify)
    source: str = ""  # dataset name and row number


# ---------------------------------------------------------------- rows as LLaMA-Factory reads them

def _rows(path: Path) -> list[dict]:
    files = sorted(p for p in path.rglob("*") if p.suffix in (".json", ".jsonl")) if path.is_dir() else [path]
    rows: list[dict] = []
    for f in files:
        text = f.read_text(encoding="utf-8-sig")
        if f.suffix == ".jsonl":
            for n, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except ValueError as exc:
                        raise QuestionsError(_("{file}:{line} is not valid JSON ({error}); `devtune data lint` "
                                            "finds and fixes such lines", file=f.name, line=n, error=str(exc))) from exc
        else:
            try:
                data = json.loads(text)
            except ValueError as exc:
                raise QuestionsError(_("{file} is not valid JSON: {error}", file=f.name, error=str(exc))) from exc
            rows += data if isinstance(data, list) else [data]
    return [r for r in rows if isinstance(r, dict)]


def _alpaca(row: dict, cols: dict) -> tuple[str, str, list, str] | None:
    parts = [str(row.get(cols.get("prompt", "instruction")) or ""), str(row.get(cols.get("query", "input")) or "")]
    prompt = "\n".join(p for p in parts if p)
    expected = row.get(cols.get("response", "output"))
    if isinstance(expected, list):  # ranking data: the chosen answer first
        expected = expected[0] if expected else None
    if not prompt or not isinstance(expected, str):
        return None
    history = []
    raw = row.get(cols["history"]) if cols.get("history") else None
    for pair in raw if isinstance(raw, list) else []:
        if isinstance(pair, (list, tuple)) and len(pair) == 2:
            history.append((str(pair[0]), str(pair[1])))
    return prompt, expected, history, str(row.get(cols.get("system", "system")) or "")


def _conversation(row: dict, cols: dict, tags: dict, formatting: str) -> tuple[str, str, list, str] | None:
    openai = formatting == "openai"
    key = cols.get("messages") or ("messages" if openai else "conversations")
    turns = row.get(key) or row.get("messages") or row.get("conversations")
    if not isinstance(turns, list):
        return None
    role = tags.get("role_tag", "role" if openai else "from")
    content = tags.get("content_tag", "content" if openai else "value")
    user, assistant = tags.get("user_tag", "user" if openai else "human"), tags.get("assistant_tag",
                                                                                     "assistant" if openai else "gpt")
    system_tag = tags.get("system_tag", "system")
    system = str(row.get(cols.get("system", "system")) or "")
    pairs, pending = [], None
    for turn in turns:
        if not isinstance(turn, dict):
            return None
        who, text = turn.get(role), str(turn.get(content) or "")
        if who == system_tag:
            system = text
        elif who == user:
            pending = text
        elif who == assistant and pending is not None:
            pairs.append((pending, text))
            pending = None
    if not pairs:
        return None
    *history, (prompt, expected) = pairs
    return prompt, expected, history, system


def dataset_questions(dataset_dir: Path, names: list[str], split: str) -> list[Question]:
    """Every usable row of the registered datasets `names` as a Question of `split`, in file order."""
    from core.data.dataset_info import DatasetInfoError, info_file, read_dataset_info

    try:
        info = read_dataset_info(dataset_dir)
    except DatasetInfoError as exc:
        raise QuestionsError(str(exc)) from exc
    out: list[Question] = []
    for name in names:
        attr = info.get(name)
        if not isinstance(attr, dict):
            raise QuestionsError(_("dataset {name} is not in {path}", name=name, path=str(info_file(dataset_dir))))
        if "file_name" not in attr:
            raise QuestionsError(_("dataset {name} is not a local file (hub or script datasets cannot be read back "
                                   "for verification)", name=name))
        path = Path(dataset_dir) / attr["file_name"]
        if not path.exists():
            raise QuestionsError(_("dataset {name}: {path} not found", name=name, path=str(path)))
        formatting = attr.get("formatting", "alpaca")
        cols, tags = attr.get("columns") or {}, attr.get("tags") or {}
        for n, row in enumerate(_rows(path), 1):
            parsed = _alpaca(row, cols) if formatting == "alpaca" else _conversation(row, cols, tags, formatting)
            if parsed:
                prompt, expected, history, system = parsed
                out.append(Question(prompt, expected, history, system, split, f"{name}#{n}"))
    return out


# ---------------------------------------------------------------- which rows are asked

def pick(questions: list[Question], n: int) -> list[Question]:
    """`n` questions spread evenly over the dataset (the same ones every time): what `devtune verify` asks."""
    if n <= 0 or n >= len(questions):
        return list(questions)
    return [questions[int(i * len(questions) / n)] for i in range(n)]


def sample(questions: list[Question], k: int, seed: int) -> list[Question]:
    """`k` rows drawn with `seed`, in file order (the same rows every time for the same file and seed): the
    training sample `devtune eval` asks."""
    if k <= 0:
        return []
    if k >= len(questions):
        return list(questions)
    picked = sorted(random.Random(seed).sample(range(len(questions)), k))
    return [questions[i] for i in picked]


@dataclass
class EvalQuestions:
    dataset: str
    heldout_name: str | None  # None: the dataset has no held-out set
    train_total: int  # usable training rows, of which `train` is the sample
    heldout: list[Question] = field(default_factory=list)
    train: list[Question] = field(default_factory=list)

    @property
    def all(self) -> list[Question]:
        return self.heldout + self.train


def heldout_name(ws: Workspace, dataset: str, dataset_dir: Path) -> str | None:
    """The registered held-out set of `dataset` (`<dataset>_eval`, core.data.holdout's), or None."""
    from core.data.holdout import heldout_for
    from core.data.holdout import heldout_name as registered_heldout

    name = registered_heldout(dataset_dir, dataset)
    if name and heldout_for(ws, dataset, dataset_dir) is None:
        raise EvalInputError(_("the held-out set {name} is registered but its file is gone; register {dataset} again "
                               "with `devtune data register FILE --name {dataset} --holdout 0.1`", name=name,
                               dataset=dataset))
    return name


def eval_questions(ws: Workspace, dataset: str, *, dataset_dir: str | Path | None = None,
                   train_sample: int = DEFAULT_TRAIN_SAMPLE, seed: int = 0) -> EvalQuestions:
    folder = ws.abs(dataset_dir) if dataset_dir else ws.data_dir
    held = heldout_name(ws, dataset, folder)
    try:
        train_rows = dataset_questions(folder, [dataset], TRAIN)
        held_rows = dataset_questions(folder, [held], HELDOUT) if held else []
    except QuestionsError as exc:
        raise EvalInputError(str(exc)) from exc
    if not train_rows and not held_rows:
        raise EvalInputError(_("dataset {name} has no usable question/answer rows", name=dataset))
    train = sample(train_rows, train_sample, seed)
    if not train and not held_rows:
        raise EvalInputError(_("nothing to ask: dataset {name} has no held-out questions and --train-sample is 0; "
                               "ask some training questions (--train-sample 20)", name=dataset))
    return EvalQuestions(dataset=dataset, heldout_name=held, train_total=len(train_rows), heldout=held_rows,
                         train=train)


def heldout_note(questions: EvalQuestions) -> str:
    """What the report says when no held-out question is asked ('' when some are)."""
    if questions.heldout:
        return ""
    if questions.heldout_name:
        return _("the held-out set {name} has no usable question/answer rows, so the verdict is on the training "
                 "questions; register {dataset} again with `devtune data register FILE --name {dataset} --holdout "
                 "0.1`", name=questions.heldout_name, dataset=questions.dataset)
    return no_heldout_hint(questions.dataset)


def no_heldout_hint(dataset: str) -> str:
    return _("dataset {name} has no held-out set, so only training questions were asked (they show what the model "
             "memorised, not what it learned); make one with `devtune data register FILE --name {name} --holdout 0.1` "
             "and train again", name=dataset)
