"""Text from elsewhere made safe to show: one line, no control characters, no secrets.

A registry's error message, a helper's stderr or an admission client's field ends up in a CI
log or a pod's termination message. :func:`printable` replaces control and format characters
(newlines, ANSI escapes, ``\\r``, bidi overrides), so nothing from outside can forge an output
line, and caps the length; :func:`redact` removes the credentials a server may echo back.
"""

from __future__ import annotations

import base64
import unicodedata
from collections.abc import Iterable

# Text from elsewhere that is shown to a person (a registry's error message, a helper's stderr).
MAX_SHOWN = 200
# Shorter "secrets" are not redacted from text: they would blank out ordinary words.
MIN_REDACTED = 4


def printable(text: object, limit: int = MAX_SHOWN) -> str:
    """``text`` made safe for one line of output: control and format characters (newlines,
    ESC, ``\\r``, bidi overrides) become ``?``, and at most ``limit`` characters are kept."""
    shown = str(text)
    if len(shown) > limit:
        shown = shown[:limit] + "..."
    return "".join("?" if _unsafe(ch) else ch for ch in shown)


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each secret replaced by ``[redacted]``: a server that
    echoes the credentials it was sent (an error message quoting the ``Authorization``
    header) must not get them printed into a CI log. Call before :func:`printable`, whose cap
    could otherwise cut a secret in two."""
    for secret in sorted({s for s in secrets if len(s) >= MIN_REDACTED}, key=len, reverse=True):
        text = text.replace(secret, "[redacted]")
    return text


def authorization_secrets(header: str | None) -> list[str]:
    """The secrets an ``Authorization`` value carries, in the forms a server may echo them:
    the credential as sent, and for Basic the decoded ``user:password`` and the password."""
    if not header:
        return []
    _, _, credential = header.partition(" ")
    found = [credential.strip()]
    if header[:6].lower() == "basic ":
        try:
            decoded = base64.b64decode(credential.strip(), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return found
        found += [decoded, decoded.partition(":")[2]]
    return found


def _unsafe(ch: str) -> bool:
    return unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp")
