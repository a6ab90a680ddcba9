"""A checking command's library call and its end: references parsed once, the valid ones
checked as the settings say, the output streamed, the exit code (``imagecheck.exitcodes``)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import NoReturn

import click

from imagecheck.cli._app import run_async
from imagecheck.cli._credentials import read_credentials
from imagecheck.cli._progress import MIN_IMAGES, counter
from imagecheck.cli._settings import CheckSettings
from imagecheck.cli._termination import write_termination_log
from imagecheck.exitcodes import ExitCode, exit_code
from imagecheck.reference import Reference
from imagecheck.render import explained, shown, termination_summary
from imagecheck.result import CheckResult, Status
from imagecheck.run import check_parsed, parse_each

# Chunks of output written at once by echo_stream: about 128 results of JSON.
OUTPUT_BATCH = 256

Parsed = list[tuple[str, Reference]]


def parse_images(images: Iterable[str]) -> tuple[Parsed, list[CheckResult]]:
    """Each image parsed once: the valid ones as ``(text, reference)``, and a result for each
    invalid one, in order (none: all valid)."""
    parsed, invalid = parse_each(images)
    return parsed, [CheckResult(e.reference, None, Status.INVALID, e.reason) for e in invalid]


def check_valid(
    items: Sequence[tuple[str, Reference]],
    settings: CheckSettings,
    *,
    pod_pull_secrets: Sequence[tuple[str, str]] = (),
) -> list[CheckResult]:
    """Check ``items`` (parsed references) as the settings say: the credentials read first,
    the results explained. Many images show a counter on a terminal's stderr (not with
    --verbose, whose log lines would break it)."""
    credentials = read_credentials(settings)
    progress = None if settings.verbose else counter("checked", "images", MIN_IMAGES)
    options = settings.client_options()
    chain = settings.keychain(credentials, pod_pull_secrets)
    run = check_parsed(
        items,
        options,
        chain,
        deadline=settings.deadline,
        wait=settings.wait,
        progress=lambda line: click.echo(f"imagecheck: {line}", err=True),
        checked=progress,
    )
    try:
        return explain_all(run_async(run))
    finally:
        if progress is not None:
            progress.close()


def explain_all(results: Iterable[CheckResult]) -> list[CheckResult]:
    """Results with their hints worded as the command line words them."""
    return [explained(r) for r in results]


def conclude(
    results: Sequence[CheckResult], settings: CheckSettings, *, invalid_input: bool = False
) -> NoReturn:
    """After the output: warn of errors passed, write the termination message, and exit with
    the one exit code (``imagecheck.exitcodes``)."""
    code = exit_code(results, on_error=settings.on_error, invalid_input=invalid_input)
    warn_passed_errors(results, settings)
    if code != ExitCode.OK:
        write_termination_log(settings.termination_log, termination_summary(results))
    sys.exit(code)


def warn_passed_errors(results: Iterable[CheckResult], settings: CheckSettings) -> None:
    if settings.on_error != "pass":
        return
    for r in results:
        if r.status is Status.ERROR:
            click.echo(
                f"imagecheck: warning: could not check {shown(r)} ({r.message}); "
                "passing because of --on-error pass",
                err=True,
            )


def echo_stream(chunks: Iterable[str]) -> None:
    """``click.echo("".join(chunks))``, a batch of chunks at a time: the output of 100,000
    results is never one string."""
    batch: list[str] = []
    for chunk in chunks:
        batch.append(chunk)
        if len(batch) >= OUTPUT_BATCH:
            click.echo("".join(batch), nl=False)
            batch.clear()
    click.echo("".join(batch))
