"""Which cloud's registry a host is, exactly: the first gate before a cloud identity is asked
for a registry credential. Pure: no I/O.

:func:`cloud_registry` takes a reference's registry (``Reference.registry``: the host as
written, with any ``:port``) and answers a :class:`CloudRegistry` only for a host of exactly one
of the shapes below, else None. A look-alike (``evilgcr.io``, ``gcr.io.attacker.test``,
``x.azurecr.io.evil.test``) must get nothing, so every pattern is matched whole and each shape
names the one cloud whose identity may be asked.

Case: the parser keeps a registry's case as written (``Foo/bar`` is host ``Foo``), and DNS
would fold it, but every tool below writes and compares these hosts in lowercase. A host with
any uppercase letter is None here, not folded: it then gets no cloud credential, the safe way
to be wrong. Likewise a trailing dot, an IP address, userinfo, an empty label or one over 63
characters, and any non-ASCII character (an IDN look-alike) are None. A ``:port`` (1 to 65535,
no leading zero) is kept apart and allowed: whoever owns a host owns all of its ports, and the
official ECR helper reads the host name alone (``url.Hostname()``) the same way.

The shapes, and where they come from:

**AWS ECR, private**: ``<account>.dkr.ecr[-fips].<region>.<suffix>`` on the IPv4 suffixes
``amazonaws.com``, ``amazonaws.com.cn``, ``amazonaws.eu``, ``c2s.ic.gov``, ``sc2s.sgov.gov``,
``cloud.adc-e.uk``, ``csp.hci.ic.gov``, and ``<account>.dkr-ecr[-fips].<region>.<suffix>`` on
the dual-stack suffixes ``on.aws`` and ``on.amazonwebservices.com.cn``. The account is 12
digits; the region ``<letters>(-<letters>)+-<digits>``, and it must be one of the suffix's
partition (``cn-`` only under the China suffixes, ``us-gov-`` only under the commercial ones).

- the suffixes and the account, FIPS and region groups: ``ecrPattern`` of the official helper,
  https://github.com/awslabs/amazon-ecr-credential-helper/blob/main/ecr-login/api/client.go,
  and the same regex in the kubelet plugin (``ecrPrivateHostPattern``),
  https://github.com/kubernetes/cloud-provider-aws/blob/master/cmd/ecr-credential-provider/main.go
- which infix goes with which suffix (the regexes allow either anywhere): the kubelet
  ``matchImages`` EKS nodes are given,
  https://github.com/awslabs/amazon-eks-ami/blob/main/nodeadm/internal/kubelet/image-credential-provider.go,
  and AWS's dual-stack form ``<registry-id>.dkr-ecr.<aws-region>.on.aws``,
  https://docs.aws.amazon.com/AmazonECR/latest/userguide/ecr-requests.html
- partitions by region prefix (``regionRegex``):
  https://github.com/aws/aws-sdk-go-v2/blob/main/internal/endpoints/awsrulesfn/partitions.json

**AWS ECR Public**: exactly ``public.ecr.aws``, and its dual-stack name ``ecr-public.aws.com``
(``ExtractRegistry`` in the helper's client.go above).

**Google**: ``gcr.io``, any one DNS label under it (``us.``, ``eu.``, ``asia.``,
``marketplace.``; all of ``*.gcr.io`` is Google's), ``container.cloud.google.com``; Artifact
Registry's ``<location>-docker.pkg.dev`` and regional ``docker.<location>.rep.pkg.dev``, a
location being ``us``/``europe``/``asia`` or a region such as ``europe-west10``.

- ``DefaultGCRRegistries`` and ``DefaultARRegistries``,
  https://github.com/GoogleCloudPlatform/docker-credential-gcr/blob/master/config/const.go
- ``isGoogle``, https://github.com/google/go-containerregistry/blob/main/pkg/v1/google/keychain.go
- ``containerRegistryUrls``,
  https://github.com/kubernetes/cloud-provider-gcp/blob/master/pkg/gcpcredential/gcpcredential.go

**Azure ACR**: ``<name>.azurecr.io``, ``.azurecr.cn`` (China), ``.azurecr.us`` (US Government),
``.azurecr.de`` (Germany), the name 5 to 50 lowercase letters and digits.

- ``acrRE`` and ``containerRegistryUrls``,
  https://github.com/kubernetes-sigs/cloud-provider-azure/blob/master/pkg/credentialprovider/azure_credentials.go
- the name's length and alphabet,
  https://learn.microsoft.com/en-us/rest/api/containerregistry/registries/check-name-availability

Where the sources are looser, this is stricter: ``*.pkg.dev`` (go-containerregistry, the GCP
kubelet plugin) is only the two Docker shapes; ``dkr[.-]ecr`` with any suffix (both AWS regexes)
is only the pairs above; ``.google.com`` (go-containerregistry) is only
``container.cloud.google.com``; a region may not hold ``_``. A custom Azure cloud's suffix is
configuration, not a shape, and is not matched here.
"""

