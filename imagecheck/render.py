"""Turning results into what people and machines read: text lines, JSON, and the one-line
summary Kubernetes shows as a pod's termination message. Pure: returns strings (or yields
them, for output too large to hold at once).

A message may carry text from elsewhere (a registry's error, a file's content). Its source
makes it printable (``_text.printable``); the text renderers do so again, so that no line
of output is ever forged by a newline or an ANSI escape. JSON needs no such help:
``json.dumps`` escapes every control character, and keeps the message as it was.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from imagecheck._text import printable
from imagecheck.errors import Hint, ImagecheckError, RegistryError, UsageError
from imagecheck.result import CheckResult, Status

P = TypeVar("P")  # a place an image is used: a file's line (scan), a workload (audit)

# Kubernetes keeps at most 4096 bytes of a container's termination message.
TERMINATION_LOG_LIMIT = 4096


# The command line's words for the settings library messages name (``UsageError.setting``,
# the webhook's ``errors_pass``): the one place a library's setting becomes an option.
OPTION_TEXT = {
    "platform": "--platform",
    "the in-cluster API client": "--from-pod",  # kube.SETTING: InCluster's errors
    "errors_pass": "--on-error pass",
}


def option_text(setting: str) -> str:
    """``setting`` (a library's name for an input) in the words of the command line."""
    return OPTION_TEXT.get(setting, setting)


def hint_text(hint: Hint) -> str:
    """A :class:`~imagecheck.errors.Hint` in the words of the command line (``check``, ``scan``
    and ``serve`` share the options)."""
    if hint.ca_file:
        return "pass --ca-file with the CA that signed it"
    return f"add --insecure-registry {hint.insecure_registry} to allow it"


def explained(result: CheckResult) -> CheckResult:
    """``result`` with its hint, if any, worded at the end of its message: what front ends
    (the CLI, the webhook) show."""
    if result.hint is None:
        return result
    message = f"{result.message}; {hint_text(result.hint)}" if result.message else ""
    return replace(result, message=message or hint_text(result.hint), hint=None)


def error_text(error: ImagecheckError) -> str:
    """An error that stopped a run, as one line: the setting it names, if any, worded as the
    option, and its hint, if any, worded at the end."""
    text = str(error)
    if isinstance(error, UsageError) and error.setting:
        text = text.replace(error.setting, option_text(error.setting), 1)
    hint = error.hint if isinstance(error, RegistryError) else None
    return f"{text}; {hint_text(hint)}" if hint is not None else text


def shown(result: CheckResult) -> str:
    """The normalized reference; an invalid one as given, quoted when it has odd characters."""
    return str(result.reference) if result.reference is not None else as_written(result.image)


def as_written(image: str) -> str:
    """``image``, quoted when it has odd characters (spaces, control characters)."""
    plain = image.isprintable() and not any(c.isspace() for c in image)
    return image if plain else repr(image)


def _line(text: str) -> str:
    """``text`` with control characters replaced; not cut (the source capped what it took)."""
    return printable(text, sys.maxsize)


def render_text(results: Sequence[CheckResult]) -> str:
    """One line per image: status, normalized reference, digest (found) or reason."""
    return "".join(text_chunks(results))


def text_chunks(results: Sequence[CheckResult]) -> Iterator[str]:
    """``render_text``, one line at a time (a newline before each but the first). The
    reference column is as wide as the widest, so ``results`` are read twice."""
    width = max((len(shown(r)) for r in results), default=0)
    separator = ""
    for r in results:
        detail = _detail(r)
        yield separator + f"{r.status.value:<8} {shown(r):<{width}}  {detail}".rstrip()
        separator = "\n"


def _detail(r: CheckResult) -> str:
    """A found image's digest, and the host that had it when that is not the reference's
    own (a mirror, a host the node's registry configuration routes to); else the reason."""
    if r.status is not Status.FOUND or not r.digest:
        return _line(r.message)
    own = r.reference.api_host if r.reference is not None else None
    return f"{r.digest} via {r.registry}" if r.registry and r.registry != own else r.digest


def render_json(results: Sequence[CheckResult]) -> str:
    return "".join(json_chunks(results))


def json_chunks(results: Iterable[CheckResult]) -> Iterator[str]:
    """``json.dumps([r.to_dict() for r in results], indent=2)``, one result at a time: the
    same bytes, without 100,000 results' dicts and text held at once. A JSON string holds no
    raw newline, so indenting an element one level deeper
    is inserting two spaces after each of its newlines."""
    opened = False
    for r in results:
        yield ",\n  " if opened else "[\n  "
        opened = True
        yield json.dumps(r.to_dict(), indent=2).replace("\n", "\n  ")
    yield "\n]" if opened else "[]"


def termination_summary(results: Sequence[CheckResult], limit: int = TERMINATION_LOG_LIMIT) -> str:
    """``imagecheck: missing X (reason); denied Y (reason)``: every image that was not found,
    on one line, cut to ``limit`` bytes of UTF-8 (with a count of what was left out)."""
    head = "imagecheck: "
    bad = [r for r in results if r.status is not Status.FOUND]
    parts: list[str] = []
    size = len(head.encode())
    # Only as many parts as can fit are worded: 100,000 missing images must not make
    # 100,000 candidate lines.
    for r in bad:
        part = f"{r.status.value} {shown(r)} ({_line(r.message)})"
        size += len(part.encode()) + (2 if parts else 0)
        parts.append(part)
        if size > limit:
            break
    line = head + "; ".join(parts)
    if size <= limit:
        return line
    for keep in range(len(parts) - 1, 0, -1):
        candidate = head + "; ".join(parts[:keep]) + f"; and {len(bad) - keep} more"
        if len(candidate.encode()) <= limit:
            return candidate
    return line.encode()[: limit - 3].decode(errors="ignore") + "..."


# Worst first: how scan and audit group their images.
STATUS_ORDER = (Status.INVALID, Status.MISSING, Status.DENIED, Status.ERROR, Status.FOUND)


def status_groups(
    places: Mapping[str, Sequence[P]],
    results: Mapping[str, CheckResult],
    where: Callable[[P], str],
) -> list[str]:
    """Text lines: the images grouped by status, worst first, each once with its answer and
    then every place it is used (``where`` words a place), for scan's and audit's text."""
    by_status: dict[Status, list[str]] = {}
    for image in places:
        by_status.setdefault(results[image].status, []).append(image)
    lines: list[str] = []
    for status in STATUS_ORDER:
        images = by_status.get(status, [])
        if images:
            lines.append(f"{status.value} ({len(images)})")
        for image in images:
            r = results[image]
            detail = _detail(r)
            lines.append(f"  {shown(r)}  {detail}".rstrip())
            lines.extend(f"    {where(place)}" for place in places[image])
    return lines


def _github_escape(text: str, *, property_value: bool = False) -> str:
    """Workflow-command escaping (actions/toolkit command.ts)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if property_value:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


# The same rules for audit's and scan's renderers: one home for each.
printable_line = _line
github_escape = _github_escape


@dataclass(frozen=True)
class Report:
    """A checking command's output, worded once: what goes to stdout (``chunks``, streamed),
    the warnings for stderr, and the pod's termination message."""

    chunks: Iterator[str]
    warnings: list[str]
    summary: str


def report(results: Sequence[CheckResult], output: str | None, *, pass_errors: bool) -> Report:
    """``results`` as ``output`` (``"text"``, ``"json"``, or ``None`` for a command that printed
    them its own way), each hint worded as the command line words it. With ``pass_errors``
    (``--on-error pass``), a warning for each image that could not be checked."""
    shown_results = [explained(r) for r in results]
    chunks: Iterator[str] = iter(())
    if output == "json":
        chunks = json_chunks(shown_results)
    elif output == "text":
        chunks = text_chunks(shown_results)
    warnings = [
        f"imagecheck: warning: could not check {shown(r)} ({r.message}); "
        f"passing because of {option_text('errors_pass')}"
        for r in (shown_results if pass_errors else [])
        if r.status is Status.ERROR
    ]
    return Report(chunks, warnings, termination_summary(shown_results))
