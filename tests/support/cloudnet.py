"""Cloud registry names served here: a CLI run that resolves ``<acct>.dkr.ecr.<region>.
amazonaws.com``, ``us-docker.pkg.dev`` or ``<name>.azurecr.io`` to a local registry, over TLS
with a certificate for that name.

The cloud keychain acts only on a cloud's exact host names (``authn/cloud/_hosts.py``), so an
end-to-end test needs the real name to reach the real registry started here. No code path is
changed for it: the CLI runs in its own mount namespace (``unshare --mount``) where
``/etc/hosts`` is a file the test wrote, so the resolver (glibc's ``files`` source, as for any
process) answers 127.0.0.1 for exactly the names given; every other name resolves as before.
The registry's port is kept in the image reference (``<host>:<port>/repo``), which the
classifier allows (a host's owner owns its ports).

Needs root, or unprivileged user namespaces (``--map-root-user`` then).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.support.clirun import Run, cli_env
from tests.support.pki import TLSMaterial, make_tls_material

LOOPBACK = "127.0.0.1"


def make_cloud_tls(directory: Path, names: Iterable[str]) -> TLSMaterial:
    """A CA and a server certificate for ``names`` (and 127.0.0.1, localhost)."""
    return make_tls_material(directory, names)


@dataclass(frozen=True)
class NameServer:
    """The names a run resolves to loopback, written as an ``/etc/hosts`` under ``directory``."""

    directory: Path
    names: tuple[str, ...]

    @property
    def hosts_file(self) -> Path:
        path = self.directory / "hosts"
        lines = [f"{LOOPBACK} localhost", "::1 localhost ip6-localhost"]
        lines += [f"{LOOPBACK} {name}" for name in self.names]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run with this ``/etc/hosts`` bound over the real one, in a private mount
        namespace that ends with it."""
        user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
        script = 'mount --bind "$0" /etc/hosts && exec "$@"'
        return [
            "unshare", *user, "--mount", "--propagation", "private",
            "sh", "-c", script, str(self.hosts_file), *argv,
        ]  # fmt: skip

    def run_cli(
        self,
        args: list[str],
        home: Path,
        *,
        env: Mapping[str, str] | None = None,
        stdin: str = "",
        timeout: float = 60,
    ) -> Run:
        """``python -m imagecheck args`` as :func:`tests.support.clirun.run_cli` runs it (a
        clean HOME, no outer credentials or cloud variables), resolving these names here."""
        proc = subprocess.run(
            self.command([sys.executable, "-m", "imagecheck", *args]),
            input=stdin,
            capture_output=True,
            text=True,
            env=cli_env(home, dict(env or {})),
            timeout=timeout,
            check=False,
        )
        return Run(proc.returncode, proc.stdout, proc.stderr)
