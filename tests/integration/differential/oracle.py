"""The three pullers of the differential suite, each asked the same question the same way.

* :class:`Containerd` -- the judge. Debian's ``containerd`` daemon with its own config, root,
  state and socket under a temporary directory (CRI plugin off), driven by ``ctr images pull``:
  the same resolver, authorizer, hosts.toml handling and platform selection as the CRI plugin
  the kubelet calls. Each pull runs in a namespace of its own and the content store is
  ``isolated`` (``content_sharing_policy``), so no pull is answered from an earlier one's blobs.
* :func:`skopeo_verdict` -- the second opinion: ``skopeo inspect`` (containers/image, the
  library CRI-O pulls with), which also selects the node's platform.
* :func:`imagecheck_verdict` -- ``python -m imagecheck check --platform auto``, as the
  initContainer runs it (see ``examples/job.yaml``).

Every puller gets the same :class:`Access`: the registry's CA, the credentials, plain HTTP or
not, and the mirrors, each in its own configuration language (hosts.toml, registries.conf,
flags). Verdicts are read from exit codes and, for the two peers, from their error text: the
table in :func:`classify` is the one place that reads them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from tests.support.clirun import Run, run_cli
from tests.support.containerd import ContainerdDaemon

# A pull that the kubelet would retry (its image back-off: 10 s, 20 s, ... 5 min) is asked
# again, at once, this many times in all while the answer is a transient error.
KUBELET_ATTEMPTS = 3
PULL_TIMEOUT = 60.0


class Verdict(StrEnum):
    FOUND = "found"
    MISSING = "missing"
    DENIED = "denied"
    ERROR = "error"
    INVALID = "invalid"


@dataclass(frozen=True)
class Mirror:
    """A pull-through mirror for a registry: ``url`` is ``http(s)://HOST:PORT``."""

    url: str

    @property
    def host(self) -> str:
        return self.url.split("://", 1)[1]


@dataclass(frozen=True)
class Access:
    """How every puller reaches the scenario's registry (``registry`` is ``HOST:PORT``)."""

    registry: str
    plain_http: bool = False
    ca_file: Path | None = None
    user: tuple[str, str] | None = field(default=None, repr=False)
    mirrors: tuple[Mirror, ...] = ()
    # Hosts (``HOST:PORT``) the operator has declared insecure (plain HTTP allowed), e.g. the
    # realm host of a registry behind a TLS-terminating proxy. containerd needs no such
    # declaration for a realm; imagecheck does when it would send credentials there.
    insecure_hosts: tuple[str, ...] = ()
    # A containerd registry configuration directory (``certs.d``) given as it is to containerd
    # (``--hosts-dir``, the CRI plugin's ``config_path``) and to imagecheck (``--hosts-dir``);
    # no hosts.toml is written then. skopeo reads no hosts.toml: it asks ``registry`` itself.
    hosts_dir: Path | None = None


@dataclass(frozen=True)
class Answer:
    """One puller's verdict on one reference, with the line it was read from."""

    verdict: Verdict
    detail: str
    attempts: tuple[Verdict, ...] = ()

    def __str__(self) -> str:
        if len(self.attempts) > 1:
            return "→".join(self.attempts)
        return str(self.verdict)


# -- reading verdicts ------------------------------------------------------------------------

# Order matters: the first pattern that matches the error text wins. Each peer's wording, from
# its source: containerd remotes/docker/resolver.go and authorizer.go, images/image.go
# ("no match for platform in manifest"); containers/image docker/docker_client.go and
# docker/errors.go (containers/image maps a 401 to "authentication required" and keeps a
# registry's own error code such as MANIFEST_UNKNOWN or DENIED in the text).
_PEER_PATTERNS: tuple[tuple[re.Pattern[str], Verdict], ...] = (
    (
        re.compile(r"invalid reference format|invalid reference|repository name must"),
        Verdict.INVALID,
    ),
    (
        re.compile(r"no match for platform|choosing image instance|no image found in"),
        Verdict.MISSING,
    ),
    (
        re.compile(r"manifest unknown|name unknown|: not found|404 Not Found|StatusCode: 404\b"),
        Verdict.MISSING,
    ),
    (
        re.compile(
            r"401 Unauthorized|403 Forbidden|authentication required|unauthorized|"
            r"denied|insufficient_scope|invalid username/password|failed to authorize",
            re.IGNORECASE,
        ),
        Verdict.DENIED,
    ),
)


