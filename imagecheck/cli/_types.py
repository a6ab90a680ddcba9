"""Option values parsed where click reads them: durations and counts within bounds, mirror
pairs, registry hosts, platforms, listen addresses. A bad value is one line and exit 2,
without click's usage banner, before the command runs: ``imagecheck: error: --timeout: 'nan'
is not ...``."""

from __future__ import annotations

import math
import re
from typing import Any, NoReturn

import click

from imagecheck.errors import UsageError
from imagecheck.registry import parse_platform
from imagecheck.run import registry_host

_NUMBER_RE = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_INTEGER_RE = re.compile(r"[0-9]{1,9}")
_DURATION_PART_RE = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|h|m|s)")
_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def duration(text: str) -> float:
    """``90``, ``90s``, ``5m``, ``1h30m``, ``500ms`` as seconds."""
    text = text.strip()
    if _NUMBER_RE.fullmatch(text):
        return float(text)
    total, pos = 0.0, 0
    for part in _DURATION_PART_RE.finditer(text):
        if part.start() != pos:
            break
        total += float(part.group(1)) * _DURATION_UNITS[part.group(2)]
        pos = part.end()
    if pos == 0 or pos != len(text):
        raise click.BadParameter(f"{text!r} is not a duration such as 90s, 5m or 1h30m")
    return total


class OneLineBadParameter(click.BadParameter):
    """A bad option value as one line, like every other usage error: ``imagecheck: error:
    --timeout: 'nan' is not a finite number of seconds`` (exit 2), without click's usage
    banner."""

    def format_message(self) -> str:
        name = self.param.opts[-1] if self.param is not None and self.param.opts else "value"
        return f"{name}: {self.message}"

    def show(self, file: Any = None) -> None:
        click.echo(f"imagecheck: error: {self.format_message()}", err=True)


# click.ParamType is generic only from click 8.4; subscripting it would break 8.1-8.3.
class _Bounded(click.ParamType):  # type: ignore[type-arg]
    def fail(
        self, message: str, param: click.Parameter | None = None, ctx: click.Context | None = None
    ) -> NoReturn:
        raise OneLineBadParameter(message, ctx=ctx, param=param)


class Seconds(_Bounded):
    """A duration in seconds: ``90``, ``1.5``, ``90s``, ``5m``, ``1h30m``, ``500ms``, within
    ``[minimum, maximum]``. Never ``nan`` or ``inf``, never negative, never so large that a
    timer built from it overflows (``nan`` passes every comparison, so it is refused by
    name)."""

    name = "seconds"

    def __init__(self, minimum: float, maximum: float) -> None:
        self.minimum, self.maximum = minimum, maximum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            # A default may already be a number; what people type is text.
            seconds = float(value) if isinstance(value, int | float) else duration(str(value))
        except click.BadParameter:
            self.fail(f"{str(value)[:40]!r} is not a number of seconds or a duration such as "
                      "90s, 5m or 1h30m", param, ctx)  # fmt: skip
        if not math.isfinite(seconds) or not self.minimum <= seconds <= self.maximum:
            self.fail(f"{str(value)[:40]!r} is not between {self.minimum:g}s and "
                      f"{self.maximum:g}s", param, ctx)  # fmt: skip
        return seconds


class Count(_Bounded):
    """A whole number within ``[minimum, maximum]``."""

    name = "integer"

    def __init__(self, minimum: int, maximum: int) -> None:
        self.minimum, self.maximum = minimum, maximum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int):
            number = value
        elif isinstance(value, str) and _INTEGER_RE.fullmatch(value.strip()):
            number = int(value.strip())
        else:
            self.fail(f"{str(value)[:40]!r} is not a whole number", param, ctx)
        if not self.minimum <= number <= self.maximum:
            self.fail(f"{number} is not between {self.minimum} and {self.maximum}", param, ctx)
        return number


def mirror_pair(text: str) -> tuple[str, str]:
    """``SOURCE=MIRROR`` as two normalized registry hosts; a :class:`UsageError` otherwise."""
    source, sep, mirror = text.partition("=")
    if not sep:
        raise UsageError(
            f"--mirror {text!r}: expected SOURCE=MIRROR, e.g. docker.io=mirror.example.com:5000"
        )
    return registry_host(source), registry_host(mirror)


# A UsageError raised while click reads a value is the group's to report (exit 2), as any
# other: these types only name themselves for --help and keep what they parsed.
class MirrorPair(click.ParamType):  # type: ignore[type-arg]
    name = "mirror"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return value if isinstance(value, tuple) else mirror_pair(str(value))


class PlatformChoice(click.ParamType):  # type: ignore[type-arg]
    """``OS/ARCH[/VARIANT]`` or ``auto``, checked; kept as written (``auto`` is the machine the
    run is on, which the run resolves)."""

    name = "platform"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        parse_platform(str(value))  # its UsageError names --platform
        return str(value)


class RegistryHost(click.ParamType):  # type: ignore[type-arg]
    """``--credentials-for``: ``--credentials-for: 'x' is not a registry host: ...``."""

    name = "host"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return registry_host(str(value))
        except UsageError as exc:  # named like every other bad option value
            raise OneLineBadParameter(str(exc), ctx=ctx, param=param) from None


def listen_address(listen: str, flag: str = "--listen") -> tuple[str, int]:
    """``HOST:PORT`` (``[::]:8443`` too) as a host to bind and a port."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"{flag} {listen!r}: expected HOST:PORT, e.g. 0.0.0.0:8443")
    return host.strip("[]") or "0.0.0.0", int(port)  # noqa: S104 - a webhook listens for the API server
