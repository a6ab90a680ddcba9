"""The exceptions imagecheck raises.

A *missing* image is an answer, not a failure: it is a :class:`~imagecheck.result.CheckResult`
with ``Status.MISSING``, never an exception. Exceptions are for the cases where no answer
could be had, or where the input was wrong before any answer was asked for::

    ImagecheckError
    ├── UsageError                 bad input; nothing was sent to any registry (exit 2)
    │   ├── InvalidReferenceError  an image reference that breaks the grammar
    │   │   └── InvalidReferencesError  check() was given some: every one, nothing sent
    │   ├── CredentialsError       a config file, secret or helper that cannot be used
    │   └── ConfigFileError        a runtime's registry configuration (hosts.toml,
    │                              registries.conf) that cannot be used: names file and line
    └── RegistryError              the registry could not give an answer (exit 4)
        ├── TransientError         worth another try: connection errors, 408/429/5xx
        ├── AuthenticationError    the registry or its token service refused the credentials
        ├── CertificateError       the registry's TLS certificate is not trusted
        ├── CloudAuthError         a cloud identity gave no registry credential (STS, a
        │                          metadata server, Azure AD, ...): refused, unreachable, odd
        ├── ProtocolError          the registry answered something that breaks the protocol
        │   └── NotTLSError        an HTTPS connection met a server that does not speak TLS
        └── DeadlineExceeded       the run's deadline ended the check

Only ``RegistryError.temporary`` decides whether a failure is retried (see ``retry.py``).

A ``RegistryError`` may carry a :class:`Hint`: what setting would let the refused step go
ahead. The library states it in its own terms; each front end words it with its own option
names (``render.hint_text``), so no flag name is baked into a library message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from imagecheck._text import printable

# Longer messages are cut: an error is a line, not a document.
MAX_MESSAGE = 2000


class ImagecheckError(Exception):
    """Base of every error imagecheck raises on purpose.

    Its text is one printable line by construction: messages quote what came from elsewhere
    (a file's keys, a helper's name, a registry's words), and no such text may add a line or
    an escape sequence to what a person or a log reads.
    """

    def __str__(self) -> str:
        return printable(super().__str__(), MAX_MESSAGE)


class UsageError(ImagecheckError):
    """The input was wrong: an option, a file, a reference. Nothing was sent.

    ``setting``, when given, is the phrase the message names the wrong input by, in the
    library's terms (``"platform"``); a front end words it as its own option
    (``render.error_text``), as it words a :class:`Hint`.
    """

    def __init__(self, message: str, *, setting: str = "") -> None:
        super().__init__(message)
        self.setting = setting


class InvalidReferenceError(UsageError, ValueError):
    """An image reference that does not follow the Docker/OCI reference grammar."""

    def __init__(self, reference: str, reason: str) -> None:
        super().__init__(f"invalid reference {reference!r}: {reason}")
        self.reference = reference
        self.reason = reason


class InvalidReferencesError(InvalidReferenceError):
    """``check()`` was given invalid references: all of them, in input order, in ``invalid``.
    Raised before anything is sent; ``reference`` and ``reason`` are the first one's."""

    def __init__(self, invalid: Sequence[InvalidReferenceError]) -> None:
        first = invalid[0]
        super().__init__(first.reference, first.reason)
        self.invalid = tuple(invalid)
        if len(self.invalid) > 1:
            listed = "; ".join(f"{e.reference!r}: {e.reason}" for e in self.invalid)
            self.args = (f"{len(self.invalid)} invalid references: {listed}",)


class CredentialsError(UsageError):
    """A credential source that exists but cannot be used (bad JSON, bad base64, ...)."""


class ConfigFileError(UsageError):
    """A node runtime's registry configuration (a containerd ``hosts.toml`` directory, a
    ``registries.conf``) that cannot be used. The message names the file and, where the file
    says it, the line: ``FILE:LINE: what is wrong``."""

    def __init__(self, path: object, reason: str, *, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else f"{path}"
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Hint:
    """What would let a refused step go ahead, in the library's terms (``ClientOptions``):
    naming ``insecure_registry`` (a host, or host:port) as an insecure registry
    (``insecure_registries``), which allows plain HTTP, credentials over it, and unverified TLS
    for that host; or, with ``ca_file``, trusting the CA that signed the host's certificate
    (``ca_files``)."""

    insecure_registry: str = ""
    ca_file: bool = False


class RegistryError(ImagecheckError):
    """The registry could not be asked, or did not give a usable answer."""

    temporary: bool = False

    def __init__(
        self, message: str, *, status_code: int | None = None, hint: Hint | None = None
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.hint = hint


class TransientError(RegistryError):
    """A failure that may pass: connection trouble, timeouts, 408, 429 and 5xx answers.

    ``retry_after`` is the delay in seconds the registry asked for, when it said one.
    """

    temporary = True

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, status_code=status_code)
        self.retry_after = retry_after


class AuthenticationError(RegistryError):
    """The token service or registry refused the credentials we presented."""


class CertificateError(RegistryError):
    """The registry's TLS certificate did not verify against the trusted CAs."""


class CloudAuthError(RegistryError):
    """A cloud identity could not be turned into a registry credential: its token service or
    metadata server refused it, could not be reached, or answered something unusable. Not a
    denial by the registry (that is ``Status.DENIED``); ``temporary`` when a retry could help."""

    def __init__(self, message: str, *, temporary: bool = False) -> None:
        super().__init__(message)
        self.temporary = temporary


class ProtocolError(RegistryError):
    """The registry broke the distribution protocol (bad challenge, digest mismatch, ...)."""


class NotTLSError(ProtocolError):
    """An HTTPS connection met a server that answered without TLS: most likely plain HTTP.
    Not temporary (the server will not learn TLS on a retry); ``ping.py`` tries plain HTTP
    after it only where plain HTTP is allowed."""


class DeadlineExceeded(RegistryError):
    """The run's deadline passed before the registry answered."""