def classify(returncode: int, text: str) -> Verdict:
    """A peer's verdict from its exit code and error text."""
    if returncode == 0:
        return Verdict.FOUND
    for pattern, verdict in _PEER_PATTERNS:
        if pattern.search(text):
            return verdict
    return Verdict.ERROR


_EXIT_VERDICTS = {
    0: Verdict.FOUND,
    1: Verdict.MISSING,
    2: Verdict.INVALID,
    3: Verdict.DENIED,
    4: Verdict.ERROR,
}


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


# -- containerd ------------------------------------------------------------------------------


class Containerd(ContainerdDaemon):
    """The private daemon (tests/support/containerd.py); :meth:`pull` is the kubelet's pull."""

    def pull(self, reference: str, access: Access) -> Answer:
        """``ctr images pull`` as the kubelet's pull: the node's platform, hosts.toml from
        ``access``; asked again while the answer is a transient error (the kubelet's
        back-off), up to :data:`KUBELET_ATTEMPTS` times in all."""
        attempts: list[Verdict] = []
        detail = ""
        for _ in range(KUBELET_ATTEMPTS):
            verdict, detail = self._pull_once(reference, access)
            attempts.append(verdict)
            if verdict is not Verdict.ERROR:
                break
        return Answer(attempts[-1], detail, tuple(attempts))

    def _pull_once(self, reference: str, access: Access) -> tuple[Verdict, str]:
        with tempfile.TemporaryDirectory(prefix="hosts-", dir=self.workdir) as scratch:
            hosts_dir = str(access.hosts_dir or scratch)
            args = [
                self.ctr,
                "--address",
                str(self.socket),
                "--namespace",
                f"pull-{uuid.uuid4().hex[:12]}",
                "images",
                "pull",
                "--hosts-dir",
                hosts_dir,
            ]
            if access.hosts_dir is None:
                _write_hosts_toml(Path(hosts_dir), access)
            if access.user is not None:
                args += ["--user", f"{access.user[0]}:{access.user[1]}"]
            done = _run([*args, reference])
        text = done.stdout + done.stderr
        return classify(done.code, text), _last_line(done.stderr or done.stdout)


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _write_hosts_toml(hosts_dir: Path, access: Access) -> None:
    """containerd's hosts.toml for the registry (``docs/hosts.md``): the server, its CA, and
    the mirrors in order. containerd 1.6 ignores a file without a ``[host]`` table (it then
    uses its defaults: plain HTTP for loopback hosts, HTTPS for the rest), so the registry
    itself is always listed as a host too, after its mirrors."""
    if access.ca_file is None and not access.mirrors:
        return  # containerd's defaults, as on a node with no registry configuration
    scheme = "http" if access.plain_http else "https"
    server = f"{scheme}://{access.registry}"
    lines = [f"server = {_toml_string(server)}"]
    if access.ca_file is not None and server.startswith("https://"):
        # The server entry is tried last, after the [host] entries: it needs the CA too.
        lines.append(f"ca = {_toml_string(str(access.ca_file))}")
    lines.append("")
    for mirror in (*access.mirrors, Mirror(server)):
        lines.append(f"[host.{_toml_string(mirror.url)}]")
        lines.append('  capabilities = ["pull", "resolve"]')
        if access.ca_file is not None and mirror.url.startswith("https://"):
            lines.append(f"  ca = {_toml_string(str(access.ca_file))}")
        lines.append("")
    directory = hosts_dir / access.registry
    directory.mkdir(parents=True)
    (directory / "hosts.toml").write_text("\n".join(lines), encoding="utf-8")


