"""Tests for imagecheck.authn.cloud._hosts: which cloud a registry host is, exactly.

The accepted hosts are the ones the clouds' own tools list or test with (each block says
where from); the rejected ones are the look-alikes an attacker would register or a typo would
make. A host either classifies as exactly one documented shape or is None.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from imagecheck.authn.cloud._hosts import Cloud, CloudRegistry, Service, cloud_registry
from imagecheck.reference import parse_reference

ACCOUNT = "123456789012"
# The same digits in other scripts: str.isdigit() and \d take them, a DNS name does not.
FULLWIDTH_ACCOUNT = "".join(chr(0xFF10 + int(digit)) for digit in ACCOUNT)
ARABIC_INDIC_ACCOUNT = "".join(chr(0x0660 + int(digit)) for digit in ACCOUNT)

# --- AWS ECR, private ------------------------------------------------------------------------

# (host, account, region, partition, fips, dual_stack, dns_suffix)
ECR: list[tuple[str, str, str, str, bool, bool, str]] = [
    # awslabs/amazon-ecr-credential-helper, ecr-login/api/client_test.go
    (f"{ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com", ACCOUNT, "us-west-2", "aws", False, False,
     "amazonaws.com"),
    (f"{ACCOUNT}.dkr-ecr.us-west-2.on.aws", ACCOUNT, "us-west-2", "aws", False, True, "on.aws"),
    (f"{ACCOUNT}.dkr-ecr-fips.us-west-2.on.aws", ACCOUNT, "us-west-2", "aws", True, True,
     "on.aws"),
    ("210987654321.dkr.ecr.cn-north-1.amazonaws.com.cn", "210987654321", "cn-north-1", "aws-cn",
     False, False, "amazonaws.com.cn"),
    ("210987654321.dkr.ecr.cn-north-1.on.amazonwebservices.com.cn", "210987654321", "cn-north-1",
     "aws-cn", False, True, "on.amazonwebservices.com.cn"),
    ("210987654321.dkr.ecr.us-iso-east-1.c2s.ic.gov", "210987654321", "us-iso-east-1", "aws-iso",
     False, False, "c2s.ic.gov"),
    (f"{ACCOUNT}.dkr.ecr.us-isob-east-1.sc2s.sgov.gov", ACCOUNT, "us-isob-east-1", "aws-iso-b",
     False, False, "sc2s.sgov.gov"),
    (f"{ACCOUNT}.dkr.ecr.eu-isoe-west-1.cloud.adc-e.uk", ACCOUNT, "eu-isoe-west-1", "aws-iso-e",
     False, False, "cloud.adc-e.uk"),
    (f"{ACCOUNT}.dkr.ecr.us-isof-east-1.csp.hci.ic.gov", ACCOUNT, "us-isof-east-1", "aws-iso-f",
     False, False, "csp.hci.ic.gov"),
    (f"{ACCOUNT}.dkr-ecr.us-gov-east-1.on.aws", ACCOUNT, "us-gov-east-1", "aws-us-gov", False,
     True, "on.aws"),
    (f"{ACCOUNT}.dkr.ecr-fips.us-gov-west-1.amazonaws.com", ACCOUNT, "us-gov-west-1",
     "aws-us-gov", True, False, "amazonaws.com"),
    (f"{ACCOUNT}.dkr-ecr-fips.us-gov-east-1.on.aws", ACCOUNT, "us-gov-east-1", "aws-us-gov",
     True, True, "on.aws"),
    (f"{ACCOUNT}.dkr.ecr.eusc-de-east-1.amazonaws.eu", ACCOUNT, "eusc-de-east-1", "aws-eusc",
     False, False, "amazonaws.eu"),
    # kubernetes/cloud-provider-aws, cmd/ecr-credential-provider/main_test.go
    ("123456789123.dkr.ecr.us-west-2.amazonaws.com", "123456789123", "us-west-2", "aws", False,
     False, "amazonaws.com"),
    ("123456789123.dkr-ecr.cn-north-1.on.amazonwebservices.com.cn", "123456789123", "cn-north-1",
     "aws-cn", False, True, "on.amazonwebservices.com.cn"),
    (f"{ACCOUNT}.dkr.ecr.lala-land-1.amazonaws.com", ACCOUNT, "lala-land-1", "aws", False, False,
     "amazonaws.com"),
    (f"{ACCOUNT}.dkr.ecr-fips.eusc-de-east-1.amazonaws.eu", ACCOUNT, "eusc-de-east-1",
     "aws-eusc", True, False, "amazonaws.eu"),
    # regions the SDKs' partitions.json does not list yet are still commercial ones
    (f"{ACCOUNT}.dkr.ecr.mx-central-1.amazonaws.com", ACCOUNT, "mx-central-1", "aws", False,
     False, "amazonaws.com"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("host", "account", "region", "partition", "fips", "dual_stack", "suffix"),
    ECR,
    ids=[row[0] for row in ECR],
)
def test_private_ecr_hosts(
    host: str,
    account: str,
    region: str,
    partition: str,
    fips: bool,
    dual_stack: bool,
    suffix: str,
) -> None:
    assert cloud_registry(host) == CloudRegistry(
        Service.ECR,
        host,
        dns_suffix=suffix,
        account=account,
        region=region,
        partition=partition,
        fips=fips,
        dual_stack=dual_stack,
    )


# The helper's ExtractRegistry (client.go) and the kubelet plugin's tests (public.ecr.aws).
@pytest.mark.parametrize("host", ["public.ecr.aws", "ecr-public.aws.com"])
def test_ecr_public_hosts(host: str) -> None:
    assert cloud_registry(host) == CloudRegistry(Service.ECR_PUBLIC, host, dns_suffix=host)


# --- Google ----------------------------------------------------------------------------------

GCR = [
    # GoogleCloudPlatform/docker-credential-gcr, config/const.go DefaultGCRRegistries
    "us.gcr.io",
    "eu.gcr.io",
    "asia.gcr.io",
    "marketplace.gcr.io",
    # the same, credhelper/helper_unit_test.go testGCRHosts
    "staging-k8s.gcr.io",
    "appengine.gcr.io",
    "hypothetical-alias.gcr.io",
    # go-containerregistry pkg/v1/google/keychain.go isGoogle: any *.gcr.io
    "k8s.gcr.io",
]


@pytest.mark.parametrize("host", GCR)
def test_container_registry_hosts(host: str) -> None:
    assert cloud_registry(host) == CloudRegistry(
        Service.CONTAINER_REGISTRY, host, dns_suffix="gcr.io"
    )


# gcr.io itself (every source); container.cloud.google.com, kubernetes/cloud-provider-gcp
# pkg/gcpcredential/gcpcredential.go containerRegistryUrls.
@pytest.mark.parametrize("host", ["gcr.io", "container.cloud.google.com"])
def test_container_registry_fixed_names(host: str) -> None:
    assert cloud_registry(host) == CloudRegistry(Service.CONTAINER_REGISTRY, host, dns_suffix=host)


# GoogleCloudPlatform/docker-credential-gcr, config/const.go DefaultARRegistries, whole.
ARTIFACT_REGISTRY = [
    "africa-south1-docker.pkg.dev", "docker.africa-south1.rep.pkg.dev",
    "asia-docker.pkg.dev",
    "asia-east1-docker.pkg.dev", "docker.asia-east1.rep.pkg.dev",
    "asia-east2-docker.pkg.dev", "docker.asia-east2.rep.pkg.dev",
    "asia-northeast1-docker.pkg.dev", "docker.asia-northeast1.rep.pkg.dev",
    "asia-northeast2-docker.pkg.dev", "docker.asia-northeast2.rep.pkg.dev",
    "asia-northeast3-docker.pkg.dev", "docker.asia-northeast3.rep.pkg.dev",
    "asia-south1-docker.pkg.dev", "docker.asia-south1.rep.pkg.dev",
    "asia-south2-docker.pkg.dev", "docker.asia-south2.rep.pkg.dev",
    "asia-southeast1-docker.pkg.dev", "docker.asia-southeast1.rep.pkg.dev",
    "asia-southeast2-docker.pkg.dev", "docker.asia-southeast2.rep.pkg.dev",
    "asia-southeast3-docker.pkg.dev",
    "australia-southeast1-docker.pkg.dev", "docker.australia-southeast1.rep.pkg.dev",
    "australia-southeast2-docker.pkg.dev", "docker.australia-southeast2.rep.pkg.dev",
    "europe-docker.pkg.dev",
    "europe-central2-docker.pkg.dev", "docker.europe-central2.rep.pkg.dev",
    "europe-north1-docker.pkg.dev", "docker.europe-north1.rep.pkg.dev",
    "europe-north2-docker.pkg.dev",
    "europe-southwest1-docker.pkg.dev", "docker.europe-southwest1.rep.pkg.dev",
    "europe-west1-docker.pkg.dev", "docker.europe-west1.rep.pkg.dev",
    "europe-west10-docker.pkg.dev", "docker.europe-west10.rep.pkg.dev",
    "europe-west12-docker.pkg.dev", "docker.europe-west12.rep.pkg.dev",
    "europe-west2-docker.pkg.dev", "docker.europe-west2.rep.pkg.dev",
    "europe-west3-docker.pkg.dev", "docker.europe-west3.rep.pkg.dev",
    "europe-west4-docker.pkg.dev", "docker.europe-west4.rep.pkg.dev",
    "europe-west6-docker.pkg.dev", "docker.europe-west6.rep.pkg.dev",
    "europe-west8-docker.pkg.dev", "docker.europe-west8.rep.pkg.dev",
    "europe-west9-docker.pkg.dev", "docker.europe-west9.rep.pkg.dev",
    "me-central1-docker.pkg.dev", "docker.me-central1.rep.pkg.dev",
    "me-central2-docker.pkg.dev", "docker.me-central2.rep.pkg.dev",
    "me-west1-docker.pkg.dev", "docker.me-west1.rep.pkg.dev",
    "northamerica-northeast1-docker.pkg.dev", "docker.northamerica-northeast1.rep.pkg.dev",
    "northamerica-northeast2-docker.pkg.dev", "docker.northamerica-northeast2.rep.pkg.dev",
    "northamerica-south1-docker.pkg.dev",
    "southamerica-east1-docker.pkg.dev", "docker.southamerica-east1.rep.pkg.dev",
    "southamerica-west1-docker.pkg.dev", "docker.southamerica-west1.rep.pkg.dev",
    "us-docker.pkg.dev",
    "us-central1-docker.pkg.dev", "docker.us-central1.rep.pkg.dev",
    "us-east1-docker.pkg.dev", "docker.us-east1.rep.pkg.dev",
    "us-east4-docker.pkg.dev", "docker.us-east4.rep.pkg.dev",
    "us-east5-docker.pkg.dev", "docker.us-east5.rep.pkg.dev",
    "us-south1-docker.pkg.dev", "docker.us-south1.rep.pkg.dev",
    "us-west1-docker.pkg.dev", "docker.us-west1.rep.pkg.dev",
    "us-west2-docker.pkg.dev", "docker.us-west2.rep.pkg.dev",
    "us-west3-docker.pkg.dev", "docker.us-west3.rep.pkg.dev",
    "us-west4-docker.pkg.dev", "docker.us-west4.rep.pkg.dev",
    "us-west8-docker.pkg.dev", "docker.us-west8.rep.pkg.dev",
]  # fmt: skip


def _location(host: str) -> str:
    """The location as the list's two spellings put it, read without the module's regex."""
    first = host.split(".", maxsplit=1)[0]
    return host.split(".")[1] if first == "docker" else first.removesuffix("-docker")


@pytest.mark.parametrize("host", ARTIFACT_REGISTRY)
def test_artifact_registry_hosts(host: str) -> None:
    assert cloud_registry(host) == CloudRegistry(
        Service.ARTIFACT_REGISTRY, host, dns_suffix="pkg.dev", region=_location(host)
    )


# --- Azure -----------------------------------------------------------------------------------

# kubernetes-sigs/cloud-provider-azure, pkg/credentialprovider/azure_credentials.go
# containerRegistryUrls, one host on each suffix; "mirror" is from its azure_credentials_test.go,
# "myregistry" is Microsoft's documentation's usual name.
ACR = [
    ("mirror.azurecr.io", "mirror", "azurecr.io"),
    ("myregistry.azurecr.io", "myregistry", "azurecr.io"),
    ("myregistry.azurecr.cn", "myregistry", "azurecr.cn"),
    ("myregistry.azurecr.us", "myregistry", "azurecr.us"),
    ("myregistry.azurecr.de", "myregistry", "azurecr.de"),
    ("a1234.azurecr.io", "a1234", "azurecr.io"),  # the shortest name Azure allows
    ("r" * 50 + ".azurecr.io", "r" * 50, "azurecr.io"),  # and the longest
]


@pytest.mark.parametrize(("host", "name", "suffix"), ACR, ids=[row[0][:30] for row in ACR])
def test_azure_container_registry_hosts(host: str, name: str, suffix: str) -> None:
    assert cloud_registry(host) == CloudRegistry(Service.ACR, host, dns_suffix=suffix, name=name)


# --- what gets nothing -----------------------------------------------------------------------

ECR_HOST = f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com"

# (id, host): every one must be None.
LOOK_ALIKES: list[tuple[str, str]] = [
    # suffix tricks: the real name, then more
    ("gcr-then-more", "gcr.io.attacker.test"),
    ("ecr-then-more", f"{ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com.fake.example.com"),  # helper
    ("ecr-fips-then-more", f"{ACCOUNT}.dkr.ecr-fips.us-gov-west-1.amazonaws.com.fake.example.com"),
    ("ecr-cn-then-more", "210987654321.dkr.ecr.cn-north-1.amazonaws.com.cn.fake.example.com.cn"),
    ("ecr-on-aws-com-cn", "210987654321.dkr.ecr.cn-north-1.on.aws.com.cn"),  # helper's test
    ("ecr-public-then-more", "public.ecr.aws.fake.example.com"),  # helper's test
    ("acr-then-more", "x.azurecr.io.evil.test"),
    ("acr-then-more-provider", "foo.azurecr.io.example"),  # cloud-provider-azure's test
    ("acr-on-acr", "foo.azurecr.io.azurecr.cn"),  # cloud-provider-azure's test
    ("ar-then-more", "us-docker.pkg.dev.evil.test"),
    # another registrable domain in the place of the cloud's
    ("ecr-attacker-suffix", f"{ACCOUNT}.dkr.ecr.us-east-1.attacker.test"),
    ("ecr-hacker-com", f"{ACCOUNT}.dkr.ecr.lala-land-1.amazonaws.hacker.com"),  # plugin's test
    ("ecr-hacker", f"{ACCOUNT}.dkr.ecr.lala-land-1.hacker.com"),  # plugin's test
    ("ecr-amazonaws-lol", f"{ACCOUNT}.dkr.ecr.lala-land-1.amazonaws.lol"),  # plugin's test
    ("ecr-amazonaws-gov", f"{ACCOUNT}.dkr.ecr.us-iso-east-1.amazonaws.gov"),  # plugin's test
    ("ecr-awsamazon", f"{ACCOUNT}.dkr.ecr.lala-land-1.awsamazon.com"),
    ("ecr-evilamazonaws", f"{ACCOUNT}.dkr.ecr.us-east-1.evilamazonaws.com"),
    ("ecr-on-aws-eu", f"{ACCOUNT}.dkr.ecr.eusc-de-east-1.on.amazonwebservices.eu"),
    ("acr-net", "myregistry.azurecr.net"),
    ("acr-com", "myregistry.azurecr.com"),
    ("acr-lookalike-suffix", "myregistry.azurecr-io.com"),
    ("acr-custom-cloud", "foo.azurecr.my.cloud"),  # a custom cloud is configuration
    # prefix tricks: more in front of the cloud's name
    ("evilgcr", "evilgcr.io"),
    ("evil-dash-gcr", "evil-gcr.io"),
    ("evil-public-ecr", "evilpublic.ecr.aws"),
    ("sub-public-ecr", "x.public.ecr.aws"),
    ("evil-azurecr", "myregistry.evilazurecr.io"),
    ("evil-pkg-dev", "us-docker.evilpkg.dev"),
    ("google-com", "evil.google.com"),  # go-containerregistry's isGoogle takes any .google.com
    ("cloud-google-com", "x.container.cloud.google.com"),
    # extra labels
    ("gcr-two-labels", "a.b.gcr.io"),
    ("ar-label-in-front", "x.us-docker.pkg.dev"),
    ("ar-regional-extra", "docker.us.x.rep.pkg.dev"),
    ("acr-label-in-front", "a.myregistry.azurecr.io"),
    ("acr-geo-replica", "myregistry.westus.geo.azurecr.io"),
    ("acr-data-endpoint", "myregistry.westus.data.azurecr.io"),
    ("ecr-label-in-front", f"x.{ECR_HOST}"),
    ("ecr-label-in-region", f"{ACCOUNT}.dkr.ecr.x.us-east-1.amazonaws.com"),
    ("ecr-no-dkr", f"{ACCOUNT}.lala-land-1.amazonaws.com"),  # plugin's test
    # dkr-ecr is the dual-stack spelling, dkr.ecr the IPv4 one; neither goes on the other's
    ("dkr-ecr-on-ipv4-suffix", f"{ACCOUNT}.dkr-ecr.us-east-1.amazonaws.com"),
    ("dkr-ecr-fips-on-ipv4", f"{ACCOUNT}.dkr-ecr-fips.us-gov-west-1.amazonaws.com"),
    ("dkr-ecr-on-isolated", f"{ACCOUNT}.dkr-ecr.us-iso-east-1.c2s.ic.gov"),
    ("dkr-dot-ecr-on-aws", f"{ACCOUNT}.dkr.ecr.us-east-1.on.aws"),
    ("dkr-underscore-ecr", f"{ACCOUNT}.dkr_ecr.us-east-1.amazonaws.com"),
    ("dkrecr", f"{ACCOUNT}.dkrecr.us-east-1.amazonaws.com"),
    ("dog-ecr", f"{ACCOUNT}.dog.ecr.lala-land-1.amazonaws.com"),  # plugin's test
    ("dkr-cat", f"{ACCOUNT}.dkr.cat.lala-land-1.amazonaws.com"),  # plugin's test
    ("double-fips", f"{ACCOUNT}.dkr.ecr-fips-fips.us-east-1.amazonaws.com"),
    ("fips-before-ecr", f"{ACCOUNT}.dkr-fips.ecr.us-east-1.amazonaws.com"),
    # the account is 12 ASCII digits
    ("account-13-digits", f"{ACCOUNT}3.dkr.ecr.us-east-1.amazonaws.com"),
    ("account-11-digits", "12345678901.dkr.ecr.lala-land-1.amazonaws.com"),  # plugin's test
    ("account-letter", "12345678901A.dkr.ecr.lala-land-1.amazonaws.com"),  # plugin's test
    ("account-fullwidth", f"{FULLWIDTH_ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com"),
    ("account-arabic-indic", f"{ARABIC_INDIC_ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com"),
    ("no-account", ".dkr.ecr.not-real.amazonaws.com"),  # helper's test
    # regions with odd characters or shapes
    ("region-bang", f"{ACCOUNT}.dkr.ecr.lala-land-1!.amazonaws.com"),  # plugin's test
    ("region-hash", f"{ACCOUNT}.dkr.ecr.#lala-land-1.amazonaws.com"),  # plugin's test
    ("region-underscores", f"{ACCOUNT}.dkr.ecr.us_east_1.amazonaws.com"),
    ("region-double-dash", f"{ACCOUNT}.dkr.ecr.us--east-1.amazonaws.com"),
    ("region-no-number", f"{ACCOUNT}.dkr.ecr.us-east.amazonaws.com"),
    ("region-one-word", f"{ACCOUNT}.dkr.ecr.useast1.amazonaws.com"),
    ("region-leading-dash", f"{ACCOUNT}.dkr.ecr.-us-east-1.amazonaws.com"),
    ("region-trailing-dash", f"{ACCOUNT}.dkr.ecr.us-east-1-.amazonaws.com"),
    ("region-arabic-digit", f"{ACCOUNT}.dkr.ecr.us-east-\u0661.amazonaws.com"),
    ("region-too-long", f"{ACCOUNT}.dkr.ecr.us-{'e' * 60}-1.amazonaws.com"),
    # a region of one partition under another partition's suffix
    ("china-region-commercial", f"{ACCOUNT}.dkr.ecr.cn-north-1.amazonaws.com"),
    ("commercial-region-china", f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com.cn"),
    ("gov-region-china", f"{ACCOUNT}.dkr-ecr.us-gov-east-1.on.amazonwebservices.com.cn"),
    ("iso-region-commercial", f"{ACCOUNT}.dkr.ecr.us-iso-east-1.amazonaws.com"),
    ("isob-region-iso", f"{ACCOUNT}.dkr.ecr.us-isob-east-1.c2s.ic.gov"),
    ("gov-region-iso", f"{ACCOUNT}.dkr.ecr.us-gov-west-1.c2s.ic.gov"),
    ("eusc-region-commercial", f"{ACCOUNT}.dkr.ecr.eusc-de-east-1.amazonaws.com"),
    ("commercial-region-eusc", f"{ACCOUNT}.dkr.ecr.eu-central-1.amazonaws.eu"),
    # Artifact Registry is <location>-docker or docker.<location>.rep, nothing else
    ("pkg-dev-alone", "pkg.dev"),
    ("pkg-dev-no-docker", "us.pkg.dev"),
    ("pkg-dev-maven", "us-maven.pkg.dev"),
    ("pkg-dev-python", "europe-west1-python.pkg.dev"),
    ("pkg-dev-docker-alone", "docker.pkg.dev"),
    ("pkg-dev-no-location", "-docker.pkg.dev"),
    ("pkg-dev-regional-maven", "maven.us-east1.rep.pkg.dev"),
    ("pkg-dev-regional-no-rep", "docker.us-east1.pkg.dev"),
    ("pkg-dev-docker-docker", "us-docker-docker.pkg.dev"),
    ("pkg-dev-location-underscore", "us_central1-docker.pkg.dev"),
    # ACR: a name of 5 to 50 letters and digits, under one of the four suffixes
    ("azurecr-io-alone", "azurecr.io"),
    ("azurecr-cn-alone", "azurecr.cn"),
    ("acr-short-name", "foo.azurecr.io"),  # cloud-provider-azure's fixture; Azure refuses it
    ("acr-4-chars", "test.azurecr.io"),
    ("acr-51-chars", "r" * 51 + ".azurecr.io"),
    ("acr-dashes", "foo-azurecr-io.azurecr.cn"),  # cloud-provider-azure's test
    ("acr-underscore", "my_registry.azurecr.io"),
    ("acr-empty-name", ".azurecr.io"),
    # empty labels
    ("gcr-empty-label", "gcr..io"),
    ("gcr-leading-dot", ".gcr.io"),
    ("ecr-empty-label", f"{ACCOUNT}..dkr.ecr.us-east-1.amazonaws.com"),
    ("ecr-empty-region", f"{ACCOUNT}.dkr.ecr..amazonaws.com"),
    ("ar-empty-label", "docker..rep.pkg.dev"),
    ("gcr-label-too-long", "a" * 64 + ".gcr.io"),
    # a bad port, a trailing dot, userinfo, a scheme, whitespace: never part of a host
    ("gcr-port-zero", "gcr.io:0"),
    ("gcr-port-leading-zero", "gcr.io:0443"),
    ("gcr-port-too-big", "gcr.io:65536"),
    ("gcr-port-empty", "gcr.io:"),
    ("gcr-port-sign", "gcr.io:+443"),
    ("gcr-port-twice", "gcr.io:443:443"),
    ("acr-port-unicode-digit", "myregistry.azurecr.io:\u0665000"),
    ("look-alike-port", "gcr.io.attacker.test:443"),
    ("gcr-trailing-dot", "gcr.io."),
    ("ecr-trailing-dot", f"{ECR_HOST}."),
    ("acr-trailing-dot", "myregistry.azurecr.io."),
    ("gcr-userinfo", "user@gcr.io"),
    ("acr-userinfo", "user:pass@myregistry.azurecr.io"),
    ("gcr-scheme", "https://gcr.io"),
    ("gcr-newline", "gcr.io\n"),
    ("gcr-space", " gcr.io"),
    ("gcr-path", "gcr.io/project"),
    # IP addresses
    ("ipv4", "10.0.0.1"),
    ("ipv4-port", "127.0.0.1:5000"),
    ("ipv6", "[::1]"),
    ("ipv6-port", "[::1]:5000"),
    # uppercase: DNS would fold it, this classifier does not (see the module docstring)
    ("gcr-upper", "GCR.IO"),
    ("gcr-mixed", "Gcr.io"),
    ("gcr-sub-upper", "US.gcr.io"),
    ("ar-upper", "US-docker.pkg.dev"),
    ("ecr-upper-infix", f"{ACCOUNT}.DKR.ECR.us-east-1.amazonaws.com"),
    ("ecr-upper-region", f"{ACCOUNT}.dkr.ecr.US-EAST-1.amazonaws.com"),
    ("ecr-public-upper", "PUBLIC.ECR.AWS"),
    ("acr-upper-name", "MyRegistry.azurecr.io"),
    ("acr-upper-suffix", "myregistry.AZURECR.IO"),
    # IDN look-alikes, as Unicode and as punycode
    ("gcr-cyrillic-es", "g\u0441r.io"),  # Cyrillic es
    ("gcr-punycode", "xn--gr-omc.io"),
    ("gcr-cyrillic-i", "gcr.\u0456o"),  # Cyrillic i
    ("gcr-cyrillic-i-punycode", "gcr.xn--o-evb"),
    ("acr-punycode", "myregistry.xn--azurec-uof.io"),
    ("ecr-public-fullwidth-dot", "public\uff0eecr\uff0eaws"),
    # the other ECR Public spellings
    ("ecr-public-no-aws", "ecr-public.aws"),
    ("ecr-public-com", "public.ecr.aws.com"),
    ("ecr-public-dashed", "public-ecr.aws"),
    # nothing at all
    ("empty", ""),
    ("single-label", "localhost"),
]


@pytest.mark.parametrize(
    "host", [row[1] for row in LOOK_ALIKES], ids=[row[0] for row in LOOK_ALIKES]
)
def test_look_alikes_get_nothing(host: str) -> None:
    assert cloud_registry(host) is None


@pytest.mark.parametrize(
    ("host", "name", "port"),
    [
        pytest.param("gcr.io:443", "gcr.io", 443, id="gcr"),
        pytest.param(f"{ECR_HOST}:5000", ECR_HOST, 5000, id="ecr"),
        pytest.param("myregistry.azurecr.io:65535", "myregistry.azurecr.io", 65535, id="acr"),
        pytest.param("public.ecr.aws:1", "public.ecr.aws", 1, id="ecr-public"),
    ],
)
def test_a_port_is_kept_apart(host: str, name: str, port: int) -> None:
    """Whoever owns a host owns its ports: a port changes nothing but where it is reached."""
    found = cloud_registry(host)
    assert found is not None
    assert (found.host, found.port, found.address) == (name, port, host)
    assert cloud_registry(name) == replace(found, port=None)


def test_every_service_names_its_cloud() -> None:
    clouds = {service: service.cloud for service in Service}
    assert clouds == {
        Service.ECR: Cloud.AWS,
        Service.ECR_PUBLIC: Cloud.AWS,
        Service.CONTAINER_REGISTRY: Cloud.GOOGLE,
        Service.ARTIFACT_REGISTRY: Cloud.GOOGLE,
        Service.ACR: Cloud.AZURE,
    }
    found = cloud_registry("myregistry.azurecr.us")
    assert found is not None
    assert found.cloud is Cloud.AZURE


# --- from a parsed reference -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "service"),
    [
        pytest.param(f"{ECR_HOST}/team/app:1", Service.ECR, id="ecr"),
        pytest.param("public.ecr.aws/nginx/nginx:1", Service.ECR_PUBLIC, id="ecr-public"),
        pytest.param("gcr.io/project/app@sha256:" + "a" * 64, Service.CONTAINER_REGISTRY, id="gcr"),
        pytest.param("us-docker.pkg.dev/p/repo/app", Service.ARTIFACT_REGISTRY, id="ar"),
        pytest.param("myregistry.azurecr.io/app:1", Service.ACR, id="acr"),
        # the parser keeps the port and the case as written: a port is allowed, case is not
        pytest.param("gcr.io:443/project/app", Service.CONTAINER_REGISTRY, id="port-kept"),
        pytest.param("GCR.io/project/app", None, id="case-kept"),
        pytest.param("gcr.io.attacker.test/project/app", None, id="look-alike"),
    ],
)
def test_a_references_registry_is_what_is_classified(text: str, service: Service | None) -> None:
    found = cloud_registry(parse_reference(text).registry)
    assert (found and found.service) == service


# --- properties ------------------------------------------------------------------------------

# The suffixes the module docstring documents, each for its cloud.
DOCUMENTED = {
    Cloud.AWS: {
        "amazonaws.com", "amazonaws.com.cn", "amazonaws.eu", "c2s.ic.gov", "sc2s.sgov.gov",
        "cloud.adc-e.uk", "csp.hci.ic.gov", "on.aws", "on.amazonwebservices.com.cn",
        "public.ecr.aws", "ecr-public.aws.com",
    },
    Cloud.GOOGLE: {"gcr.io", "container.cloud.google.com", "pkg.dev"},
    Cloud.AZURE: {"azurecr.io", "azurecr.cn", "azurecr.us", "azurecr.de"},
}  # fmt: skip
REAL = [row[0] for row in ECR] + GCR + ARTIFACT_REGISTRY + [row[0] for row in ACR]
PIECES = [
    ACCOUNT, "dkr", "ecr", "dkr-ecr", "ecr-fips", "us-east-1", "cn-north-1", "us-gov-west-1",
    "public", "aws", "gcr", "io", "us", "docker", "us-docker", "rep", "pkg", "dev", "azurecr",
    "myregistry", "cn", "com", "amazonaws", "on", "evil", "-", "", "x", "US", "\u0455", "1",
]  # fmt: skip
ODD = "abcxyz019-._:@/[]AZ \n\u0441\uff11\u0661"


def _mutated(host: str, at: int, char: str, how: int) -> str:
    at %= len(host) + 1
    return [host[:at] + char + host[at:], host[:at] + host[at + 1 :], host[:at] + char][how % 3]


def _hosts() -> st.SearchStrategy[str]:
    joined = st.lists(
        st.sampled_from(PIECES + sorted(set().union(*DOCUMENTED.values()))), max_size=7
    ).map(".".join)
    mutations = st.builds(
        _mutated, st.sampled_from(REAL), st.integers(0, 80), st.sampled_from(ODD), st.integers()
    )
    return st.one_of(st.text(alphabet=ODD, max_size=40), st.text(max_size=20), joined, mutations)


@given(_hosts())
@example("evilgcr.io")
@example("gcr.io.attacker.test")
@example(f"{ACCOUNT}.dkr.ecr.us-east-1.attacker.test")
@example("x.azurecr.io.evil.test")
def test_whatever_is_accepted_ends_with_a_documented_suffix_of_its_cloud(host: str) -> None:
    found = cloud_registry(host)  # never raises
    if found is None:
        return
    assert found.address == host
    host = found.host
    assert found.dns_suffix in DOCUMENTED[found.cloud]
    assert host == found.dns_suffix or host.endswith("." + found.dns_suffix)
    assert host == host.lower() and host.isascii()


@given(st.sampled_from(REAL), st.sampled_from([":443", ".", ".evil.test", "x"]))
def test_a_real_host_with_anything_after_it_is_none_or_another_real_shape(
    host: str, tail: str
) -> None:
    found = cloud_registry(host + tail)
    assert found is None or found.dns_suffix in DOCUMENTED[found.cloud]
    if tail in {".", ".evil.test"}:
        assert found is None
    if tail == ":443":
        assert found is not None
        assert (found.host, found.port) == (host, 443)


# --- start-up --------------------------------------------------------------------------------


def test_importing_the_package_does_not_import_the_classifier() -> None:
    code = (
        "import sys, imagecheck, imagecheck.authn\n"
        "print('imagecheck.authn.cloud._hosts' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
