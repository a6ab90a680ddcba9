"""The exit-code tables the commands' ``--help`` ends with, written from
``imagecheck.exitcodes`` (the codes, their meanings, their precedence), so that the help and
the code cannot drift apart. A command that means something else by a code says only that."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from imagecheck.exitcodes import MEANINGS, RESULT_PRECEDENCE, ExitCode

# Where a meaning's second line starts: under the first, past "  130  ".
_INDENT = "\n" + " " * 7


def exit_codes_help(
    meanings: Mapping[ExitCode, str] | None = None,
    *,
    codes: Iterable[ExitCode] = tuple(ExitCode),
    precedence: bool = True,
) -> str:
    """``Exit codes:`` and a line per code in ``codes`` (Ctrl-C's and SIGTERM's share one),
    each meaning ``exitcodes.MEANINGS``' unless ``meanings`` words it for this command; with
    ``precedence``, the line saying which code wins. ``\\b``: click keeps the lines as they
    are."""
    said = {**MEANINGS, **(meanings or {})}
    lines = ["\b", "Exit codes:"]
    for code in codes:
        if code is ExitCode.TERMINATED:
            continue  # on the line of INTERRUPTED, as the two ways a run is stopped
        text = said[code].replace("\n", _INDENT)
        if code is ExitCode.INTERRUPTED:
            text += f"; {ExitCode.TERMINATED:d} {said[ExitCode.TERMINATED]}"
        lines.append(f"  {code:<5d}{text}")
    if precedence:
        order = ", then ".join(f"{code:d}" for _, code in RESULT_PRECEDENCE)
        lines.append(f"When several apply: {order}.")
    return "\n".join(lines)


EXIT_CODES_HELP = exit_codes_help()
