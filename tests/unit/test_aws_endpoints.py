"""Where the AWS source's calls go: STS, the ECR API and ECR Public by default, for each kind of
registry host, and the AWS SDKs' endpoint variables that replace them (only those)."""

from __future__ import annotations

import pytest

from imagecheck.authn.cloud._awsendpoints import env_region, registry_api_endpoint, sts_endpoint
from imagecheck.authn.cloud._hosts import CloudRegistry, cloud_registry
from imagecheck.errors import CredentialsError

ACCOUNT = "123456789012"


def registry(host: str) -> CloudRegistry:
    found = cloud_registry(host)
    assert found is not None, host
    return found


API_DEFAULTS = [
    (f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com", "https://api.ecr.us-east-1.amazonaws.com",
     "us-east-1", "ecr"),
    (f"{ACCOUNT}.dkr.ecr.eu-west-3.amazonaws.com:8443", "https://api.ecr.eu-west-3.amazonaws.com",
     "eu-west-3", "ecr"),
    (f"{ACCOUNT}.dkr.ecr-fips.us-gov-west-1.amazonaws.com",
     "https://ecr-fips.us-gov-west-1.amazonaws.com", "us-gov-west-1", "ecr"),
    (f"{ACCOUNT}.dkr.ecr.cn-north-1.amazonaws.com.cn", "https://api.ecr.cn-north-1.amazonaws.com.cn",
     "cn-north-1", "ecr"),
    (f"{ACCOUNT}.dkr-ecr.us-east-2.on.aws", "https://ecr.us-east-2.api.aws", "us-east-2", "ecr"),
    (f"{ACCOUNT}.dkr-ecr-fips.us-east-2.on.aws", "https://ecr-fips.us-east-2.api.aws",
     "us-east-2", "ecr"),
    (f"{ACCOUNT}.dkr-ecr.cn-northwest-1.on.amazonwebservices.com.cn",
     "https://ecr.cn-northwest-1.api.amazonwebservices.com.cn", "cn-northwest-1", "ecr"),
    (f"{ACCOUNT}.dkr.ecr.us-iso-east-1.c2s.ic.gov", "https://api.ecr.us-iso-east-1.c2s.ic.gov",
     "us-iso-east-1", "ecr"),
    ("public.ecr.aws", "https://api.ecr-public.us-east-1.amazonaws.com", "us-east-1", "ecr-public"),
    ("ecr-public.aws.com", "https://ecr-public.us-east-1.api.aws", "us-east-1", "ecr-public"),
]  # fmt: skip


@pytest.mark.parametrize(("host", "url", "region", "service"), API_DEFAULTS,
                         ids=[row[0] for row in API_DEFAULTS])  # fmt: skip
def test_the_registry_api_is_the_registrys_region_whatever_aws_region_says(
    host: str, url: str, region: str, service: str
) -> None:
    for env in ({}, {"AWS_REGION": "ap-south-1", "AWS_DEFAULT_REGION": "sa-east-1"}):
        endpoint = registry_api_endpoint(env, registry(host))
        assert (endpoint.url, endpoint.region, endpoint.service) == (url, region, service)
        assert endpoint.overridden_by == ""


