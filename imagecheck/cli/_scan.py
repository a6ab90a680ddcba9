"""``imagecheck scan``: every image in the files a pipeline has."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

import click

from imagecheck.cli._app import (
    EXIT_OK,
    EXIT_USAGE,
    SCAN_EXIT_CODES_HELP,
    cli,
    exit_code,
    fail,
    run_async,
)
from imagecheck.cli._options import (
    _PROGRESS_MIN,
    build_keychain,
    check_all,
    check_options,
    parse_all,
    require_credentials_host,
    start_run,
    warn_passed_errors,
    write_termination_log,
)
from imagecheck.render import (
    render_scan_github,
    render_scan_json,
    render_scan_text,
    termination_summary,
)
from imagecheck.result import Status


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
    settings, client_options, wait = start_run(options)
    require_credentials_host(settings, "scan")
    if settings.password_stdin and "-" in paths:
        fail("--password-stdin and - (manifests on stdin) cannot share standard input")
    from imagecheck.scanning import PLACEHOLDER, scan_paths  # noqa: PLC0415 - PyYAML, only here

    occurrences, problems = scan_paths(paths, stdin=sys.stdin)
    if strict:  # placeholders become references (invalid ones); compose builds stay skipped
        occurrences = [
            replace(o, skipped=None) if o.skipped and o.skipped.startswith(PLACEHOLDER) else o
            for o in occurrences
        ]
    distinct = list(dict.fromkeys(o.image for o in occurrences if not o.skipped))
    parsed = parse_all(distinct)
    results = {r.image: r for r in parsed if r.status is Status.INVALID}
    items = [(r.image, r.reference) for r in parsed if r.reference is not None]
    if items:
        keychain = build_keychain(settings, [])
        if len(items) > _PROGRESS_MIN and sys.stderr.isatty():
            click.echo(f"imagecheck: checking {len(items)} distinct images...", err=True)
        checked = run_async(check_all(client_options, keychain, items, settings.deadline, wait))
        results.update((r.image, r) for r in checked)
    renderer = {"text": render_scan_text, "json": render_scan_json, "github": render_scan_github}
    text = renderer[output](occurrences, results, problems)
    if text:
        click.echo(text)
    for problem in problems if output != "text" else []:
        click.echo(
            f"imagecheck: error: {problem.file}:{problem.line or 0}: {problem.message}", err=True
        )
    code = exit_code(list(results.values()), errors_pass=settings.on_error == "pass")
    warn_passed_errors(results.values(), settings)
    code = EXIT_USAGE if problems else code
    if code != EXIT_OK:
        write_termination_log(settings.termination_log, termination_summary(list(results.values())))
    sys.exit(code)
