"""A ``registries.conf`` bench: real Distribution registries to route to, and skopeo (which
reads the same file through containers/image) as the judge of what a CRI-O node would get.

Three TLS registries (``upstream``, ``mirror``, ``other``) share one CA; ``plain`` is a
plain-HTTP registry, for an ``insecure = true`` mirror. Each has its own storage, so a test
says which of them holds an image by pushing it there.
"""

from __future__ import annotations

import os
import re
import shutil
import ssl
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.images import PushedManifest, push_image
from tests.support.pki import make_tls_material
from tests.support.registry import LocalRegistry

SKOPEO_TIMEOUT = 60.0

# skopeo's wording (containers/image docker/docker_client.go, docker/errors.go), first match.
_SKOPEO_VERDICTS = (
    (re.compile(r"invalid reference format"), "invalid"),
    (re.compile(r"is blocked in|short-name"), "denied"),
    (re.compile(r"manifest unknown|name unknown|: not found|404"), "missing"),
    (re.compile(r"401|403|unauthorized|authentication required|denied", re.I), "denied"),
)


@dataclass(frozen=True)
class Bench:
    upstream: LocalRegistry
    mirror: LocalRegistry
    other: LocalRegistry
    plain: LocalRegistry
    ca_file: Path

    def push(self, registry: LocalRegistry, name: str) -> PushedManifest:
        """Push a one-layer image ``repo:tag`` to ``registry``; the same name gives the same
        bytes everywhere, so a mirror's copy has the upstream's digest."""
        repo, _, tag = name.rpartition(":")
        trust = ssl.create_default_context(cafile=str(self.ca_file))
        with httpx.Client(timeout=10.0, verify=trust, trust_env=False) as client:
            return push_image(client, registry.url, repo, tag, seed=name.rpartition("/")[2])


@contextmanager
def bench(workdir: Path, binary: str) -> Iterator[Bench]:
    tls = make_tls_material(workdir / "pki")
    with ExitStack() as stack:

        def start(name: str, *, plain: bool = False) -> LocalRegistry:
            (workdir / name).mkdir()
            registry = LocalRegistry(
                workdir / name, tls=None if plain else tls.server, binary=binary
            )
            return stack.enter_context(registry)

        yield Bench(
            upstream=start("upstream"),
            mirror=start("mirror"),
            other=start("other"),
            plain=start("plain", plain=True),
            ca_file=tls.ca_file,
        )


def skopeo_verdict(
    conf: Path, reference: str, ca_file: Path, *, skopeo: str = "skopeo"
) -> tuple[str, str]:
    """``skopeo inspect`` of ``reference`` with ``conf`` as its registries.conf, trusting
    ``ca_file`` for every host: the verdict, and the last line it printed."""
    with tempfile.TemporaryDirectory(prefix="skopeo-") as scratch:
        certs = Path(scratch) / "certs"
        certs.mkdir()
        shutil.copy(ca_file, certs / "ca.crt")
        (Path(scratch) / "auth.json").write_text("{}")
        args = [
            skopeo,
            "--registries-conf",
            str(conf),
            "inspect",
            "--no-tags",
            "--raw",
            "--authfile",
            str(Path(scratch) / "auth.json"),
            "--cert-dir",
            str(certs),
            f"docker://{reference}",
        ]
        env = {"HOME": scratch, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        done = subprocess.run(
            args, capture_output=True, text=True, env=env, timeout=SKOPEO_TIMEOUT, check=False
        )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    if done.returncode == 0:
        return "found", last
    for pattern, verdict in _SKOPEO_VERDICTS:
        if pattern.search(done.stderr):
            return verdict, last
    return "error", last
