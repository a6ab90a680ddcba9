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

The library never prints and never exits; ``imagecheck.cli`` does both. The modules below
(``client.ImageChecker``, ``sources.default_keychain``, ...) are there for finer control.
"""

__version__ = "0.1.0"

from imagecheck.credentials import Credentials
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
