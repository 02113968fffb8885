"""A failed run's diagnosis completed by its family and the upstream thread it matches.

core.train.failures ranks the rules' diagnoses and names the root exception; then `with_family`:
- asks core.train.diagnosis_families_config (a config that contradicts itself or the machine, with the run's own
  settings), core.train.diagnosis_families_machine, core.train.diagnosis_signature (a call whose arguments do not
  fit), core.train.diagnosis_families (then diagnosis_families_setup, then core.train.diagnosis_settings)
  which family the root line belongs to, with this run's facts; the family's
  diagnosis comes first when no rule explained the root (only the generic root-cause one, or a symptom), or
  when it overrides the rule that did (a full /dev/shm is no full disk), and second otherwise;
- quotes the known upstream thread (core.train.known_issues) on the first diagnosis: "seen upstream: <link>"
  with that thread's fix; when no rule or family explained the root (only a generic diagnosis), the thread's
  cause and fix are the first diagnosis (`known-issue`).
- makes each rule's machine-specific advice agree with the machine the log describes (core.train.diagnosis_advice).
- right after the environment, asks core.train.diagnosis_settings for a setting of this run whose own
  documentation says it causes this failure (ranked first, like a contradiction), then
  core.train.diagnosis_model_files for what the log shows of the model's files (a git-lfs pointer, quantized
  weights);
- then a config the tool's own schema rejected (pydantic's field errors, core.train.diagnosis_validation);
- right after the environment, core.train.diagnosis_pasted: what the person's own shell commands in the log
  showed of the set-up (the prompt's working directory, the nodes, a mount, a host lookup, the configs);
- before them all, asks core.train.diagnosis_environment whether the environment facts the log printed (and the
  doctor's saved verdicts) contradict each other: such a contradiction is the cause, first above any rule.
The Train step, `devtune diagnose` and `devtune monitor` all get their diagnosis through here.
"""

from __future__ import annotations

from pathlib import Path

from core.i18n import _
from core.train.diagnosis_advice import agree_with_log
from core.train.diagnosis_download import download_finding
from core.train.diagnosis_environment import environment_finding
from core.train.diagnosis_families import family_finding
from core.train.diagnosis_families_config import RunSettings, config_finding
from core.train.diagnosis_families_machine import machine_finding
from core.train.diagnosis_families_setup import setup_finding
from core.train.diagnosis_model_files import model_files_finding
from core.train.diagnosis_pasted import pasted_finding
from core.train.diagnosis_signature import signature_skew
from core.train.diagnosis_validation import validation_finding
from core.train.diagnosis_settings import settings_finding, settings_first_finding
from core.train.diagnosis_model import Diagnosis, LogEvidence, exception_evidence, where_evidence
from core.train.known_issues import match_known_issue
from core.train.diagnosis_native import find_native_abort
from core.train.root_cause import PREFIX, RootCause

GENERIC = ("root-cause", "unexplained-failure", "aborted", "terminated", "peer-rank-died", "nccl-timeout",
           "nccl-error")


def run_python(record) -> str | None:
    """The interpreter of a devtune run: the one beside its argv[0] (a venv's bin/llamafactory-cli)."""
    argv = getattr(record, "argv", None) or []
    if not argv:
        return None
    first = Path(argv[0])
    if first.name.startswith("python"):
        return str(first) if first.is_absolute() and first.exists() else None
    beside = first.parent / "python"
    return str(beside) if first.is_absolute() and beside.exists() else None


def _context(logs: list[tuple[str, list[tuple[int, str]]]], cause: RootCause) -> tuple[str, str]:
    """The root exception's traceback lines, and the head and tail of the logs (versions, endpoints)."""
    exc = cause.exception
    frames = ""
    for name, numbered in logs:
        if exc is not None and name == exc.file:
            frames = "\n".join(t for n, t in numbered if (exc.traceback_start or exc.line) <= n <= exc.line)
    text = "\n".join(t for _name, numbered in logs for _n, t in numbered[:300] + numbered[-600:])
    return frames, text


def _native_before(logs: list[tuple[str, list[tuple[int, str]]]], cause: RootCause) -> list[LogEvidence]:
    """A GPU library's fatal line printed before the Python exception it turned into (MIOpen's "Code object
    build failed" before `RuntimeError: miopenStatusUnknownError`)."""
    exc = cause.exception
    if exc is None or exc.exc_type == "native abort":
        return []
    for name, numbered in logs:
        if name == exc.file:
            found = find_native_abort([(n, t) for n, t in numbered if n < exc.line], PREFIX)
            if found is not None and found[0] >= exc.line - 200:
                return [LogEvidence(name, found[0], found[2])]
    return []


