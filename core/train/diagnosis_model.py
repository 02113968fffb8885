"""What a diagnosis is (core.train.failures makes them, core.train.diagnosis_report adds a family's): its
evidence lines, and the evidence every diagnosis of a failed run quotes (the root exception, where it was
raised, the rank and host that failed first, the step reached, the exit status)."""

from __future__ import annotations

from dataclasses import dataclass, field

from core.i18n import _
from core.train.root_cause import RaisedException, RootCause, signal_name


@dataclass(frozen=True)
class LogEvidence:
    file: str
    line: int | None  # 1-based; None when the evidence is the exit status
    text: str

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "text": self.text}


@dataclass
class Diagnosis:
    id: str
    title: str
    explanation: str
    fix: str
    commands: list[str] = field(default_factory=list)
    evidence: list[LogEvidence] = field(default_factory=list)
    score: float = 0.0
    before_root: bool = False  # a rule that matched only an earlier, handled exception (lines above the root's)

    def to_dict(self) -> dict:
        return {"id": self.id, "title": self.title, "evidence": [e.to_dict() for e in self.evidence],
                "fix": self.fix, "explanation": self.explanation, "commands": list(self.commands),
                "score": round(self.score, 1)}


def exit_evidence(code: int | None, sig: str | None = None) -> LogEvidence:
    sig = sig or signal_name(code)
    if sig and code is None:
        return LogEvidence(_("exit status"), None, _("the trainer ended with {signal}", signal=sig))
    if sig:
        return LogEvidence(_("exit status"), None, _("the trainer exited with {code} ({signal})", code=code,
                                                     signal=sig))
    return LogEvidence(_("exit status"), None, _("the trainer exited with {code}", code=code))


def where_evidence(cause: RootCause) -> list[LogEvidence]:
    """The rank and host that failed first, the step reached, the exit status."""
    out = []
    if cause.rank is not None or cause.host:
        ranks = ", ".join(str(r) for r in cause.failed_ranks) if len(cause.failed_ranks) > 1 else None
        if cause.host and cause.rank is not None:
            text = _("first failure: rank {rank} on {host}", rank=cause.rank, host=cause.host)
        elif cause.rank is not None:
            text = _("first failure: rank {rank}", rank=cause.rank)
        else:
            text = _("first failure on {host}", host=cause.host)
        if ranks:
            text += "; " + _("ranks with an exception: {ranks}", ranks=ranks)
        out.append(LogEvidence(_("ranks"), None, text))
    if cause.last_step is not None:
        text = (_("last step reached: {step} of {total}", step=cause.last_step, total=cause.total_steps)
                if cause.total_steps else _("last step reached: {step}", step=cause.last_step))
        out.append(LogEvidence(_("progress"), None, text))
    if cause.exit_code not in (None, 0) or cause.signal:
        out.append(exit_evidence(cause.exit_code, cause.signal))
    return out


def exception_evidence(exc: RaisedException) -> list[LogEvidence]:
    out = [LogEvidence(exc.file, exc.line, (exc.printed or exc.text)[:400])]
    if exc.frame_text:
        out.append(LogEvidence(exc.file, exc.frame_line, exc.frame_text))  # the frame that raised it
    return out
