"""The known-issues index (core/train/known_issues.json): each entry matches its own example and no other's, short
or unrelated roots match none, and a root no rule explains gets the thread's cause and fix first."""

import re

import pytest

from core.train.failures import diagnose_text
from core.train.known_issues import known_issues, match_known_issue
from tests.core.test_zh_text import english_left


def test_every_entry_matches_its_own_example_and_is_sourced():
    for entry in known_issues():
        assert match_known_issue(entry.example) == entry, entry.id
        assert entry.link.startswith("https://github.com/") and entry.cause and entry.fix, entry.id


def test_ids_and_threads_are_unique():
    entries = known_issues()
    assert len({e.id for e in entries}) == len(entries)
    assert len({e.link for e in entries}) == len(entries)


def test_every_entry_is_told_in_chinese_with_no_english_left():  # the rule of tests/core/test_zh_text.py
    for entry in known_issues():
        for text in (entry.cause_zh, entry.fix_zh):
            assert re.search(r"[\u4e00-\u9fff]", text), entry.id
            assert not english_left(text), (entry.id, english_left(text))


@pytest.mark.parametrize("root", ["RuntimeError: CUDA error: out of memory", "ValueError: Template llama-3 does not exist.",
                                  "OSError: [Errno 28] No space left on device", "KeyError: 'instruction'",
                                  "ImportError: cannot import name 'LlamaConfig' from 'transformers'",
                                  "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970",
                                  "AssertionError", "RuntimeError", "Segmentation fault (core dumped)"])
def test_unrelated_or_bare_roots_match_no_known_issue(root):
    assert match_known_issue(root) is None


def test_a_root_no_rule_explains_gets_the_threads_cause_and_fix_first():
    entry = next(e for e in known_issues() if e.id == "ds-zero3-no-sync")
    log = ("  File \"/opt/venv/lib/python3.11/site-packages/deepspeed/runtime/engine.py\", line 2013, in no_sync\n"
           "    assert not self.zero_optimization_partition_gradients(), \\\n" + entry.example + "\n")
    first = diagnose_text("Traceback (most recent call last):\n" + log)[0]
    assert first.id in ("known-issue", "version-skew")  # a family may explain it; the thread is then quoted
    texts = [e.text for e in first.evidence]
    assert any(t.startswith(entry.link) for t in texts)
    if first.id == "known-issue":
        assert first.title == entry.cause and first.fix == entry.fix
