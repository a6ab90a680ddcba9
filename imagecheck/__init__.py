"""imagecheck: does this container image exist in its registry, and can this node pull it?

The library never prints and never exits; ``imagecheck.cli`` does both. Typical use::

    from imagecheck import ClientOptions, Deadline, ImageChecker, parse_reference

    async with ImageChecker(ClientOptions()) as checker:
        result = await checker.check(parse_reference("busybox:1.36"), Deadline.after(30))
        print(result.status)  # Status.FOUND / MISSING / DENIED / ERROR
"""

__version__ = "0.1.0"

from imagecheck.client import ClientOptions, ImageChecker
from imagecheck.credentials import Credentials, Keychain
from imagecheck.errors import (
    AuthenticationError,
    CredentialsError,
    DeadlineExceeded,
    ImagecheckError,
    InvalidReferenceError,
    ProtocolError,
    RegistryError,
    TransientError,
    UsageError,
)
from imagecheck.reference import Reference, parse_reference
from imagecheck.result import CheckResult, Status
from imagecheck.retry import Deadline, RetryPolicy
from imagecheck.sources import default_keychain

__all__ = [
    "AuthenticationError",
    "CheckResult",
    "ClientOptions",
    "Credentials",
    "CredentialsError",
    "Deadline",
    "DeadlineExceeded",
    "ImageChecker",
    "ImagecheckError",
    "InvalidReferenceError",
    "Keychain",
    "ProtocolError",
    "Reference",
    "RegistryError",
    "RetryPolicy",
    "Status",
    "TransientError",
    "UsageError",
    "__version__",
    "default_keychain",
    "parse_reference",
]
