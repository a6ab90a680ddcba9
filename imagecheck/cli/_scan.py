"""``imagecheck scan``: every image in the files a pipeline has."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click

from imagecheck.cli._app import SCAN_EXIT_CODES_HELP, cli
from imagecheck.cli._options import (
    CheckSettings,
    check_options,
    check_valid,
    conclude,
    invalid_results,
    require_credentials_host,
    start_run,
)
from imagecheck.errors import UsageError
from imagecheck.render import render_scan_github, render_scan_json, render_scan_text
from imagecheck.result import CheckResult

if TYPE_CHECKING:  # scanning needs PyYAML: imported when scan runs, not by `check`
    from imagecheck.scanning import FileProblem, Occurrence

# A progress line on stderr (a terminal only) when a scan checks more images than this.
PROGRESS_MIN = 20
RENDERERS = {"text": render_scan_text, "json": render_scan_json, "github": render_scan_github}


@cli.command(epilog=SCAN_EXIT_CODES_HELP)
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["text", "json", "github"]),
    default="text",
    show_default=True,
    help="text: grouped by status with file:line; json: every occurrence with its result; "
    "github: workflow commands that annotate a pull request.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Template placeholders ({{ .Values.image }}, ${IMAGE}) count as invalid references "
    "instead of being skipped.",
)
@check_options
def scan(paths: tuple[str, ...], output: str, strict: bool, **options: Any) -> None:
    """Find every image in PATHS and check each distinct one once.

    PATHS are Kubernetes YAML files (every workload kind, List, custom resources with a pod
    template), Docker Compose files, Dockerfiles, directories (recursively), or - for stdin
    (helm template ... | imagecheck scan -). Invalid files are reported (exit 2) and the rest
    is still checked; so are the files that are not read: anything but a regular file, a
    file over the size limit, a link out of the directory scanned (or, for a relative PATH,
    out of the working directory).
    """
    settings = start_run(options)
    require_credentials_host(settings, "scan")
    if settings.password_stdin and "-" in paths:
        raise UsageError("--password-stdin and - (manifests on stdin) cannot share standard input")
    occurrences, problems = find_images(paths, strict)
    distinct = list(dict.fromkeys(o.image for o in occurrences if not o.skipped))
    results = {r.image: r for r in check_distinct(distinct, settings)}
    text = RENDERERS[output](occurrences, results, problems)
    if text:
        click.echo(text)
    for problem in problems if output != "text" else []:
        click.echo(
            f"imagecheck: error: {problem.file}:{problem.line or 0}: {problem.message}", err=True
        )
    # A file that could not be read is bad input (exit 2); the rest was still checked.
    conclude(list(results.values()), settings, invalid_input=bool(problems))


def find_images(paths: Sequence[str], strict: bool) -> tuple[list[Occurrence], list[FileProblem]]:
    """Every image in ``paths``, and the files that could not be read."""
    from imagecheck.scanning import PLACEHOLDER, scan_paths  # noqa: PLC0415 - PyYAML, only here

    occurrences, problems = scan_paths(paths, stdin=sys.stdin)
    if strict:  # placeholders become references (invalid ones); compose builds stay skipped
        occurrences = [
            replace(o, skipped=None) if o.skipped and o.skipped.startswith(PLACEHOLDER) else o
            for o in occurrences
        ]
    return occurrences, problems


def check_distinct(images: list[str], settings: CheckSettings) -> list[CheckResult]:
    """The invalid references' results, then the valid ones', checked: unlike ``check``,
    one bad reference in a file does not stop the others being checked."""
    invalid = invalid_results(images)
    bad = {r.image for r in invalid}
    valid = [image for image in images if image not in bad]
    if not valid:
        return invalid
    announce = None
    if len(valid) > PROGRESS_MIN and sys.stderr.isatty():
        announce = f"checking {len(valid)} distinct images..."
    return invalid + check_valid(valid, settings, announce=announce)
