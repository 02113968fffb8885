"""The held-apart failure logs of issue 31 (tests/fixtures/logs/heldout, SOURCES.md there): each gets a
diagnosis, the first one names a right cause and fix (its family, or an older rule that says the same), and
quotes the root line. Measured before the families existed: 7/31 right, 25/31 quoted, 5/31 no diagnosis."""

import json
from pathlib import Path

import pytest

from core.train.diagnosis_native import find_native_abort
from core.train.failures import diagnose_files
from core.train.root_cause import PREFIX

HELDOUT = Path(__file__).parents[1] / "fixtures" / "logs" / "heldout"
EXPECTED = json.loads((HELDOUT / "expected.json").read_text(encoding="utf-8"))


def test_the_set_is_large_and_varied_enough():
    assert len(EXPECTED) >= 30
    assert len({e["family"] for e in EXPECTED.values()}) >= 6
    sources = (HELDOUT / "SOURCES.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in sources for name in EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_held_out_log_gets_its_family_and_quotes_its_root(name):
    expected = EXPECTED[name]
    found = diagnose_files([HELDOUT / name])  # as `devtune diagnose LOG`: no exit code known
    assert found, f"{name}: no diagnosis"
    first = found[0]
    assert first.id in expected["accept"], f"{name}: {first.id} / {first.title}"
    assert any(expected["quote"] in e.text for e in first.evidence) or expected["quote"] in first.title


def test_the_families_hold_with_the_exit_code_known_too():
    for name, expected in EXPECTED.items():
        found = diagnose_files([HELDOUT / name], exit_code=expected["exit_code"])
        assert found and found[0].id in expected["accept"], (name, found and found[0].id)


def test_a_version_skew_names_both_packages_and_the_range_the_caller_declares():
    found = diagnose_files([HELDOUT / "vs_import_shard_checkpoint.log"])
    facts = [e.text for e in found[0].evidence if e.file == "facts"]
    assert any(f.startswith("transformers ") for f in facts) and any(f.startswith("llamafactory ") for f in facts)
    assert any("declares transformers" in f or "declares no version range" in f for f in facts)
    assert any(c.startswith("pip install") for c in found[0].commands)


def test_versions_the_log_printed_are_the_runs_facts():
    text = ("- Transformers version: 4.57.0\n- PEFT version: 0.17.1\n"
            + (HELDOUT / "vs_loraconfig_use_dora.log").read_text(encoding="utf-8"))
    from core.train.failures import diagnose_text

    found = diagnose_text(text)
    assert found[0].id == "version-skew"
    assert "peft 0.17.1 installed (from the log)" in [e.text for e in found[0].evidence]


@pytest.mark.parametrize("line, rank", [("[rank3]: x", 3), ("[default0]:x", 0), ("[0]:x", 0), ("1: x", 1),
                                        ("task 2: x", 2)])
def test_every_launchers_rank_prefix_is_read_through(line, rank):
    m = PREFIX.match(line)
    assert m and int(m.group(1)) == rank and line[m.end():] == "x"


def test_a_library_line_is_the_root_of_a_native_abort_not_the_abort():
    numbered = list(enumerate(["step 3", "rocBLAS error: Cannot read x.dat for GPU arch : gfx1103",
                               "Aborted (core dumped)"], 1))
    assert find_native_abort(numbered, PREFIX) == (2, None, numbered[1][1])
    assert find_native_abort([(1, "Aborted (core dumped)")], PREFIX) == (1, None, "Aborted (core dumped)")
    assert find_native_abort([(1, "hipBLASLt error: Heuristic Fetch Failed!")], PREFIX) is None  # it falls back


def test_a_matching_root_shows_the_thread_seen_upstream():
    found = diagnose_files([HELDOUT / "vs_loraconfig_use_dora.log"])
    upstream = [e.text for e in found[0].evidence if e.file == "seen upstream"]
    assert upstream and upstream[0].startswith("https://github.com/hiyouga/LlamaFactory/issues/2696")
