"""The generation client against a server on 127.0.0.1 that fails on purpose: retries with back-off, fatal
errors, the hard caps, bounded concurrency, and a resumed run that sends nothing twice."""

import json

import pytest

from core.data.synth.chunks import chunk_document
from core.data.synth.dataset import collect, review, write_dataset
from core.data.synth.documents import Document
from core.data.synth.generate import Generator, SynthError, SynthOptions
from core.data.synth.journal import Journal
from core.data.synth.prompts import PromptError, ensure_prompts, load_prompts, workspace_prompts
from core.serve.chat import Endpoint
from tests.synth_server import FaultServer

FACTS = [("Returns", "Unused items go back within thirty days. Shoes need their original box."),
         ("Refunds", "Money reaches your card in five working days. Gift cards are refunded as credit."),
         ("Shipping", "Parcels leave the warehouse before noon. Islands wait one extra day."),
         ("Invoices", "Electronic invoices arrive by e-mail overnight. Paper copies cost nothing."),
         ("Warranty", "Phones carry a two-year guarantee. Batteries are covered for twelve months."),
         ("Accounts", "Passwords reset through a texted code. Deleted profiles vanish after a week.")]
TEXT = "".join(f"# {head}\n\n{body}\n\n" for head, body in FACTS)


@pytest.fixture
def server():
    s = FaultServer()
    yield s
    s.close()


@pytest.fixture
def chunks():
    return chunk_document(Document("topics.md", "markdown", TEXT))


@pytest.fixture
def prompts(tmp_path):
    return workspace_prompts(tmp_path / "configs")


def _gen(server, prompts, journal, **options):
    opts = SynthOptions(**{"questions": 2, "concurrency": 4, "backoff_s": 0.01, **options})
    return Generator(Endpoint(server.url, "fake-model", api_key="k"), prompts, journal, opts)


def test_a_whole_run_asks_questions_then_one_answer_each(server, chunks, prompts, tmp_path):
    journal = Journal(tmp_path / "j")
    state = _gen(server, prompts, journal).run(chunks)
    assert (state.chunks_done, state.chunks_total, state.pairs, state.errors) == (6, 6, 12, 0)
    assert state.requests == 6 + 12 and not state.stopped
    body = server.bodies[0]
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"]["required"] in (["questions"], ["answer"])
    assert body["stream"] is False and body["max_tokens"] == 512
    cands = collect(chunks, Journal(tmp_path / "j"), "fake-model", prompts, SynthOptions(questions=2))
    assert len(cands) == 12 and review(cands) == {}
    files = write_dataset(tmp_path / "out.jsonl", cands)
    rows = [json.loads(x) for x in files.output.read_text().splitlines()]
    prov = [json.loads(x) for x in files.provenance.read_text().splitlines()]
    assert len(rows) == len(prov) == 12 and set(rows[0]) == {"instruction", "input", "output"}
    assert prov[0]["file"] == "topics.md" and prov[0]["heading"] == "Returns" and prov[0]["line"] == 1
    assert rows[0]["output"] in TEXT


def test_transient_errors_are_retried_with_back_off(server, chunks, prompts, tmp_path):
    server.faults = ["503", "drop", "429", "502", "500"]
    state = _gen(server, prompts, Journal(tmp_path / "j")).run(chunks)
    assert state.retries == 5 and state.pairs == 12 and state.errors == 0
    assert max(server.answered.values()) == 1 and sum(server.answered.values()) == 18


def test_a_server_that_stays_down_stops_the_run_and_the_next_run_sends_nothing_twice(server, chunks, prompts,
                                                                                     tmp_path):
    server.fail_after = 7
    with pytest.raises(SynthError, match="failed 3 times in a row.*run the same command again"):
        _gen(server, prompts, Journal(tmp_path / "j"), retries=2).run(chunks)
    kept = len(Journal(tmp_path / "j"))
    assert kept == 7
    server.fail_after = None  # the server is back
    state = _gen(server, prompts, Journal(tmp_path / "j")).run(chunks)
    assert state.from_journal == 7 and state.chunks_done == 6 and state.pairs == 12
    assert max(server.answered.values()) == 1 and sum(server.answered.values()) == 18


def test_a_cancelled_run_resumes_where_it_stopped(server, chunks, prompts, tmp_path):
    journal = Journal(tmp_path / "j")
    gen = _gen(server, prompts, journal, concurrency=1)
    gen.cancelled = lambda: len(journal) >= 5
    state = gen.run(chunks)
    assert state.stopped == "cancelled" and len(Journal(tmp_path / "j")) == 5
    again = _gen(server, prompts, Journal(tmp_path / "j")).run(chunks)
    assert again.from_journal == 5 and again.requests == 13 and max(server.answered.values()) == 1