def _run(args: Sequence[str], *, stdin: str = "", env: dict[str, str] | None = None) -> Run:
    try:
        done = subprocess.run(
            args,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=PULL_TIMEOUT,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Run(124, "", f"timed out after {PULL_TIMEOUT:.0f} s")
    return Run(done.returncode, done.stdout, done.stderr)


# -- skopeo ----------------------------------------------------------------------------------


def skopeo_verdict(reference: str, access: Access, *, skopeo: str = "skopeo") -> Answer:
    """``skopeo inspect`` (containers/image selects the node's platform from an index, as a
    CRI-O pull does). Mirrors go in a registries.conf of its own; no user or system
    configuration is read."""
    with tempfile.TemporaryDirectory(prefix="skopeo-") as scratch:
        work = Path(scratch)
        authfile = work / "auth.json"
        authfile.write_text("{}", encoding="utf-8")
        conf = work / "registries.conf"
        conf.write_text(_registries_conf(access), encoding="utf-8")
        args = [
            skopeo,
            "--registries-conf",
            str(conf),
            "--command-timeout",
            f"{PULL_TIMEOUT - 5:.0f}s",
            "inspect",
            "--no-tags",
            "--retry-times",
            str(KUBELET_ATTEMPTS - 1),
            "--authfile",
            str(authfile),
        ]
        if access.plain_http:
            args.append("--tls-verify=false")
        elif access.ca_file is not None:
            certs = work / "certs"
            certs.mkdir()
            shutil.copy(access.ca_file, certs / "ca.crt")
            args += ["--cert-dir", str(certs)]
        if access.user is not None:
            args += ["--creds", f"{access.user[0]}:{access.user[1]}"]
        env = {"HOME": scratch, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        done = _run([*args, f"docker://{reference}"], env=env)
    return Answer(classify(done.code, done.stderr), _last_line(done.stderr))


def _registries_conf(access: Access) -> str:
    """containers-registries.conf(5) v2: the registry, insecure when it is plain HTTP, and
    its mirrors in order."""
    lines = ["[[registry]]", f"location = {_toml_string(access.registry)}"]
    if access.plain_http:
        lines.append("insecure = true")
    for mirror in access.mirrors:
        lines += [
            "",
            "[[registry.mirror]]",
            f"location = {_toml_string(mirror.host)}",
            f"insecure = {'true' if mirror.url.startswith('http://') else 'false'}",
        ]
    return "\n".join(lines) + "\n"


# -- imagecheck ------------------------------------------------------------------------------


def imagecheck_verdict(
    reference: str, access: Access, home: Path, options: Sequence[str] = ()
) -> Answer:
    """``imagecheck check --platform auto`` with the same CA, credentials and mirrors (and the
    scenario's own ``options``), run as every CLI test runs it
    (:func:`~tests.support.clirun.run_cli`: a clean environment)."""
    args = ["check", "--platform", "auto", "--deadline", "30", *options]
    stdin = ""
    if access.ca_file is not None:
        args += ["--ca-file", str(access.ca_file)]
    if access.user is not None:
        args += ["--username", access.user[0], "--password-stdin"]
        stdin = access.user[1]
    for mirror in access.mirrors:
        args += ["--mirror", f"{access.registry}={mirror.host}"]
    for host in access.insecure_hosts:
        args += ["--insecure-registry", host]
    if access.hosts_dir is not None:
        args += ["--hosts-dir", str(access.hosts_dir)]
    done = run_cli([*args, reference], home, stdin=stdin, timeout=PULL_TIMEOUT)
    verdict = _EXIT_VERDICTS.get(done.code, Verdict.ERROR)
    return Answer(verdict, _json_detail(done.stdout) or _last_line(done.stderr or done.stdout))


def _json_detail(stdout: str) -> str:
    """With ``--output json``, the result's status and message (a found result's message says
    which host answered, where the text output shows only the digest)."""
    try:
        results = json.loads(stdout)
    except ValueError:
        return ""
    if not isinstance(results, list):
        return ""
    return "; ".join(
        f"{r.get('status')}: {r.get('message') or r.get('digest')}"
        for r in results
        if isinstance(r, dict)
    )
