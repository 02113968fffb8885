"""The checks every held-apart failure set of issue 31 shares (tests/fixtures/logs/heldout*/: SOURCES.md, expected.json):
the set is apart from the older ones, each log gets a right cause and fix and quotes its root, and knowing the exit
code changes nothing that was right. Each tests/core/test_diagnosis_heldout*.py keeps its own WORDS (what the right
diagnosis says) and KNOWN_MISSES (files still wrong, with the reason: a file there must still be wrong)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from core.train.failures import diagnose_files

LOGS = Path(__file__).parent / "fixtures" / "logs"


def expected_of(folder: Path) -> dict:
    return json.loads((folder / "expected.json").read_text(encoding="utf-8"))


def says(diagnosis, words: str) -> bool:
    return words in " ".join([diagnosis.title, diagnosis.explanation, diagnosis.fix, *diagnosis.commands])


def assert_apart(folder: Path, expected: dict, older: tuple[str, ...]) -> None:
    """Every file is in SOURCES.md, and no source link is one an older set (or the fixtures the rules were tuned
    on) already used."""
    sources = (folder / "SOURCES.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in sources for name in expected)
    before = "".join((LOGS / p).read_text(encoding="utf-8") for p in older)
    for row in sources.split("## Measured")[0].splitlines():  # the sources table, not the measured ones
        if row.startswith("| `"):
            link = row.split(" | ")[2].split()[0]
            # the whole link: issues/9 is not issues/9140 of an older set
            assert link.startswith("https://github.com/") and not re.search(re.escape(link) + r"(?![\w/])", before), row


def assert_right(folder: Path, name: str, expected: dict, words: str, known_misses: dict[str, str]) -> None:
    """As `devtune diagnose LOG` (no exit code known): a diagnosis, its root quoted, the first one right."""
    found = diagnose_files([folder / name])
    assert found, f"{name}: no diagnosis"
    first = found[0]
    assert any(expected["quote"] in e.text for e in first.evidence) or expected["quote"] in first.title
    right = first.id in expected["accept"] and says(first, words)
    if name in known_misses:
        assert not right, f"{name} is right now: drop it from KNOWN_MISSES"
    else:
        assert right, f"{name}: {first.id} / {first.title} / {first.fix}"


def assert_exit_code_changes_nothing(folder: Path, expected: dict, known_misses: dict[str, str]) -> None:
    for name, wanted in expected.items():
        if name not in known_misses and wanted["exit_code"] != 0:  # status 0: the command succeeded, no failed run
            # to diagnose (pip's conflict warning exits 0; without a status the log's errors are read)
            found = diagnose_files([folder / name], exit_code=wanted["exit_code"])
            assert found[0].id in wanted["accept"], (name, found[0].id)


def with_ids(raw: dict, ids: dict[str, tuple[str, str]]) -> dict:
    """A collector's expected.json (whose `accept` is its own class name) with the diagnosis id that is right."""
    return {name: {**e, "accept": [ids[name][0]] if name in ids else [e["family"]]} for name, e in raw.items()}


def assert_right_by_id(folder: Path, name: str, expected: dict, ids: dict[str, tuple[str, str]],
                       known_misses: dict[str, str], not_quoted: set[str]) -> None:
    """assert_right with the words of `ids`; a file of `not_quoted` is right without quoting the thread's line
    (its right finding quotes the facts it reasoned from instead: SOURCES.md says which)."""
    wanted = {**expected[name], "quote": ""} if name in not_quoted else expected[name]
    assert_right(folder, name, wanted, ids.get(name, ("", ""))[1], known_misses)