from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass, replace

__all__ = ["AWS_REGION", "Cloud", "CloudRegistry", "Service", "aws_partition", "cloud_registry"]


class Cloud(enum.Enum):
    AWS = "aws"
    GOOGLE = "google"
    AZURE = "azure"


class Service(enum.Enum):
    """The registry service a host belongs to; its credential flow differs for each."""

    ECR = "ecr"
    ECR_PUBLIC = "ecr-public"
    CONTAINER_REGISTRY = "gcr"
    ARTIFACT_REGISTRY = "artifact-registry"
    ACR = "acr"

    @property
    def cloud(self) -> Cloud:
        return _CLOUD_OF[self]


_CLOUD_OF = {
    Service.ECR: Cloud.AWS,
    Service.ECR_PUBLIC: Cloud.AWS,
    Service.CONTAINER_REGISTRY: Cloud.GOOGLE,
    Service.ARTIFACT_REGISTRY: Cloud.GOOGLE,
    Service.ACR: Cloud.AZURE,
}


@dataclass(frozen=True, slots=True)
class CloudRegistry:
    """A cloud's registry host, and what its credential flow needs from the host.

    ``dns_suffix`` is the documented suffix the host ends with (the whole host for a fixed
    name such as ``public.ecr.aws``). ``account``, ``partition``, ``fips`` and ``dual_stack``
    are private ECR's; ``region`` is ECR's region or Artifact Registry's location; ``name`` is
    an ACR registry's name. Fields another service has no use for are None (or False).
    """

    service: Service
    host: str  # the DNS name, without the port
    dns_suffix: str
    port: int | None = None
    account: str | None = None
    region: str | None = None
    partition: str | None = None
    fips: bool = False
    dual_stack: bool = False
    name: str | None = None

    @property
    def cloud(self) -> Cloud:
        return self.service.cloud

    @property
    def address(self) -> str:
        """``host[:port]``, as the registry is reached."""
        return self.host if self.port is None else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class _EcrSuffix:
    partitions: frozenset[str]
    infixes: frozenset[str]  # "dkr.ecr" on IPv4 endpoints, "dkr-ecr" on dual-stack ones
    dual_stack: bool


_AWS = frozenset({"aws", "aws-us-gov"})  # GovCloud shares the commercial suffixes
_IPV4 = frozenset({"dkr.ecr"})
_DUAL = frozenset({"dkr-ecr"})
_ECR_SUFFIXES = {
    "amazonaws.com": _EcrSuffix(_AWS, _IPV4, dual_stack=False),
    "amazonaws.com.cn": _EcrSuffix(frozenset({"aws-cn"}), _IPV4, dual_stack=False),
    "amazonaws.eu": _EcrSuffix(frozenset({"aws-eusc"}), _IPV4, dual_stack=False),
    "c2s.ic.gov": _EcrSuffix(frozenset({"aws-iso"}), _IPV4, dual_stack=False),
    "sc2s.sgov.gov": _EcrSuffix(frozenset({"aws-iso-b"}), _IPV4, dual_stack=False),
    "cloud.adc-e.uk": _EcrSuffix(frozenset({"aws-iso-e"}), _IPV4, dual_stack=False),
    "csp.hci.ic.gov": _EcrSuffix(frozenset({"aws-iso-f"}), _IPV4, dual_stack=False),
    "on.aws": _EcrSuffix(_AWS, _DUAL, dual_stack=True),
    # The EKS kubelet config and the kubelet plugin's tests spell China's dual-stack host
    # dkr-ecr, the credential helper's tests dkr.ecr: both are AWS's own names, so both pass.
    "on.amazonwebservices.com.cn": _EcrSuffix(
        frozenset({"aws-cn"}), _DUAL | _IPV4, dual_stack=True
    ),
}
# Region prefixes of the partitions other than "aws", longest first where one extends another.
_REGION_PARTITIONS = (
    ("us-gov-", "aws-us-gov"),
    ("us-isob-", "aws-iso-b"),
    ("us-isof-", "aws-iso-f"),
    ("us-iso-", "aws-iso"),
    ("eu-isoe-", "aws-iso-e"),
    ("eusc-", "aws-eusc"),
    ("cn-", "aws-cn"),
)
_ECR_PUBLIC = frozenset({"public.ecr.aws", "ecr-public.aws.com"})
_ACR_SUFFIXES = frozenset({"azurecr.io", "azurecr.cn", "azurecr.us", "azurecr.de"})
_GCR = "gcr.io"
_GCR_ALIASES = frozenset({_GCR, "container.cloud.google.com"})

