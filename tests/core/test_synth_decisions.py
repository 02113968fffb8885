"""A reviewer's decisions saved beside the journal: found again by pairs generated again, edits kept, other
runs' decisions never dropped, a stale snapshot never written over a newer one, a damaged file said."""

import json

from core.data.synth.chunks import Chunk
from core.data.synth.dataset import ACCEPTED, REJECTED, Candidate
from core.data.synth.decisions import ReviewFile, decisions_path
from core.data.synth.filters import Pair


def _candidates(n=3):
    chunk = Chunk("docs/a.md", 0, "Returns", "Returns\n\nReturn within 30 days.", 8, 0, 20)
    return [Candidate(Pair(f"Question {i}?", f"Answer {i}.", chunk.text), chunk, "m") for i in range(n)]


def test_decisions_and_edits_come_back_for_the_same_pairs(tmp_path):
    path = decisions_path(tmp_path / "data" / "faq.jsonl")
    assert path.name == ".faq.jsonl.synth-review"
    path.parent.mkdir()
    first = _candidates()
    first[0].decision = REJECTED
    first[1].edit("Can I return it?", "Yes, within 30 days.")
    ReviewFile(path).save(first)
    again = _candidates()
    assert ReviewFile(path).apply(again) == 2
    assert again[0].decision == REJECTED and not again[0].kept
    assert again[1].edited and again[1].decision == ACCEPTED and again[1].pair.question == "Can I return it?"
    assert again[1].key == first[1].key != again[0].key  # an edit keeps the pair's key
    assert again[2].decision == "" and not again[2].edited


def test_other_runs_decisions_stay_and_an_undone_decision_goes(tmp_path):
    path = tmp_path / ".x.jsonl.synth-review"
    kept = _candidates(1)
    kept[0].chunk = Chunk("docs/b.md", 0, "", "Other text.", 3, 0, 11)
    kept[0].key = "other-run"
    kept[0].decision = ACCEPTED
    ReviewFile(path).save(kept)
    now = _candidates()
    reviews = ReviewFile(path)
    now[0].decision = REJECTED
    reviews.save(now)
    now[0].decision = ""
    reviews.save(now)
    assert set(json.loads(path.read_text())["decisions"]) == {"other-run"}


def test_a_stale_snapshot_is_not_written_over_a_newer_one(tmp_path):
    path = tmp_path / ".x.jsonl.synth-review"
    reviews = ReviewFile(path)
    cands = _candidates()
    cands[0].decision = REJECTED
    old = reviews.record(cands)
    cands[0].decision = ACCEPTED
    new = reviews.record(cands)
    assert reviews.write(*new) and not reviews.write(*old)
    assert list(json.loads(path.read_text())["decisions"].values()) == [{"decision": ACCEPTED, "edited": False}]


def test_a_damaged_review_file_is_said_and_replaced_not_fatal(tmp_path):
    path = tmp_path / ".x.jsonl.synth-review"
    path.write_text('{"version": 1, "decisions": ')
    reviews = ReviewFile(path)
    assert reviews.unreadable.startswith("JSONDecodeError") and reviews.apply(_candidates()) == 0
    cands = _candidates()
    cands[0].decision = ACCEPTED
    reviews.save(cands)
    assert ReviewFile(path).apply(_candidates()) == 1



def test_the_same_section_in_two_documents_keeps_two_decisions(tmp_path):
    """Boilerplate repeated in two files is the same chunk text (one journal entry, asked once), but two rows."""
    from core.data.synth.chunks import chunk_document
    from core.data.synth.dataset import collect
    from core.data.synth.documents import Document
    from core.data.synth.generate import Generator, SynthOptions
    from core.data.synth.journal import Journal
    from core.data.synth.prompts import workspace_prompts
    from core.serve.chat import Endpoint
    from tests.synth_server import FaultServer

    text = "# Returns\n\nUnused items go back within thirty days.\n"
    chunks = [c for name in ("a.md", "b.md") for c in chunk_document(Document(name, "markdown", text))]
    prompts = workspace_prompts(tmp_path / "configs")
    options = SynthOptions(questions=1, backoff_s=0.01)
    server = FaultServer()
    try:
        journal = Journal(tmp_path / "j")
        Generator(Endpoint(server.url, "fake-model", api_key="k"), prompts, journal, options).run(chunks)
    finally:
        server.close()
    first = collect(chunks, journal, "fake-model", prompts, options)
    assert len(first) == 2 and first[0].key != first[1].key
    first[1].decision = REJECTED
    path = tmp_path / ".x.jsonl.synth-review"
    ReviewFile(path).save(first)
    again = collect(chunks, journal, "fake-model", prompts, options)
    assert ReviewFile(path).apply(again) == 1 and [c.decision for c in again] == ["", REJECTED]
