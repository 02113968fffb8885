"""Which rows `devtune eval` asks: every row of the held-out set (`N_eval`, registered beside `N` by
`devtune data register FILE --name N --holdout F`, found through core.data.holdout) and a seeded sample of `--train-sample K` training rows of `N`.

The rows are read as LLaMA-Factory reads them (core.serve.verify's reader: alpaca instruction + input, or the
conversation's last user turn, with the turns before it as history). Without a held-out set the training sample
is still asked, and the report says how to make one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from core.i18n import _
from core.serve.verify import Question, VerifyError, dataset_questions
from core.workspace.layout import Workspace

HELDOUT, TRAIN = "heldout", "train"
DEFAULT_TRAIN_SAMPLE = 20


class EvalInputError(Exception):
    """The dataset or the servers to evaluate cannot be used; the message says what to do (exit 2)."""


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


def sample(questions: list[Question], k: int, seed: int) -> list[Question]:
    """`k` rows drawn with `seed`, in file order (the same rows every time for the same file and seed)."""
    if k <= 0:
        return []
    if k >= len(questions):
        return list(questions)
    picked = sorted(random.Random(seed).sample(range(len(questions)), k))
    return [questions[i] for i in picked]


def eval_questions(ws: Workspace, dataset: str, *, dataset_dir: str | Path | None = None,
                   train_sample: int = DEFAULT_TRAIN_SAMPLE, seed: int = 0) -> EvalQuestions:
    folder = ws.abs(dataset_dir) if dataset_dir else ws.data_dir
    held = heldout_name(ws, dataset, folder)
    try:
        train_rows = dataset_questions(folder, [dataset], TRAIN)
        held_rows = dataset_questions(folder, [held], HELDOUT) if held else []
    except VerifyError as exc:
        raise EvalInputError(str(exc)) from exc
    if not train_rows and not held_rows:
        raise EvalInputError(_("dataset {name} has no usable question/answer rows", name=dataset))
    return EvalQuestions(dataset=dataset, heldout_name=held, train_total=len(train_rows), heldout=held_rows,
                         train=sample(train_rows, train_sample, seed))


def no_heldout_hint(dataset: str) -> str:
    return _("dataset {name} has no held-out set, so only training questions were asked (they show what the model "
             "memorised, not what it learned); make one with `devtune data register FILE --name {name} --holdout 0.1` "
             "and train again", name=dataset)