# Every class is spelled out ([0-9], not \d): Python's \d and \w also match non-ASCII digits
# and letters, which would let a look-alike through.
_LABEL = r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?"
# An AWS region name, "us-east-1" or "us-gov-west-1": also what an AWS_REGION must look like.
AWS_REGION = r"[a-z]+(?:-[a-z]+)+-[0-9]+"
_LOCATION = r"[a-z]+(?:-[a-z]+[0-9]+)?"  # "us", "europe", "europe-west10"


class _Patterns:
    """The shapes, compiled on first use: a run that meets no cloud host never pays for it."""

    def __init__(self) -> None:
        self.ecr = re.compile(
            r"(?P<account>[0-9]{12})\.(?P<infix>dkr\.ecr|dkr-ecr)(?P<fips>-fips)?"
            rf"\.(?P<region>{AWS_REGION})\.(?P<suffix>.+)"
        )
        self.artifact = re.compile(
            rf"(?P<location>{_LOCATION})-docker\.pkg\.dev"
            rf"|docker\.(?P<regional>{_LOCATION})\.rep\.pkg\.dev"
        )
        self.gcr_host = re.compile(rf"(?:{_LABEL}\.)?gcr\.io")
        self.acr = re.compile(r"(?P<name>[a-z0-9]{5,50})\.(?P<suffix>azurecr\.[a-z]+)")
        self.host = re.compile(rf"{_LABEL}(?:\.{_LABEL})+")
        self.port = re.compile(r"[1-9][0-9]{0,4}")


@functools.cache
def _patterns() -> _Patterns:
    return _Patterns()


# Every accepted host ends with one of these: a test that costs nothing before any pattern.
_ENDINGS = (
    *_ECR_SUFFIXES, *_ECR_PUBLIC, *_ACR_SUFFIXES, *_GCR_ALIASES, ".gcr.io", ".pkg.dev",
)  # fmt: skip
_PORT_MAX = 65535
_LABEL_MAX = 63
_HOST_MAX = 253


def cloud_registry(host: str) -> CloudRegistry | None:
    """The cloud registry ``host`` (``name[:port]``) is exactly, or None (see the module
    docstring)."""
    name, sep, port_text = host.partition(":")
    if not name.endswith(_ENDINGS):
        return None
    port: int | None = None
    if sep:
        if not _patterns().port.fullmatch(port_text) or int(port_text) > _PORT_MAX:
            return None
        port = int(port_text)
    if not _plain_host(name):
        return None
    found = _aws(name) or _google(name) or _azure(name)
    return found if found is None or port is None else replace(found, port=port)


def _plain_host(host: str) -> bool:
    """A lowercase DNS name of two labels or more: no brackets, no userinfo, no
    trailing dot, each label within DNS's limit."""
    if len(host) > _HOST_MAX or not _patterns().host.fullmatch(host):
        return False
    return all(len(label) <= _LABEL_MAX for label in host.split("."))


def _aws(host: str) -> CloudRegistry | None:
    if host in _ECR_PUBLIC:
        return CloudRegistry(Service.ECR_PUBLIC, host, dns_suffix=host)
    match = _patterns().ecr.fullmatch(host)
    if match is None:
        return None
    suffix = _ECR_SUFFIXES.get(match["suffix"])
    partition = aws_partition(match["region"])
    if suffix is None or match["infix"] not in suffix.infixes:
        return None
    if partition not in suffix.partitions:
        return None  # e.g. a China region under amazonaws.com: no such endpoint
    return CloudRegistry(
        Service.ECR,
        host,
        dns_suffix=match["suffix"],
        account=match["account"],
        region=match["region"],
        partition=partition,
        fips=match["fips"] is not None,
        dual_stack=suffix.dual_stack,
    )


def aws_partition(region: str) -> str:
    """The AWS partition of a region name, by prefix as the SDKs' ``regionRegex`` has it; any
    other well-formed region is the commercial partition, so a new one needs no change."""
    for prefix, partition in _REGION_PARTITIONS:
        if region.startswith(prefix):
            return partition
    return "aws"


def _google(host: str) -> CloudRegistry | None:
    if host in _GCR_ALIASES:
        return CloudRegistry(Service.CONTAINER_REGISTRY, host, dns_suffix=host)
    if _patterns().gcr_host.fullmatch(host):
        return CloudRegistry(Service.CONTAINER_REGISTRY, host, dns_suffix=_GCR)
    match = _patterns().artifact.fullmatch(host)
    if match is None:
        return None
    location = match["location"] or match["regional"]
    return CloudRegistry(Service.ARTIFACT_REGISTRY, host, dns_suffix="pkg.dev", region=location)


def _azure(host: str) -> CloudRegistry | None:
    match = _patterns().acr.fullmatch(host)
    if match is None or match["suffix"] not in _ACR_SUFFIXES:
        return None
    return CloudRegistry(Service.ACR, host, dns_suffix=match["suffix"], name=match["name"])
