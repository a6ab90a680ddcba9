"""A running registry as the integration tests see it (:class:`RegistryEndpoint`), and the
names the session's Basic and token registries are configured with.

The fixtures that start those registries live in ``tests/integration/conftest.py``; tests,
support modules and the differential suite import the type and the names from here.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.images import SampleImages
from tests.support.registry import LocalRegistry
from tests.support.tokenserver import TokenServer

USERNAME = "alice"
TOKEN_SERVICE = "imagecheck-test-registry"
TOKEN_ISSUER = "imagecheck-test-issuer"


@dataclass(frozen=True)
class RegistryEndpoint:
    """A running registry as tests see it: where it is, what it holds, how to get in."""

    host: str
    url: str
    images: SampleImages
    registry: LocalRegistry
    ca_file: Path | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    token_server: TokenServer | None = None

    def ref(self, name: str) -> str:
        """``ref("sample/app:1.0.0")`` -> ``127.0.0.1:PORT/sample/app:1.0.0``."""
        return f"{self.host}/{name}"

    @property
    def verify(self) -> ssl.SSLContext | bool:
        """What to pass as ``httpx.Client(verify=...)``: a context trusting ``ca_file``."""
        if self.ca_file is None:
            return True
        return ssl.create_default_context(cafile=str(self.ca_file))

    @property
    def basic_auth(self) -> tuple[str, str] | None:
        if self.username is None or self.password is None:
            return None
        return (self.username, self.password)