def test_a_torn_last_line_costs_one_request_only(server, chunks, prompts, tmp_path):
    _gen(server, prompts, Journal(tmp_path / "j")).run(chunks[:1])
    path = tmp_path / "j"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]) + lines[-1][:20])  # the last reply torn in half by a crash
    journal = Journal(path)
    assert journal.torn == 1 and len(journal) == 2
    state = _gen(server, prompts, journal).run(chunks[:1])
    assert state.requests == 1 and state.from_journal == 2
    assert len(Journal(path)) == 3


@pytest.mark.parametrize("fault, message", [("401", "refused the API key"), ("403", "refused the API key"),
                                            ("404", "no model named fake-model"),
                                            ("400-schema", "refused JSON-schema structured output")])
def test_refusals_stop_at_once(server, chunks, prompts, tmp_path, fault, message):
    server.faults = [fault]
    with pytest.raises(SynthError, match=message):
        _gen(server, prompts, Journal(tmp_path / "j"), concurrency=1).run(chunks)
    assert server.requests == 1


def test_a_bad_request_is_one_error_not_the_end(server, chunks, prompts, tmp_path):
    server.faults = ["400"]
    state = _gen(server, prompts, Journal(tmp_path / "j"), concurrency=1).run(chunks)
    assert state.errors == 1 and state.chunks_done == 6
    cands = collect(chunks, Journal(tmp_path / "j"), "fake-model", prompts, SynthOptions(questions=2))
    assert review(cands) == {"error": 1} and "answered 400" in next(c for c in cands if c.pair.reason).pair.detail


def test_the_request_cap_is_hard(server, chunks, prompts, tmp_path):
    server.faults = ["503"]  # a retry is a request too
    state = _gen(server, prompts, Journal(tmp_path / "j"), max_requests=5).run(chunks)
    assert server.requests == 5 and state.requests == 5 and state.stopped == "max-requests"


def test_the_token_cap_is_never_passed(server, chunks, prompts, tmp_path):
    cap = 2500
    state = _gen(server, prompts, Journal(tmp_path / "j"), max_tokens=cap, reply_tokens=100).run(chunks)
    used = state.prompt_tokens + state.completion_tokens
    assert state.stopped == "max-tokens" and 0 < used <= cap and state.requests < 18


def test_concurrency_is_bounded(server, chunks, prompts, tmp_path):
    server.delay = 0.05
    _gen(server, prompts, Journal(tmp_path / "j"), concurrency=3).run(chunks)
    assert server.max_in_flight == 3


def test_answers_are_asked_before_new_chunks_are_started(server, chunks, prompts, tmp_path):
    _gen(server, prompts, Journal(tmp_path / "j"), concurrency=1).run(chunks)
    kinds = [b["response_format"]["json_schema"]["name"] for b in server.bodies]
    assert kinds.count("answer") == 12 and len(kinds) == 18
    first_done = max(i for i, b in enumerate(server.bodies)
                     if kinds[i] == "answer" and "Section: Returns\n" in b["messages"][0]["content"])
    # first in, first out would ask all six chunks' questions first
    assert kinds[: first_done + 1].count("questions") <= 2


def test_prompts_are_copied_once_then_read_from_the_workspace(tmp_path, server, chunks):
    folder = ensure_prompts(tmp_path / "configs")
    edited = folder / "answer.md"
    edited.write_text(edited.read_text() + "\nBe brief.\n")
    ensure_prompts(tmp_path / "configs")
    assert "Be brief." in edited.read_text()  # the person's edit is kept
    prompts = load_prompts(folder)
    journal = Journal(tmp_path / "j")
    _gen(server, prompts, journal).run(chunks[:1])
    assert "Be brief." in server.bodies[-1]["messages"][0]["content"]
    edited.write_text(edited.read_text().replace("Be brief.", "Be very brief."))
    state = _gen(server, load_prompts(folder), Journal(tmp_path / "j")).run(chunks[:1])
    assert state.from_journal == 1 and state.requests == 2  # an edited prompt is asked again
    edited.write_text("{{chunk}} {{colour}}")
    with pytest.raises(PromptError, match="answer.md uses {{colour}}"):
        load_prompts(folder)
    edited.write_text("no chunk here")
    with pytest.raises(PromptError, match="never shows the model the chunk"):
        load_prompts(folder)
