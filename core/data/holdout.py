"""The held-out split made at registration (`devtune data register FILE --name N --holdout F`).

Pure: rows come in as two fingerprints each (the hash of the normalised prompt, the hash of the
normalised whole row) plus the near-duplicate pairs the lint's MinHash found (core.data.neardup); out
comes the side of every row. core.data.holdout_files reads the file, writes the two parts and registers
them as `N` (train) and `N_eval` (held out).

No leakage: rows that share a normalised prompt (instruction + input, case, width and spacing ignored;
exact duplicates share it too) or are near duplicates of each other are one group (union-find, so the
groups are closed: a near duplicate of a near duplicate is in the same group), and a group is held out
whole or not at all.

Deterministic: groups are taken in the order of a seeded hash of their content (the smallest row
fingerprint of the group), never of their position, so the same file and seed always give the same
split, and so does the same file with its rows reordered. Groups are taken while they fit the target
count; a group too big for what is left is skipped, so the held-out share can fall a little short of
the target when the data is grouped, never over it (except when only a group larger than the target
can be held out at all: then the smallest group).

Tiny files: at least MIN_HELDOUT_ROWS held out and MIN_TRAIN_ROWS left to train on, else HoldoutError
says why.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from xxhash import xxh3_64_intdigest

from core.errors import BadInput, Refused
from core.i18n import _, _n

EVAL_SUFFIX = "_eval"  # the held-out part of N is registered as N_eval
DEFAULT_SEED = 42
MIN_TRAIN_ROWS = 5
MIN_HELDOUT_ROWS = 1
MAX_FRACTION = 0.5
_COUNT = re.compile(r"^\d+$")


class HoldoutError(Refused):
    """A held-out split that cannot be made (too few rows, everything in one group, a split that would
    leak); the message says why and what to do."""


class BadHoldout(BadInput, HoldoutError):
    """A --holdout value that is neither a share nor a row count."""


@dataclass(frozen=True)
class Holdout:
    """What was asked: a share of the rows (0 < fraction <= 0.5) or a number of rows."""

    fraction: float | None = None
    count: int | None = None

    @classmethod
    def parse(cls, text: str) -> Holdout:
        """"0.1", "10%" (a share) or "20" (rows). Raises HoldoutError with what is accepted."""
        raw = str(text).strip()
        try:
            if _COUNT.match(raw):
                count = int(raw)
                if count < MIN_HELDOUT_ROWS:
                    raise ValueError
                return cls(count=count)
            value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
        except ValueError:
            value = None
        if value is None or not (0 < value <= MAX_FRACTION):
            raise BadHoldout(_("--holdout {value}: give a share of the rows above 0 and at most 0.5 (0.1 or 10%), "
                               "or a number of rows (20)", value=raw))
        return cls(fraction=value)

    @property
    def text(self) -> str:
        return str(self.count) if self.count is not None else f"{self.fraction:g}"

    def target(self, rows: int) -> int:
        """The held-out rows asked for, before the minimums."""
        if self.count is not None:
            return self.count
        return max(MIN_HELDOUT_ROWS, round((self.fraction or 0) * rows))


@dataclass(frozen=True, slots=True)
class SplitRow:
    """One row as the split sees it."""

    prompt: int  # hash of the normalised prompt side: rows sharing it belong together
    content: int  # hash of the normalised row: what the seeded order reads (position-free)


@dataclass
class SplitPlan:
    """The side of every row (True: held out) and what the person is told about it."""

    heldout: list[bool]
    seed: int
    holdout: Holdout
    requested: int  # rows asked for (holdout.target)
    groups: int  # groups of rows that belong together (a row alone is a group of one)
    grouped_groups: int  # groups of more than one row: kept on one side
    grouped_rows: int  # rows in those groups
    largest_group: int
    notes: list[str] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return len(self.heldout)

    @property
    def heldout_rows(self) -> int:
        return sum(self.heldout)

    @property
    def train_rows(self) -> int:
        return self.rows - self.heldout_rows

    def to_json(self) -> dict:
        return {"seed": self.seed, "holdout": self.holdout.text, "requested": self.requested, "rows": self.rows,
                "train_rows": self.train_rows, "heldout_rows": self.heldout_rows, "groups": self.groups,
                "groups_kept_together": self.grouped_groups, "rows_in_groups": self.grouped_rows,
                "largest_group": self.largest_group, "notes": list(self.notes)}

    def text(self) -> str:
        """One line: rows each side and the groups kept together."""
        return _n("split (seed {seed}): {train} rows to train, {held} held out of {rows}; {groups} group of rows "
                  "sharing a prompt or nearly the same kept on one side ({grouped} rows)",
                  "split (seed {seed}): {train} rows to train, {held} held out of {rows}; {groups} groups of rows "
                  "sharing a prompt or nearly the same kept on one side ({grouped} rows)", self.grouped_groups,
                  seed=self.seed, train=self.train_rows, held=self.heldout_rows, rows=self.rows,
                  groups=self.grouped_groups, grouped=self.grouped_rows)


def normalised(text: str) -> str:
    """Text as the split compares it: NFKC (full-width = half-width), case-folded, spaces collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def group_of_rows(rows: list[SplitRow], near_pairs: Iterable[tuple[int, int]] = ()) -> list[int]:
    """For each row, the index of the first row of its group (rows with the same prompt, and near
    duplicates, joined transitively)."""
    parent = list(range(len(rows)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(a: int, b: int) -> None:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    first_with: dict[int, int] = {}
    for i, row in enumerate(rows):
        j = first_with.setdefault(row.prompt, i)
        if j != i:
            join(i, j)
    for a, b in near_pairs:
        join(a, b)
    return [root(i) for i in range(len(rows))]


def plan_split(rows: list[SplitRow], holdout: Holdout, *, seed: int = DEFAULT_SEED,
               near_pairs: Iterable[tuple[int, int]] = (), source: str = "") -> SplitPlan:
    """Which rows are held out. Raises HoldoutError when no split keeps the minimums without leaking."""
    n = len(rows)
    where = source or _("the file")
    if n < MIN_TRAIN_ROWS + MIN_HELDOUT_ROWS:
        raise HoldoutError(_n("{file} has {n} row: a held-out set needs at least {need} ({held} to hold out, {train} "
                              "to train on); add rows, or register without --holdout",
                              "{file} has {n} rows: a held-out set needs at least {need} ({held} to hold out, {train} "
                              "to train on); add rows, or register without --holdout", n, file=where,
                              need=MIN_TRAIN_ROWS + MIN_HELDOUT_ROWS, held=MIN_HELDOUT_ROWS, train=MIN_TRAIN_ROWS))
    groups: dict[int, list[int]] = {}
    for i, g in enumerate(group_of_rows(rows, near_pairs)):
        groups.setdefault(g, []).append(i)
    members = list(groups.values())
    if len(members) < 2:
        raise HoldoutError(_n("{file}: every row shares a prompt with, or nearly repeats, another row, so the {n} row "
                              "is one group and any held-out row would also be trained on; add rows with other "
                              "questions",
                              "{file}: every row shares a prompt with, or nearly repeats, another row, so all {n} rows "
                              "are one group and any held-out row would also be trained on; add rows with other "
                              "questions", n, file=where))
    requested = holdout.target(n)
    notes: list[str] = []
    if holdout.count is not None and requested * 2 > n:
        raise HoldoutError(_n("--holdout {count}: {file} has {n} row; hold out at most half of it",
                              "--holdout {count}: {file} has {n} rows; hold out at most half of them", n,
                              count=requested, file=where))
    target = min(requested, n - MIN_TRAIN_ROWS)
    if target < requested:
        notes.append(_n("{asked} held-out row asked, {target} kept so that {train} are left to train on",
                        "{asked} held-out rows asked, {target} kept so that {train} are left to train on", requested,
                        asked=requested, target=target, train=MIN_TRAIN_ROWS))
    salt = seed.to_bytes(8, "little", signed=True)

    def order(group: list[int]) -> tuple[int, int]:
        identity = min(rows[i].content for i in group)
        return xxh3_64_intdigest(identity.to_bytes(8, "little"), seed=xxh3_64_intdigest(salt)), identity

    ordered = sorted(members, key=order)
    side = [False] * n
    held = 0
    for group in ordered:
        if held + len(group) <= target:
            for i in group:
                side[i] = True
            held += len(group)
            if held == target:
                break
    if held == 0:
        smallest = min(ordered, key=len)  # the first of the smallest, in the seeded order
        if n - len(smallest) < MIN_TRAIN_ROWS or len(smallest) * 2 > n:
            raise HoldoutError(_n("{file}: the smallest group of rows that belong together (the same prompt, or "
                                  "nearly the same row) has {k} row, too many to hold out of {n}; add rows with other "
                                  "questions",
                                  "{file}: the smallest group of rows that belong together (the same prompt, or "
                                  "nearly the same row) has {k} rows, too many to hold out of {n}; add rows with "
                                  "other questions", len(smallest), file=where, k=len(smallest), n=n))
        for i in smallest:
            side[i] = True
        held = len(smallest)
        notes.append(_n("{asked} held-out row asked; the smallest group of rows that belong together has {k}, so "
                        "{k} are held out",
                        "{asked} held-out rows asked; the smallest group of rows that belong together has {k}, so "
                        "{k} are held out", requested, asked=requested, k=held))
    elif held < target:
        notes.append(_n("{held} held-out row of the {target} asked: the groups kept together did not fill it exactly",
                        "{held} held-out rows of the {target} asked: the groups kept together did not fill it "
                        "exactly", held, held=held, target=target))
    multi = [g for g in members if len(g) > 1]
    return SplitPlan(side, seed, holdout, requested, len(members), len(multi), sum(len(g) for g in multi),
                     max(len(g) for g in members), notes)


# ---- the registered held-out set of a dataset (what `devtune eval` and the Config step read) ----------

def heldout_name(dataset_dir: str | os.PathLike, dataset: str) -> str | None:
    """`<dataset>_eval` when dataset_info.json in `dataset_dir` registers it, else None."""
    from core.data.dataset_info import DatasetInfoError, read_dataset_info

    try:
        info = read_dataset_info(Path(dataset_dir))
    except DatasetInfoError:
        return None
    name = dataset + EVAL_SUFFIX
    return name if isinstance(info.get(name), dict) else None


def heldout_for(ws, dataset: str, dataset_dir: str | os.PathLike | None = None) -> Path | None:
    """The file of the held-out set registered beside `dataset` (the `<dataset>_eval` entry of the
    workspace's dataset_info.json, or of `dataset_dir`), or None when there is none or its file is gone."""
    from core.data.dataset_info import DatasetInfoError, read_dataset_info

    folder = Path(ws.abs(dataset_dir)) if dataset_dir else Path(ws.data_dir)
    try:
        entry = read_dataset_info(folder).get(dataset + EVAL_SUFFIX)
    except DatasetInfoError:
        return None
    file_name = entry.get("file_name") if isinstance(entry, dict) else None
    if not isinstance(file_name, str) or not file_name:
        return None
    path = folder / file_name
    return path if path.is_file() else None
