"""Registry credentials from the Google identity the pod (or VM) has, for every Google registry
host (``gcr.io``, ``*.gcr.io``, ``<location>-docker.pkg.dev``, ...: ``_hosts.py``), as
docker-credential-gcr and go-containerregistry's google keychain get them, with no SDK: an
OAuth 2.0 access token offered as the password of the user ``oauth2accesstoken``,
https://cloud.google.com/artifact-registry/docs/docker/authentication#token

Which identity, decided with no request, in Application Default Credentials' order
(https://google.aip.dev/auth/4110):

1. ``GOOGLE_APPLICATION_CREDENTIALS`` set (and not empty): the credential configuration it
   names, a workload identity federation ``external_account`` (``_googlefed.py``). ADC looks
   no further once it is set, and neither does this: a missing file or one of another type is
   an error, not a reason to ask the metadata server instead.
2. the metadata server, when ``GCE_METADATA_HOST`` is set (an emulator or a proxy;
   google-auth and ``cloud.google.com/go/compute/metadata`` honour it, as ``host[:port]``),
   or when the machine's DMI product name (``product_name`` under ``/sys/class/dmi/id``)
   starts with ``Google``, as google-auth's ``detect_gce_residency_linux`` decides: GCE VMs and
   GKE nodes say ``Google Compute Engine``, and a pod reads its node's. GKE Workload Identity
   answers at the same address, its GKE metadata server standing in for the VM's,
   https://cloud.google.com/kubernetes-engine/docs/concepts/workload-identity
3. none: nothing is asked, and Google's registries are asked anonymously.

The metadata flow, https://cloud.google.com/compute/docs/metadata/querying-metadata:
``GET http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token``
with ``Metadata-Flavor: Google``, answered with ``access_token``, ``expires_in`` and
``token_type``. A 200 answer without ``Metadata-Flavor: Google`` is not the metadata server's
(a proxy, a captive portal) and is refused. Then ``.../default/email``, once per token, for
the identity messages show; that one is only for messages, so its failure costs the name,
not the token.

An access token is good for every Google registry, so the keychain keeps one credential per
identity, for the token's lifetime (an hour from the metadata server and STS).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from imagecheck._deadline import Deadline
from imagecheck._files import read_regular_file
from imagecheck._text import printable
from imagecheck.authn._credentials import Credentials
from imagecheck.authn.cloud._googleapi import (
    GoogleToken,
    access_token,
    answer_object,
    google_reason,
)
from imagecheck.authn.cloud._googleapi import seconds as answer_seconds
from imagecheck.authn.cloud._googlefed import CONFIG_ENV, federated_token
from imagecheck.authn.cloud._hosts import CloudRegistry
from imagecheck.authn.cloud._http import CloudAnswer, CloudHTTP, temporary_status
from imagecheck.authn.cloud._keychain import CloudToken
from imagecheck.errors import CloudAuthError, CredentialsError

log = logging.getLogger(__name__)

HOST_ENV = "GCE_METADATA_HOST"
DEFAULT_METADATA_HOST = "metadata.google.internal"
USERNAME = "oauth2accesstoken"
FLAVOR = {"Metadata-Flavor": "Google"}
# What a Google access token needs to pull, for messages: Artifact Registry's reader role;
# a gcr.io repository still in Container Registry is a Cloud Storage bucket.
NEEDS = (
    "which needs roles/artifactregistry.reader on the repository (a gcr.io repository "
    "not moved to Artifact Registry: roles/storage.objectViewer on its bucket)"
)
# sysfs says 4096 bytes for every attribute file, whatever it holds.
MAX_DMI = 4096
MAX_EMAIL = 254
_ACCOUNT = "instance/service-accounts/default"
# host[:port] as GCE_METADATA_HOST holds it: a DNS name, an IPv4 address or [IPv6]; no
# scheme, no path, no userinfo.
_HOST = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?"
)


def source(env: Mapping[str, str], dmi_dir: Path) -> GoogleSource:
    """The Google source for a process with ``env`` on a machine whose DMI is ``dmi_dir``."""
    return GoogleSource(
        config=env.get(CONFIG_ENV) or None,
        metadata_host=env.get(HOST_ENV) or None,
        on_google=on_google_machine(dmi_dir),
        in_kubernetes=bool(env.get("KUBERNETES_SERVICE_HOST")),
    )


def on_google_machine(dmi_dir: Path) -> bool:
    """Whether the DMI product name starts with ``Google``: an unreadable one says no."""
    try:
        raw = read_regular_file(
            dmi_dir / "product_name", limit=MAX_DMI, what="DMI", error=CredentialsError
        )
    except CredentialsError:
        return False
    return raw.decode("utf-8", "replace").strip().startswith("Google")


@dataclass(frozen=True)
class GoogleSource:
    """The identity of the module docstring, and its flow. ``config`` is
    ``GOOGLE_APPLICATION_CREDENTIALS``, ``metadata_host`` ``GCE_METADATA_HOST``."""

    config: str | None = None
    metadata_host: str | None = None
    on_google: bool = False
    in_kubernetes: bool = False

    def identity(self, registry: CloudRegistry) -> str | None:
        if self.config is not None:
            return f"the Google external account in {CONFIG_ENV} {printable(self.config)}"
        if self.metadata_host is not None or self.on_google:
            return f"the default service account of the {self._metadata_name}"
        return None

    def cache_key(self, registry: CloudRegistry) -> str:
        return self.identity(registry) or ""

    async def token(
        self, registry: CloudRegistry, http: CloudHTTP, deadline: Deadline
    ) -> CloudToken:
        if self.config is not None:
            found = await federated_token(Path(self.config), http, deadline)
        elif self.metadata_host is not None or self.on_google:
            found = await self._metadata_token(http, deadline)
        else:
            raise CloudAuthError("no Google identity here")  # the keychain asked identity()
        credentials = Credentials(
            username=USERNAME, password=found.access_token, source=f"{found.identity}, {NEEDS}"
        )
        return CloudToken(credentials, found.lifetime)

    # -- the metadata server ----------------------------------------------------------------

    @property
    def _host(self) -> str:
        host = self.metadata_host or DEFAULT_METADATA_HOST
        if not _HOST.fullmatch(host):
            raise CredentialsError(f"{HOST_ENV} must be a host or host:port")
        return host

    @property
    def _metadata_name(self) -> str:
        kind = "GKE" if self.in_kubernetes else "GCE"
        shown = printable(self.metadata_host or DEFAULT_METADATA_HOST, 100)
        return f"{kind} metadata server at http://{shown}"

    async def _metadata_token(self, http: CloudHTTP, deadline: Deadline) -> GoogleToken:
        base = f"http://{self._host}/computeMetadata/v1/{_ACCOUNT}"
        what = f"the {self._metadata_name}"
        answer = await http.send(
            "GET", f"{base}/token", what=what, deadline=deadline, headers=FLAVOR
        )
        if answer.status != 200:
            raise self._refused(answer, what)
        _require_flavor(answer, what)
        data = answer_object(answer, what)
        token = access_token(data, "access_token", what)
        lifetime = answer_seconds(data, "expires_in", what)
        kind = data.get("token_type", "Bearer")
        if not isinstance(kind, str) or kind.lower() != "bearer":
            raise CloudAuthError(f"{what} answered a token_type other than Bearer")
        email = await self._email(base, what, http, deadline)
        whose = "pod's" if self.in_kubernetes else "VM's"
        who = f"Google identity {email}" if email else "default Google service account"
        return GoogleToken(token, lifetime, f"the {whose} {who} ({self._metadata_name})")

    def _refused(self, answer: CloudAnswer, what: str) -> CloudAuthError:
        reason = google_reason(answer)
        if answer.status == 404:
            fix = (
                "bind the pod's Kubernetes ServiceAccount to one with Workload Identity"
                if self.in_kubernetes
                else "attach one to the VM"
            )
            return CloudAuthError(f"{what} has no service account here ({reason}): {fix}")
        hint = ""
        if answer.status == 403 and self.in_kubernetes:
            hint = (
                ": with Workload Identity, the Kubernetes ServiceAccount needs "
                "roles/iam.workloadIdentityUser on the Google service account it names"
            )
        return CloudAuthError(
            f"{what} gave no token for the default service account ({reason}){hint}",
            temporary=temporary_status(answer.status),
        )

    async def _email(self, base: str, what: str, http: CloudHTTP, deadline: Deadline) -> str:
        """The default service account's email, or "" when it is not to be had."""
        try:
            answer = await http.send(
                "GET", f"{base}/email", what=what, deadline=deadline, headers=FLAVOR
            )
        except CloudAuthError as exc:
            log.debug("no email for the default service account: %s", exc)
            return ""
        if answer.status != 200 or answer.headers.get("Metadata-Flavor") != "Google":
            return ""
        email = answer.body.decode("utf-8", "replace").strip()
        shown = printable(email, MAX_EMAIL)
        return email if email == shown and " " not in email and len(email) <= MAX_EMAIL else ""


def _require_flavor(answer: CloudAnswer, what: str) -> None:
    if answer.headers.get("Metadata-Flavor") != "Google":
        raise CloudAuthError(
            f"{what} answered without Metadata-Flavor: Google, so it is not the metadata server"
        )
