"""Exit codes: the one map from how a run ended to the number a shell, a CI job or a pod sees.

:class:`ExitCode` names them and :data:`MEANINGS` says what each means (the command line's
``--help`` prints that table, so it is said once). Exit 4 is also an internal error (a bug);
130 and 143 are the command line's only.

When several apply, the first of 2, 1, 3, 4 wins (:data:`RESULT_PRECEDENCE`): a typo beats a
missing image, which beats a denial, which beats a flaky registry. A run ends either with
results (:func:`exit_code`) or with an error that stopped it before any answer
(:func:`error_exit_code`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Literal

from imagecheck.errors import ImagecheckError, UsageError
from imagecheck.result import CheckResult, Status


class ExitCode(enum.IntEnum):
    """How a run ended, as the number its process exits with (:data:`MEANINGS` says each)."""

    OK = 0
    MISSING = 1
    USAGE = 2
    DENIED = 3
    ERROR = 4
    INTERRUPTED = 130
    TERMINATED = 143


# What each code means to whoever reads a check's exit status.
MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "every image was found",
    ExitCode.MISSING: "at least one image is missing",
    ExitCode.USAGE: "usage error or invalid reference (nothing was sent to any registry)",
    ExitCode.DENIED: "access denied (repository does not exist or requires authorization)",
    ExitCode.ERROR: "registry unreachable, failing after retries, or deadline exceeded",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
    ExitCode.TERMINATED: "terminated (SIGTERM)",
}

# Results: the first status present decides. The order is the precedence.
RESULT_PRECEDENCE: tuple[tuple[Status, ExitCode], ...] = (
    (Status.INVALID, ExitCode.USAGE),
    (Status.MISSING, ExitCode.MISSING),
    (Status.DENIED, ExitCode.DENIED),
    (Status.ERROR, ExitCode.ERROR),
)

# Errors that stopped a run: the first class the error is an instance of decides.
ERROR_CODES: tuple[tuple[type[ImagecheckError], ExitCode], ...] = (
    (UsageError, ExitCode.USAGE),  # InvalidReferenceError, CredentialsError, ...
    (ImagecheckError, ExitCode.ERROR),  # RegistryError and anything else of ours
)

OnError = Literal["fail", "pass"]


def exit_code(
    results: Iterable[CheckResult], *, on_error: OnError = "fail", invalid_input: bool = False
) -> ExitCode:
    """The one exit code for a run's results.

    ``on_error="pass"``: results with ``Status.ERROR`` (a registry that could not be reached
    or kept failing) do not fail the run; missing, denied and invalid still do.
    ``invalid_input``: some input besides the references could not be used (``scan``'s
    unreadable files), which counts as an invalid reference does.
    """
    statuses = {r.status for r in results}
    if on_error == "pass":
        statuses.discard(Status.ERROR)
    if invalid_input:
        statuses.add(Status.INVALID)
    for status, code in RESULT_PRECEDENCE:
        if status in statuses:
            return code
    return ExitCode.OK


def error_exit_code(error: ImagecheckError) -> ExitCode:
    """The exit code of a run that ``error`` stopped before it had results."""
    return next(code for kind, code in ERROR_CODES if isinstance(error, kind))
