"""What the Kubernetes API answers when it says no, as :mod:`imagecheck.cluster._model`'s
errors: whatever lightkube raises (its ``ApiError``, httpx2's errors, msgspec's decode errors)
is mapped here, and nothing else escapes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, NoReturn

import httpx2
import msgspec
from lightkube.core.exceptions import ApiError

from imagecheck._text import printable
from imagecheck.cluster._model import (
    AlreadyExists,
    ClusterError,
    Conflict,
    Forbidden,
    Gone,
    Kind,
    Unreachable,
)

# What lightkube lets through from a body it could not read: msgspec's errors (bad JSON,
# an integer out of range, a field of the wrong type), RecursionError (deep nesting), and
# the AttributeError/TypeError of a watch event whose object has no usable metadata.
_UNREADABLE = (msgspec.MsgspecError, RecursionError, ValueError, TypeError, AttributeError)


@contextlib.contextmanager
def mapped(
    verb: str, kind: Kind, namespace: str | None, *, missing_ok: bool = False,
    invalid_is_conflict: bool = False,
) -> Iterator[None]:  # fmt: skip
    """Whatever lightkube raises, as a :class:`ClusterError`; with ``missing_ok`` a 404 passes
    (get: None; delete: gone), with ``invalid_is_conflict`` a 422 is a :class:`Conflict`."""
    try:
        yield
    except ApiError as exc:
        code, reason, message = exc.status.code, exc.status.reason, exc.status.message
    except httpx2.HTTPStatusError as exc:  # lightkube made no ApiError of it: see _Status
        status = _status_of(exc.response)
        code, reason, message = status.code, status.reason, status.message
    except httpx2.HTTPError as exc:
        raise Unreachable(f"cannot reach the Kubernetes API: {printable(exc)}") from None
    except _UNREADABLE as exc:
        raise Unreachable(
            f"Kubernetes API: unreadable answer to {verb} {kind.plural}: {printable(exc)}"
        ) from None
    else:
        return
    if invalid_is_conflict and code == 422:
        raise Conflict(f"{kind.plural}: {printable(message or '')}")
    if not (missing_ok and code == 404):
        _raise_for(verb, kind, namespace, code, reason, message)


class _Status(msgspec.Struct):
    """The fields of a Status that matter here. lightkube reads a Status only when the
    Content-Type is exactly "application/json" (not with "; charset=utf-8") and not at all
    from a watch's first answer (an HTTP 410): this reads it from those too."""

    code: int
    reason: str | None = None
    message: str | None = None


def _status_of(response: httpx2.Response) -> _Status:
    """The Status in an error answer (its body already read, capped), or just its code."""
    try:
        status = msgspec.json.decode(response.read(), type=_Status)
    except (msgspec.MsgspecError, RecursionError, httpx2.HTTPError, httpx2.StreamError):
        # A watch's error answer is closed unread by lightkube: its code is all there is.
        return _Status(response.status_code)
    return msgspec.structs.replace(status, code=response.status_code)


def _raise_for(
    verb: str, kind: Kind, namespace: str | None, code: int | None, reason: Any, message: Any
) -> NoReturn:
    """The error for an HTTP status (and the Status's reason: 409 is two errors)."""
    said = f": {printable(message)}" if message else ""
    if code == 403:
        raise Forbidden(verb, kind, namespace)
    if code == 410:
        raise Gone(f"{kind.plural}: resource version too old{said}")
    if code == 409 and reason == "AlreadyExists":
        raise AlreadyExists(f"{kind.plural}{said}")
    if code == 409:
        raise Conflict(f"{kind.plural}{said}")
    if code is None or code >= 500 or code == 429:
        raise Unreachable(f"Kubernetes API answered {code} to {verb} {kind.plural}{said}")
    raise ClusterError(f"Kubernetes API answered {code} to {verb} {kind.plural}{said}")
