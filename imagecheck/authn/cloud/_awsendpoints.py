"""Where imagecheck's AWS calls go: the STS, ECR and ECR Public API endpoints, and the AWS
SDKs' own environment variables that replace them. Pure: no I/O.

The defaults, from AWS's endpoint lists (a region's partition gives the DNS suffix, as the
SDKs' ``partitions.json`` has it: ``dnsSuffix``, and ``dualStackDnsSuffix`` for the dual-stack
names; https://github.com/aws/aws-sdk-go-v2/blob/main/internal/endpoints/awsrulesfn/partitions.json):

* **STS**, regional, as every SDK now calls it by default: ``https://sts.<region>.<suffix>``
  (https://docs.aws.amazon.com/sdkref/latest/guide/feature-sts-regionalized-endpoints.html,
  https://docs.aws.amazon.com/general/latest/gr/sts.html);
* **the ECR API** of the *registry's* region: ``https://api.ecr.<region>.<suffix>``, the FIPS
  registry's ``https://ecr-fips.<region>.<suffix>``, and for a dual-stack registry host
  (``dkr-ecr.<region>.on.aws``) the dual-stack API ``https://ecr[-fips].<region>.api.aws``:
  a pod that reaches its registry over IPv6 may have no IPv4 route to the API either
  (https://docs.aws.amazon.com/general/latest/gr/ecr.html,
  https://docs.aws.amazon.com/AmazonECR/latest/userguide/ecr-requests.html);
* **the ECR Public API**, in us-east-1 only: ``https://api.ecr-public.us-east-1.amazonaws.com``,
  dual-stack ``https://ecr-public.us-east-1.api.aws`` for the dual-stack registry name
  (https://docs.aws.amazon.com/general/latest/gr/ecr-public.html).

Each is replaced, as the SDKs replace it, by the service's ``AWS_ENDPOINT_URL_<SERVICE>``
(``_STS``, ``_ECR``, ``_ECR_PUBLIC``), else the global ``AWS_ENDPOINT_URL``; and neither is
read when ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS`` is true
(https://docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html). Nothing else
can name an endpoint: no registry answer, no DNS. An override must be ``https``, where the
SDKs would also take ``http``: these calls carry a session token and answer a registry
password, and a VPC endpoint or a proxy in front of one speaks TLS.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from imagecheck._text import printable
from imagecheck.authn.cloud._hosts import AWS_REGION, CloudRegistry, Service, aws_partition
from imagecheck.errors import CredentialsError

ECR_PUBLIC_REGION = "us-east-1"  # the only region with the ECR Public API
DEFAULT_REGION = "us-east-1"  # for STS when nothing names a region (ECR Public's)
_REGION = re.compile(AWS_REGION)


# Each partition's DNS suffix (partitions.json's dnsSuffix); a region's partition is
# _hosts.aws_partition's, by its prefix.
_DNS_SUFFIXES = {
    "aws": "amazonaws.com",
    "aws-us-gov": "amazonaws.com",
    "aws-cn": "amazonaws.com.cn",
    "aws-eusc": "amazonaws.eu",
    "aws-iso": "c2s.ic.gov",
    "aws-iso-b": "sc2s.sgov.gov",
    "aws-iso-e": "cloud.adc-e.uk",
    "aws-iso-f": "csp.hci.ic.gov",
}
# The dual-stack API suffix (dualStackDnsSuffix) of each dual-stack registry suffix.
_DUAL_STACK_APIS = {
    "on.aws": "api.aws",
    "on.amazonwebservices.com.cn": "api.amazonwebservices.com.cn",
}
ECR_PUBLIC_DUAL_STACK = "ecr-public.aws.com"  # public.ecr.aws's dual-stack name


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where one service is called, and how its requests are signed."""

    url: str  # the base URL; a JSON API is POSTed at its path "/"
    region: str  # the SigV4 region
    service: str  # the SigV4 service name
    overridden_by: str = ""  # the variable that set ``url``, for messages

    @property
    def what(self) -> str:
        return f"the {self.name} at {self.url}"

    @property
    def name(self) -> str:
        return _NAMES.get(self.service, self.service)


_NAMES = {"sts": "AWS STS", "ecr": "ECR API", "ecr-public": "ECR Public API"}


def env_region(env: Mapping[str, str]) -> tuple[str, str] | None:
    """``(region, variable)`` from ``AWS_REGION``, else ``AWS_DEFAULT_REGION``, as the SDKs
    read them; a value that is not a region name is a ``CredentialsError``."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        region = env.get(name, "").strip()
        if region:
            if not _REGION.fullmatch(region):
                raise CredentialsError(f"{name} {printable(region, 64)!r} is not an AWS region")
            return region, name
    return None


def sts_endpoint(env: Mapping[str, str], registry: CloudRegistry) -> Endpoint:
    """STS in the region the SDKs would use (``AWS_REGION``, ``AWS_DEFAULT_REGION``), else
    the registry's own region, else us-east-1."""
    found = env_region(env)
    region = found[0] if found else registry.region or DEFAULT_REGION
    default = f"https://sts.{region}.{_DNS_SUFFIXES[aws_partition(region)]}"
    return _endpoint(env, "STS", default, region, "sts")


def registry_api_endpoint(env: Mapping[str, str], registry: CloudRegistry) -> Endpoint:
    """The API that issues ``registry``'s credential, signed for the registry's region
    whatever ``AWS_REGION`` says: ECR answers for its own region only."""
    if registry.service is Service.ECR_PUBLIC:
        if registry.host == ECR_PUBLIC_DUAL_STACK:
            default = f"https://ecr-public.{ECR_PUBLIC_REGION}.api.aws"
        else:
            default = f"https://api.ecr-public.{ECR_PUBLIC_REGION}.amazonaws.com"
        return _endpoint(env, "ECR_PUBLIC", default, ECR_PUBLIC_REGION, "ecr-public")
    if registry.service is not Service.ECR or registry.region is None:
        raise ValueError(f"{registry.host} is not an AWS ECR registry")
    region = registry.region
    if registry.dual_stack:
        name = "ecr-fips" if registry.fips else "ecr"
        suffix = _DUAL_STACK_APIS[registry.dns_suffix]
    else:
        name = "ecr-fips" if registry.fips else "api.ecr"
        suffix = registry.dns_suffix
    return _endpoint(env, "ECR", f"https://{name}.{region}.{suffix}", region, "ecr")


def _endpoint(
    env: Mapping[str, str], service_id: str, default: str, region: str, service: str
) -> Endpoint:
    if env.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").strip().lower() == "true":
        return Endpoint(default, region, service)
    for name in (f"AWS_ENDPOINT_URL_{service_id}", "AWS_ENDPOINT_URL"):
        value = env.get(name, "").strip()
        if value:
            return Endpoint(_checked_url(name, value), region, service, overridden_by=name)
    return Endpoint(default, region, service)


def _checked_url(name: str, value: str) -> str:
    """``value`` without a trailing slash, or a ``CredentialsError``: an https URL with a host,
    no userinfo, query or fragment (the SDKs append the operation's path to it)."""
    if "@" in value:  # userinfo may be a password: not shown
        raise CredentialsError(f"{name} must not hold userinfo, a query or a fragment")
    shown = printable(value, 120)
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError:
        raise CredentialsError(f"{name} {shown!r} is not a URL") from None
    if parts.scheme != "https" or not parts.hostname:
        raise CredentialsError(f"{name} {shown!r} must be an https:// URL with a host")
    if parts.query or parts.fragment:
        raise CredentialsError(f"{name} {shown!r} must not hold userinfo, a query or a fragment")
    return value.rstrip("/")