def _pasted_only(found: list[Diagnosis], logs: list[tuple[str, list[tuple[int, str]]]]) -> list[Diagnosis]:
    """No exception, a rule read a logged error line (a web UI's warning): what the person's own commands showed
    of the set-up may still say why (core.train.diagnosis_pasted)."""
    first = next((e for e in found[0].evidence if e.line is not None), None)
    own_log = next((numbered for name, numbered in logs if first is not None and name == first.file), None)
    finding = pasted_finding(first.text, "", lines=own_log, root_line=first.line) if own_log else None
    if finding is None:
        return found
    evidence = [first] + [LogEvidence(_("facts"), None, fact) for fact in finding.facts]
    return [Diagnosis(finding.id, finding.title, finding.explanation, finding.fix, finding.commands, evidence,
                      found[0].score + 1)] + found


def with_family(found: list[Diagnosis], cause: RootCause, logs: list[tuple[str, list[tuple[int, str]]]],
                stop_requested: bool = False, *, python: str | None = None,
                settings: RunSettings | None = None) -> list[Diagnosis]:
    if not found or stop_requested:
        return found
    frames, log_text = _context(logs, cause)
    agree_with_log(found, log_text)
    exc = cause.exception
    if exc is None and cause.signal != "SIGKILL":
        return _pasted_only(found, logs)
    root = (exc.printed or exc.text) if exc is not None else cause.signal
    run = settings or RunSettings()
    run.failed_ranks = run.failed_ranks or list(cause.failed_ranks)
    own_log = next((numbered for name, numbered in logs if exc is not None and name == exc.file),
                   logs[0][1] if logs and exc is None else None)  # a signal alone: the first log's commands
    finding = (environment_finding(root, frames, log_text=log_text, doctor=run.doctor)
               or pasted_finding(root, frames, lines=own_log, root_line=exc.line if exc is not None else None)
               or validation_finding(root, log_text)
               or settings_first_finding(root, frames, log_text=log_text, settings=run)
               or model_files_finding(root, frames, log_text=log_text)
               or config_finding(root, frames, log_text=log_text, settings=run)
               or machine_finding(root, frames, python=python, log_text=log_text)
               or signature_skew(root, frames, python=python, log_text=log_text)
               or download_finding(root, log_text)  # before the network family: no rendezvous
               or family_finding(root, frames, exit_signal=cause.signal, python=python, log_text=log_text)
               or setup_finding(root, frames, log_text=log_text)
               or settings_finding(root, frames, log_text=log_text))
    if finding is not None and found[0].id in finding.same_as:
        finding = None  # the rule that came first already says it (GPU out of memory)
    if finding is not None:
        evidence = (exception_evidence(exc) if exc is not None else []) + _native_before(logs, cause) + [
            LogEvidence(_("facts"), None, fact) for fact in finding.facts] + where_evidence(cause)
        family = Diagnosis(finding.id, finding.title, finding.explanation, finding.fix, finding.commands,
                           evidence, found[0].score + 1)
        first = (found[0].id in GENERIC or found[0].id in finding.overrides or finding.contradiction
                 or (finding.own_cause and found[0].before_root))  # the rule read an earlier, handled exception
        if first:
            found = [family] + [d for d in found if d.id != "root-cause"]
        elif exc is not None:  # a signal alone: the rule that came first already says what the family would
            found.insert(1, family)
    own = finding is not None and finding.own_cause and found[0].id == finding.id
    issue = match_known_issue(root) if exc is not None and not own else None
    if issue is None:
        return found
    seen = LogEvidence(_("seen upstream"), None, f"{issue.link}: {issue.fix_text()}")
    if found[0].id in GENERIC:  # no rule or family explained it: the thread's cause is the best one known
        known = Diagnosis("known-issue", issue.cause_text(),
                          _("This error is reported upstream ({link}); the thread found this cause.", link=issue.link),
                          issue.fix_text(), [], found[0].evidence + [seen], found[0].score + 1)
        return [known] + [d for d in found if d.id != "root-cause"]
    found[0].evidence.append(seen)
    return found
