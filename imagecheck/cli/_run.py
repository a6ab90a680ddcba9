"""A checking command's library call and its end: references parsed once, the valid ones
checked as the settings say, the output streamed, the exit code (``imagecheck.exitcodes``)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import NoReturn

import click

from imagecheck.cli._app import run_async
from imagecheck.cli._credentials import read_credentials
from imagecheck.cli._progress import MIN_IMAGES, Counter, counter
from imagecheck.cli._settings import CheckSettings
from imagecheck.cli._termination import write_termination_log
from imagecheck.exitcodes import ExitCode, exit_code
from imagecheck.reference import Reference
from imagecheck.render import explained, report
from imagecheck.result import CheckResult, Status
from imagecheck.run import check_parsed, parse_each

# Chunks of output written at once by conclude: about 128 results of JSON.
OUTPUT_BATCH = 256

Parsed = list[tuple[str, Reference]]


def parse_images(images: Iterable[str]) -> tuple[Parsed, list[CheckResult]]:
    """Each image parsed once: the valid ones as ``(text, reference)``, and a result for each
    invalid one, in order (none: all valid)."""
    parsed, invalid = parse_each(images)
    return parsed, [CheckResult(e.reference, None, Status.INVALID, e.reason) for e in invalid]


def check_images(
    images: Iterable[str],
    settings: CheckSettings,
    *,
    pod_pull_secrets: Sequence[tuple[str, str]] = (),
    all_or_nothing: bool = True,
) -> list[CheckResult]:
    """A checking command's library call: each image parsed once, a result for each invalid
    one first. With any invalid and ``all_or_nothing`` (``check``), or none valid, nothing is
    sent or read (not even the password on standard input); otherwise (``scan``: one bad
    reference in a file does not stop the others) the credentials are read, then every valid
    image checked as the settings say."""
    parsed, results = parse_images(images)
    if not parsed or (results and all_or_nothing):
        return results
    credentials = read_credentials(settings)
    with _counter(settings) as checked:
        options = settings.client_options()
        chain = settings.keychain(credentials, pod_pull_secrets)
        run = check_parsed(
            parsed,
            options,
            chain,
            deadline=settings.deadline,
            wait=settings.wait,
            progress=lambda line: click.echo(f"imagecheck: {line}", err=True),
            checked=checked,
        )
        return results + run_async(run)


@contextmanager
def _counter(settings: CheckSettings) -> Iterator[Counter | None]:
    """Many images show a counter on a terminal's stderr (not with --verbose, whose log lines
    would break it), closed when the check ends however it ends."""
    progress = None if settings.verbose else counter("checked", "images", MIN_IMAGES)
    try:
        yield progress
    finally:
        if progress is not None:
            progress.close()


def explain_all(results: Iterable[CheckResult]) -> list[CheckResult]:
    """Results with their hints worded as the command line words them."""
    return [explained(r) for r in results]


def conclude(
    results: Sequence[CheckResult],
    settings: CheckSettings,
    *,
    output: str | None = None,
    invalid_input: bool = False,
) -> NoReturn:
    """The end of a checking command: the results printed as ``output`` (``None``: the
    command printed them), errors passed warned of, the termination message written, and the
    one exit code (``imagecheck.exitcodes``)."""
    worded = report(results, output, pass_errors=settings.on_error == "pass")
    # A batch of chunks at a time: the output of 100,000 results is never one string. A
    # command that printed its results its own way (``output=None``) streams nothing here.
    batch: list[str] = []
    for chunk in worded.chunks:
        batch.append(chunk)
        if len(batch) >= OUTPUT_BATCH:
            click.echo("".join(batch), nl=False)
            batch.clear()
    if output is not None:
        click.echo("".join(batch))
    code = exit_code(results, on_error=settings.on_error, invalid_input=invalid_input)
    for warning in worded.warnings:
        click.echo(warning, err=True)
    if code != ExitCode.OK:
        write_termination_log(settings.termination_log, worded.summary)
    sys.exit(code)
