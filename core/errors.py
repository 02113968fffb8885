"""One error contract for devtune: every error a person is expected to act on is a `DevtuneError`, and its
kind says what it means and which exit code the CLI gives it. `cli.main.main()` maps them once; the wizard's
step base shows any of them in the step's error box. Handlers neither pick exit codes for errors nor wrap
them again.

    kind          exit  meaning
    BadInput        2   the request cannot be read or is invalid (a flag, a file, a field): fix it, run again
    Unavailable     2   something it needs is not there (a run, a server, a config, a tool, a model)
    Refused         1   it looked and refused (lint errors, a name taken, a split that would leak)
    Failed          1   it ran and failed (an export, a server that did not start, a request refused)

Exit codes of outcomes that are not errors: 0 done, 1 problems found (a lint with errors, a failed check,
a tuned model worse than its base), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

from typing import ClassVar

EXIT_OK = 0
EXIT_PROBLEMS = 1  # problems found, refused or failed
EXIT_USAGE = 2  # bad input, or what it needs is not there
EXIT_INTERRUPTED = 130


class DevtuneError(Exception):
    """Base of devtune's own errors; the message says what went wrong and what to do."""

    exit_code: ClassVar[int] = EXIT_USAGE
    kind: ClassVar[str] = "error"


class BadInput(DevtuneError):
    exit_code = EXIT_USAGE
    kind = "bad_input"


class Unavailable(DevtuneError):
    exit_code = EXIT_USAGE
    kind = "unavailable"


class Refused(DevtuneError):
    exit_code = EXIT_PROBLEMS
    kind = "refused"


class Failed(DevtuneError):
    exit_code = EXIT_PROBLEMS
    kind = "failed"


KINDS: tuple[type[DevtuneError], ...] = (BadInput, Unavailable, Refused, Failed)


def exit_code_of(exc: BaseException) -> int | None:
    """The exit code the CLI gives `exc`; None for an exception that is not devtune's (a bug: it propagates)."""
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return exc.exit_code if isinstance(exc, DevtuneError) else None
