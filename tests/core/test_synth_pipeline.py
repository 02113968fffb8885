"""`generate_pairs`, the one composition of a generation from documents (the CLI's `data synth` and the wizard's
From documents view both call it): the request in, the filtered candidates and the run's progress out, and the
journal closed however the run ends — done, cancelled, or stopped by a server that went away."""

import psutil
import pytest

from core.data.synth.generate import SynthError, SynthOptions
from core.data.synth.journal import Journal
from core.data.synth.pipeline import SynthRequest, generate_pairs, synthesize
from core.files.atomic import FileExistsRefused
from tests.synth_documents import write_all
from tests.synth_server import FaultServer


@pytest.fixture
def server():
    s = FaultServer()
    yield s
    s.close()


def _request(workspace, tmp_path, server, **options) -> SynthRequest:
    write_all(tmp_path / "docs")
    return SynthRequest([tmp_path / "docs" / "policy.md"], workspace.data_dir / "qa.jsonl",
                        SynthOptions(**{"concurrency": 2, "backoff_s": 0.01, **options}), min_grounding=0.5,
                        api_base=server.url)


def _open_here(path) -> bool:
    return any(f.path == str(path) for f in psutil.Process().open_files())


def test_a_request_becomes_filtered_candidates_and_a_closed_journal(workspace, tmp_path, server):
    request = _request(workspace, tmp_path, server)
    starts, seen = [], []
    outcome = generate_pairs(workspace, request, started=starts.append, progress=lambda p: seen.append(p.pairs))
    assert [s.endpoint.model for s in starts] == ["fake-model"] and len(starts[0].plan.chunks) == len(outcome.chunks)
    assert outcome.progress.chunks_done == len(outcome.chunks) == 3 and not outcome.progress.stopped
    assert any(c.kept and c.pair.grounding >= 0.5 for c in outcome.candidates)  # the filters ran
    assert outcome.model == "fake-model" and outcome.documents == 1 and seen and seen[-1] == outcome.progress.pairs
    assert not _open_here(outcome.journal) and len(Journal(outcome.journal)) == server.requests
    assert not request.output.exists()  # generating writes nothing but the journal; the wizard reviews first


def test_the_journal_is_closed_when_the_run_is_cancelled_or_the_server_goes_away(workspace, tmp_path, server):
    request = _request(workspace, tmp_path, server, concurrency=1, retries=1)
    journal = request.output.with_name(".qa.jsonl.synth-journal")
    outcome = generate_pairs(workspace, request, cancelled=lambda: journal.exists() and
                             len(journal.read_text().splitlines()) >= 2)
    assert outcome.progress.stopped == "cancelled" and not _open_here(journal)
    server.fail_after = 0
    with pytest.raises(SynthError, match="run the same command again"):
        generate_pairs(workspace, request)
    assert not _open_here(journal) and len(Journal(journal)) == 2


def test_synthesize_refuses_an_existing_output_before_asking_anything(workspace, tmp_path, server):
    request = _request(workspace, tmp_path, server)
    request.output.write_text("mine\n")
    with pytest.raises(FileExistsRefused):
        synthesize(workspace, request)
    assert server.requests == 0 and request.output.read_text() == "mine\n"
    report = synthesize(workspace, request, force=True)
    assert report.written and report.rows == len(request.output.read_text().splitlines()) > 0
