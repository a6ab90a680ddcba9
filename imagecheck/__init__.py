"""imagecheck: does this container image exist in its registry, and can this node pull it?

What ``imagecheck check`` does, from Python::

    import imagecheck

    results = imagecheck.check(["busybox:1.36", "ghcr.io/org/app:1.0.0"], deadline=30)
    for result in results:
        print(result.status, result.image, result.digest or result.message)
    code = imagecheck.exit_code(results)  # 0 found, 1 missing, 3 denied, 4 registry error

``check`` blocks; ``await imagecheck.acheck(...)`` takes the same options inside an event
loop. Both read the credential sources the command reads (Docker's config.json and its
helpers, podman's auth.json, ``DOCKER_AUTH_CONFIG``, pull secrets, ``credentials=``), and
raise only for bad input, before anything is sent (:class:`UsageError`; invalid references
are one :class:`InvalidReferencesError` naming them all). A missing image is an answer: a
:class:`CheckResult` with :attr:`Status.MISSING`, never an exception.

The library never prints and never exits; ``imagecheck.cli`` does both. The packages below
are there for finer control: ``imagecheck.reference`` (parsing), ``imagecheck.authn``
(credential sources, ``default_keychain``), ``imagecheck.registry`` (``ImageChecker``).
"""

from __future__ import annotations

from imagecheck._lazy import lazy_face
from imagecheck._version import __version__

# typing.TYPE_CHECKING without importing typing (and the re it pulls in), which every start-up
# would pay for: type checkers treat any name TYPE_CHECKING as true.
TYPE_CHECKING = False

# The public names are loaded on first use (PEP 562): `import imagecheck` alone, as
# `imagecheck --version` does, costs nothing, and `check` pulls in httpx, asyncio and the
# credential sources only when it is called for.
_EXPORTS = {
    "Credentials": "imagecheck.authn._credentials",
    "AuthenticationError": "imagecheck.errors",
    "CertificateError": "imagecheck.errors",
    "CredentialsError": "imagecheck.errors",
    "DeadlineExceeded": "imagecheck.errors",
    "Hint": "imagecheck.errors",
    "ImagecheckError": "imagecheck.errors",
    "InvalidReferenceError": "imagecheck.errors",
    "InvalidReferencesError": "imagecheck.errors",
    "ProtocolError": "imagecheck.errors",
    "RegistryError": "imagecheck.errors",
    "TransientError": "imagecheck.errors",
    "UsageError": "imagecheck.errors",
    "ExitCode": "imagecheck.exitcodes",
    "error_exit_code": "imagecheck.exitcodes",
    "exit_code": "imagecheck.exitcodes",
    "Reference": "imagecheck.reference._reference",
    "parse_reference": "imagecheck.reference._reference",
    "CheckResult": "imagecheck.result",
    "Status": "imagecheck.result",
    "acheck": "imagecheck.run",
    "check": "imagecheck.run",
}

if TYPE_CHECKING:  # what mypy and IDEs see: the same names, imported eagerly
    from imagecheck.authn import Credentials
    from imagecheck.errors import (
        AuthenticationError,
        CertificateError,
        CredentialsError,
        DeadlineExceeded,
        Hint,
        ImagecheckError,
        InvalidReferenceError,
        InvalidReferencesError,
        ProtocolError,
        RegistryError,
        TransientError,
        UsageError,
    )
    from imagecheck.exitcodes import ExitCode, error_exit_code, exit_code
    from imagecheck.reference import Reference, parse_reference
    from imagecheck.result import CheckResult, Status
    from imagecheck.run import acheck, check


if not TYPE_CHECKING:  # hidden from checkers, which would take any misspelt name for it
    __getattr__, __dir__ = lazy_face(__name__, _EXPORTS, globals())


__all__ = [
    "AuthenticationError",
    "CertificateError",
    "CheckResult",
    "Credentials",
    "CredentialsError",
    "DeadlineExceeded",
    "ExitCode",
    "Hint",
    "ImagecheckError",
    "InvalidReferenceError",
    "InvalidReferencesError",
    "ProtocolError",
    "Reference",
    "RegistryError",
    "Status",
    "TransientError",
    "UsageError",
    "__version__",
    "acheck",
    "check",
    "error_exit_code",
    "exit_code",
    "parse_reference",
]