STS_DEFAULTS = [
    ({}, f"{ACCOUNT}.dkr.ecr.eu-central-1.amazonaws.com", "https://sts.eu-central-1.amazonaws.com"),
    ({}, "public.ecr.aws", "https://sts.us-east-1.amazonaws.com"),
    ({"AWS_DEFAULT_REGION": "eu-west-1"}, "public.ecr.aws", "https://sts.eu-west-1.amazonaws.com"),
    ({"AWS_REGION": "cn-north-1", "AWS_DEFAULT_REGION": "eu-west-1"},
     f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com", "https://sts.cn-north-1.amazonaws.com.cn"),
    ({"AWS_REGION": " us-gov-east-1 "}, "public.ecr.aws", "https://sts.us-gov-east-1.amazonaws.com"),
    ({"AWS_REGION": ""}, f"{ACCOUNT}.dkr.ecr.us-isob-east-1.sc2s.sgov.gov",
     "https://sts.us-isob-east-1.sc2s.sgov.gov"),
]  # fmt: skip


@pytest.mark.parametrize(("env", "host", "url"), STS_DEFAULTS)
def test_sts_is_regional_in_the_sdks_region_else_the_registrys(
    env: dict[str, str], host: str, url: str
) -> None:
    endpoint = sts_endpoint(env, registry(host))
    assert endpoint.url == url
    assert endpoint.service == "sts"
    assert endpoint.what == f"the AWS STS at {url}"


OVERRIDES = [
    ({"AWS_ENDPOINT_URL_ECR": "https://vpce-1.api.ecr.example/"}, "https://vpce-1.api.ecr.example",
     "AWS_ENDPOINT_URL_ECR"),
    ({"AWS_ENDPOINT_URL": "https://localstack.example:4566"}, "https://localstack.example:4566",
     "AWS_ENDPOINT_URL"),
    ({"AWS_ENDPOINT_URL": "https://all.example", "AWS_ENDPOINT_URL_ECR": "https://ecr.example"},
     "https://ecr.example", "AWS_ENDPOINT_URL_ECR"),
    ({"AWS_ENDPOINT_URL_ECR": "https://ecr.example",
      "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"},
     "https://api.ecr.us-east-1.amazonaws.com", ""),
    ({"AWS_ENDPOINT_URL_STS": "https://sts.example", "AWS_ENDPOINT_URL_ECR_PUBLIC": "https://p"},
     "https://api.ecr.us-east-1.amazonaws.com", ""),
]  # fmt: skip


@pytest.mark.parametrize(("env", "url", "variable"), OVERRIDES)
def test_the_sdks_endpoint_variables_replace_the_default(
    env: dict[str, str], url: str, variable: str
) -> None:
    endpoint = registry_api_endpoint(env, registry(f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com"))
    assert (endpoint.url, endpoint.overridden_by) == (url, variable)
    assert endpoint.region == "us-east-1"  # still signed for the registry's region


def test_each_service_reads_its_own_variable() -> None:
    env = {
        "AWS_ENDPOINT_URL_STS": "https://sts.example",
        "AWS_ENDPOINT_URL_ECR": "https://ecr.example",
        "AWS_ENDPOINT_URL_ECR_PUBLIC": "https://public.example",
    }
    private = registry(f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com")
    assert sts_endpoint(env, private).url == "https://sts.example"
    assert registry_api_endpoint(env, private).url == "https://ecr.example"
    assert registry_api_endpoint(env, registry("public.ecr.aws")).url == "https://public.example"


BAD_OVERRIDES = [
    ("http://127.0.0.1:4566", "must be an https:// URL with a host"),
    ("ftp://ecr.example", "must be an https:// URL with a host"),
    ("ecr.example", "must be an https:// URL with a host"),
    ("https://", "must be an https:// URL with a host"),
    ("https://user:pw@ecr.example", "must not hold userinfo, a query or a fragment"),
    ("https://ecr.example/?x=1", "must not hold userinfo, a query or a fragment"),
    ("https://ecr.example:99999", "is not a URL"),
]  # fmt: skip


@pytest.mark.parametrize(("value", "problem"), BAD_OVERRIDES)
def test_an_override_that_is_not_an_https_url_is_a_usage_error(value: str, problem: str) -> None:
    with pytest.raises(CredentialsError) as caught:
        registry_api_endpoint(
            {"AWS_ENDPOINT_URL_ECR": value}, registry(f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com")
        )
    assert str(caught.value).startswith("AWS_ENDPOINT_URL_ECR ")
    assert str(caught.value).endswith(problem)
    assert "pw" not in str(caught.value)  # userinfo may be a password


@pytest.mark.parametrize("value", ["../../x", "US-EAST-1", "east", "us-east-1a", "us-east-1;x"])
def test_a_region_variable_that_is_not_a_region_is_a_usage_error(value: str) -> None:
    with pytest.raises(CredentialsError, match=r"^AWS_DEFAULT_REGION .* is not an AWS region$"):
        env_region({"AWS_DEFAULT_REGION": value})


def test_a_region_variable_is_read_as_the_sdks_read_it() -> None:
    assert env_region({"AWS_REGION": " us-east-1\n"}) == ("us-east-1", "AWS_REGION")
    assert env_region({"AWS_REGION": "", "AWS_DEFAULT_REGION": "eu-west-1"}) == (
        "eu-west-1",
        "AWS_DEFAULT_REGION",
    )
    assert env_region({}) is None
