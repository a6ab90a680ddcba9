"""The exit-code table of ``--help`` is written from ``imagecheck.exitcodes``: each code with
its meaning there, the precedence in its order. (What the codes are for: test_exitcodes.py.)"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from imagecheck.cli import cli
from imagecheck.cli._help import EXIT_CODES_HELP, exit_codes_help
from imagecheck.exitcodes import MEANINGS, RESULT_PRECEDENCE, ExitCode

# What people have read in `imagecheck check --help` since exit codes were documented.
CHECK_TABLE = """\b
Exit codes:
  0    every image was found
  1    at least one image is missing
  2    usage error or invalid reference (nothing was sent to any registry)
  3    access denied (repository does not exist or requires authorization)
  4    registry unreachable, failing after retries, or deadline exceeded
  130  interrupted (Ctrl-C); 143 terminated (SIGTERM)
When several apply: 2, then 1, then 3, then 4."""


def test_the_table_reads_as_it_always_has() -> None:
    assert EXIT_CODES_HELP == CHECK_TABLE


def test_each_code_is_listed_with_its_meaning() -> None:
    lines = EXIT_CODES_HELP.splitlines()
    for code in ExitCode:
        if code is ExitCode.TERMINATED:  # on Ctrl-C's line: the two ways a run is stopped
            assert lines[-2].endswith(f"; {code:d} {MEANINGS[code]}")
        else:
            assert any(line.startswith(f"  {code:<5d}{MEANINGS[code]}") for line in lines)


def test_the_precedence_line_follows_the_code() -> None:
    order = [f"{code:d}" for _, code in RESULT_PRECEDENCE]
    assert EXIT_CODES_HELP.splitlines()[-1] == f"When several apply: {', then '.join(order)}."


def test_a_command_words_only_what_differs() -> None:
    table = exit_codes_help(
        {ExitCode.ERROR: "the API failed;\nan Event is only a warning"},
        codes=(ExitCode.OK, ExitCode.ERROR),
        precedence=False,
    )
    assert table == (
        "\b\nExit codes:\n"
        f"  0    {MEANINGS[ExitCode.OK]}\n"
        "  4    the API failed;\n"
        "       an Event is only a warning"
    )


@pytest.mark.parametrize("command", ["check", "scan", "audit"])
def test_help_prints_every_meaning_it_does_not_reword(command: str) -> None:
    done = CliRunner().invoke(cli, [command, "--help"], terminal_width=100)
    assert done.exit_code == 0
    output = " ".join(done.output.split())
    for code in (ExitCode.OK, ExitCode.MISSING, ExitCode.DENIED, ExitCode.INTERRUPTED):
        assert f"{code:d} {MEANINGS[code]}" in output
