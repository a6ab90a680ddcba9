"""``imagecheck scan``: every image in the files a pipeline has."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, NoReturn

import click

from imagecheck.cli._help import exit_codes_help
from imagecheck.cli._options import check_options, report_output
from imagecheck.cli._progress import MIN_FILES, counter
from imagecheck.cli._run import check_images, conclude, explain_all, parse_images
from imagecheck.cli._settings import CheckSettings, require_credentials_host, with_settings
from imagecheck.errors import UsageError
from imagecheck.exitcodes import ExitCode
from imagecheck.result import CheckResult

if TYPE_CHECKING:  # scanning needs PyYAML: imported when scan runs, not by `check`
    from imagecheck.scanning import FileProblem, ScanReport

# A file that cannot be read is bad input too, and does not stop the rest.
SCAN_EXIT_CODES_HELP = exit_codes_help(
    {
        ExitCode.USAGE: "usage error, invalid reference, or a file that cannot be read "
        "(the rest is checked)"
    }
)
LIST_OUTPUTS = ("text", "json")


@click.command(epilog=SCAN_EXIT_CODES_HELP)
@click.argument("paths", nargs=-1, required=True)
@report_output("file:line", "occurrence")
@click.option(
    "--strict",
    is_flag=True,
    help="Template placeholders ({{ .Values.image }}, ${IMAGE}) count as invalid references "
    "instead of being skipped.",
)
@click.option(
    "--list",
    "list_only",
    is_flag=True,
    help="Only list what the files hold (text or json), checking nothing: no registry is "
    "contacted, no credentials read. Exit 0, or 2 on invalid references or files.",
)
@check_options
@with_settings
def scan(
    paths: tuple[str, ...], output: str, strict: bool, list_only: bool, settings: CheckSettings
) -> None:
    """Find every image in PATHS and check each distinct one once.

    PATHS are Kubernetes manifests (every workload kind, List, custom resources with a pod
    template) and Docker Compose files, in YAML or JSON; Dockerfiles; directories
    (recursively); or - for stdin (helm template ... | imagecheck scan -). Invalid files are
    reported (exit 2) and the rest is still checked; so are the files that are not read:
    anything but a regular file, a file over the size limit, a link out of the directory
    scanned (or, for a relative PATH, out of the working directory). A Helm chart's raw
    templates, and JSON files that are not manifests, are skipped with a note.
    """
    if list_only:
        list_images(paths, output, strict, settings)
    require_credentials_host(settings, "scan")
    if settings.password_stdin and "-" in paths:
        raise UsageError("--password-stdin and - (manifests on stdin) cannot share standard input")
    report = find_images(paths, strict)
    distinct = list(dict.fromkeys(o.image for o in report.occurrences if not o.skipped))
    results = {r.image: r for r in check_distinct(distinct, settings)}
    from imagecheck.scanning import (  # noqa: PLC0415 - PyYAML, only here
        render_scan_github,
        render_scan_json,
        render_scan_text,
    )

    render = {"text": render_scan_text, "json": render_scan_json, "github": render_scan_github}
    text = render[output](report.occurrences, results, report.problems, report.notes)
    if text:
        click.echo(text)
    echo_problems(report.problems, output)
    # A file that could not be read is bad input (exit 2); the rest was still checked.
    conclude(list(results.values()), settings, invalid_input=bool(report.problems))


def list_images(
    paths: Sequence[str], output: str, strict: bool, settings: CheckSettings
) -> NoReturn:
    """``--list``: every occurrence, the invalid references named, nothing sent or read but
    the files (credentials, even --password-stdin, are left alone)."""
    if output not in LIST_OUTPUTS:
        raise UsageError(f"--list prints text or json, not {output}")
    report = find_images(paths, strict)
    _, invalid = parse_images(dict.fromkeys(o.image for o in report.occurrences if not o.skipped))
    from imagecheck.scanning import (  # noqa: PLC0415 - PyYAML, only here
        render_scan_list_json,
        render_scan_list_text,
    )

    render = render_scan_list_text if output == "text" else render_scan_list_json
    text = render(report.occurrences, {r.image: r for r in invalid}, report.problems, report.notes)
    if text:
        click.echo(text)
    echo_problems(report.problems, output)
    conclude(invalid, settings, invalid_input=bool(report.problems))


def echo_problems(problems: Sequence[FileProblem], output: str) -> None:
    """Text output shows them in place; the other formats keep stdout for machines."""
    for problem in problems if output != "text" else []:
        click.echo(
            f"imagecheck: error: {problem.file}:{problem.line or 0}: {problem.message}", err=True
        )


def find_images(paths: Sequence[str], strict: bool) -> ScanReport:
    """Every image in ``paths``, the files that could not be read, and those skipped; a
    counter of files on a terminal's stderr while a large tree is read."""
    from imagecheck.scanning import PLACEHOLDER, scan_files  # noqa: PLC0415 - PyYAML, only here

    progress = counter("scanned", "files", MIN_FILES)
    try:
        report = scan_files(paths, stdin=sys.stdin, progress=progress)
    finally:
        if progress is not None:
            progress.close()
    if strict:  # placeholders become references (invalid ones); compose builds stay skipped
        occurrences = [
            replace(o, skipped=None) if o.skipped and o.skipped.startswith(PLACEHOLDER) else o
            for o in report.occurrences
        ]
        report = replace(report, occurrences=occurrences)
    return report


def check_distinct(images: list[str], settings: CheckSettings) -> list[CheckResult]:
    """The invalid references' results, then the valid ones', checked: unlike ``check``,
    one bad reference in a file does not stop the others being checked."""
    return explain_all(check_images(images, settings, all_or_nothing=False))
