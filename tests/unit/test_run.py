"""Tests for imagecheck.run (``imagecheck.check``/``acheck``): what is refused before anything
is sent, in which order, and how. The network is respx with no routes, so a request fails."""

from __future__ import annotations

import asyncio
import gc
import inspect
import math
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

import imagecheck
from imagecheck.cli import check, scan
from imagecheck.errors import InvalidReferenceError, InvalidReferencesError, UsageError
from imagecheck.registry import Platform
from imagecheck.run import client_options, default_deadline, registry_host

DIGEST = "sha256:" + "ab" * 32


@pytest.fixture
def network() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False, assert_all_mocked=True, using="httpx") as mock:
        yield mock


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, small_trust_store: None) -> Path:
    """No credential source of this machine's."""
    for name in ("DOCKER_CONFIG", "DOCKER_AUTH_CONFIG", "REGISTRY_AUTH_FILE", "XDG_RUNTIME_DIR",
                 "IMAGECHECK_PULL_SECRETS"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


# -- the public surface -----------------------------------------------------------------------


def test_every_exported_name_is_there_and_documented() -> None:
    for name in imagecheck.__all__:
        value = getattr(imagecheck, name)
        if name != "__version__":
            assert inspect.getdoc(value), name


def test_check_takes_exactly_what_acheck_takes() -> None:
    assert inspect.signature(imagecheck.check) == inspect.signature(imagecheck.acheck)
    assert imagecheck.check.__name__ == "check"
    assert "acheck" in (imagecheck.check.__doc__ or "")


def test_check_refuses_a_running_loop_and_starts_nothing(network: respx.MockRouter) -> None:
    async def inside() -> None:
        imagecheck.check(["registry.test/app:1"])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match=r"running event loop.*await imagecheck\.acheck"):
            asyncio.run(inside())
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]
    assert network.calls.call_count == 0


def test_check_answers_from_the_registry(network: respx.MockRouter, isolated: Path) -> None:
    network.get("https://registry.test/v2/").respond(200)
    network.head("https://registry.test/v2/app/manifests/1").respond(
        200, headers={"Docker-Content-Digest": DIGEST}
    )
    network.head("https://registry.test/v2/app/manifests/2").respond(404)
    found, missing = imagecheck.check(["registry.test/app:1", "registry.test/app:2"])
    assert (found.status, found.digest, found.image) == ("found", DIGEST, "registry.test/app:1")
    assert missing.status is imagecheck.Status.MISSING
    assert imagecheck.exit_code([found, missing]) == 1


# -- invalid references: every one named, nothing sent, no source read ------------------------


def test_invalid_references_are_one_error_naming_each(
    network: respx.MockRouter, isolated: Path
) -> None:
    broken = isolated / "config.json"
    broken.write_text("{", encoding="utf-8")  # would be a CredentialsError, were it read
    images = ["a//b", "registry.test/app:1", "x:", "a//b"]
    with pytest.raises(InvalidReferencesError) as caught:
        imagecheck.check(images, docker_config=broken)
    error = caught.value
    assert [(e.reference, e.reason) for e in error.invalid] == [
        ("a//b", "empty path component (two slashes in a row?)"),
        ("x:", "empty tag after ':'"),
        ("a//b", "empty path component (two slashes in a row?)"),
    ]
    assert isinstance(error, InvalidReferenceError)
    assert (error.reference, error.reason) == (error.invalid[0].reference, error.invalid[0].reason)
    assert str(error) == (
        "3 invalid references: 'a//b': empty path component (two slashes in a row?); "
        "'x:': empty tag after ':'; 'a//b': empty path component (two slashes in a row?)"
    )
    assert imagecheck.error_exit_code(error) == 2
    assert network.calls.call_count == 0


def test_one_invalid_reference_reads_as_parse_reference_says(network: respx.MockRouter) -> None:
    with pytest.raises(InvalidReferencesError) as caught:
        imagecheck.check(["Busybox"])
    with pytest.raises(InvalidReferenceError) as parsed:
        imagecheck.parse_reference("Busybox")
    assert str(caught.value) == str(parsed.value)


# -- bad options: a UsageError before the references are even looked at ------------------------

# (id, options, words in the error)
BAD_OPTIONS: list[tuple[str, dict[str, Any], str]] = [
    ("deadline-nan", {"deadline": math.nan}, "deadline must be between 0.1 and 86400: nan"),
    ("deadline-zero", {"deadline": 0}, "deadline must be between"),
    ("timeout-inf", {"timeout": math.inf}, "timeout must be between 0.1 and 3600: inf"),
    ("timeout-text", {"timeout": "10"}, "timeout must be a number: '10'"),
    ("wait-negative", {"wait": -1}, "wait must be between 0 and 604800"),
    ("retries-negative", {"retries": -1}, "retries must be between 0 and 20"),
    ("retries-fraction", {"retries": 1.5}, "retries must be a whole number: 1.5"),
    ("concurrency-zero", {"concurrency": 0}, "concurrency must be between 1 and 256"),
    ("concurrency-bool", {"concurrency": True}, "concurrency must be a whole number: True"),
    ("mirror-path", {"mirrors": [("docker.io", "a.io/b")]}, "'a.io/b' is not a registry host"),
    ("mirror-dict", {"mirrors": {"docker.io": "m:x"}}, "'m:x' is not a registry host"),
    ("platform", {"platform": "linux"}, "expected OS/ARCH[/VARIANT]"),
    ("credentials-for", {"credentials_for": ["foo"]}, "'foo' is not a registry host"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("options", "words"), [c[1:] for c in BAD_OPTIONS], ids=[c[0] for c in BAD_OPTIONS]
)
def test_bad_options_are_usage_errors_before_anything(
    network: respx.MockRouter, isolated: Path, options: dict[str, Any], words: str
) -> None:
    image = "Invalid" if "credentials_for" not in options else "registry.test/app:1"
    with pytest.raises(UsageError) as caught:
        imagecheck.check([image], **options)
    assert not isinstance(caught.value, InvalidReferenceError), "options come first"
    assert words in str(caught.value)
    assert imagecheck.error_exit_code(caught.value) == 2
    assert network.calls.call_count == 0


@pytest.mark.parametrize(
    ("text", "host"),
    [
        ("docker.io", "docker.io"),
        ("index.docker.io", "docker.io"),
        ("registry-1.docker.io", "registry-1.docker.io"),
        ("Docker.IO", "Docker.IO"),
        ("localhost", "localhost"),
        ("localhost:5000", "localhost:5000"),
        ("MyOrg", "MyOrg"),  # an uppercase first component is a host, as the kubelet reads it
        ("[::1]:5000", "[::1]:5000"),
        ("mirror.example.com:5000", "mirror.example.com:5000"),
    ],
)
def test_registry_hosts(text: str, host: str) -> None:
    assert registry_host(text) == host


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("foo", "not a registry host (e.g."),  # a Docker Hub namespace, not a host
        ("library", "not a registry host (e.g."),
        ("a.io/b", "not a registry host (e.g."),
        ("", "not a registry host: "),
        ("a b", "not a registry host: "),
        ("a@b", 'invalid digest "b/probe"'),
    ],
)
def test_not_registry_hosts(text: str, words: str) -> None:
    with pytest.raises(UsageError, match=r"^" + repr(text).replace("[", r"\[")) as caught:
        registry_host(text)
    assert words in str(caught.value)


def test_client_options_normalize_what_they_are_given() -> None:
    options = client_options(
        mirrors={"index.docker.io": "localhost:5000"},
        platform="linux/aarch64",
        ca_files=["ca.pem"],
        insecure_registries=["localhost:5000"],
    )
    assert options.mirrors == (("docker.io", "localhost:5000"),)
    assert options.platform == Platform("linux", "arm64")
    assert options.ca_files == (Path("ca.pem"),)
    assert options.insecure_registries == frozenset({"localhost:5000"})


# -- credentials: only where credentials_for says -------------------------------------------


def test_credentials_go_only_to_the_hosts_named(network: respx.MockRouter, isolated: Path) -> None:
    for host in ("one.test", "two.test"):
        network.get(f"https://{host}/v2/").respond(
            401, headers={"WWW-Authenticate": 'Basic realm="r"'}
        )
        network.head(f"https://{host}/v2/app/manifests/1").mock(
            side_effect=lambda request: httpx.Response(
                200 if "Authorization" in request.headers else 401,
                headers={"Docker-Content-Digest": DIGEST},
            )
        )
    creds = imagecheck.Credentials(username="alice", password="s3cret")
    one, two = imagecheck.check(
        ["one.test/app:1", "two.test/app:1"], credentials=creds, credentials_for=["one.test"]
    )
    assert one.status is imagecheck.Status.FOUND
    assert two.status is imagecheck.Status.DENIED
    sent = [c.request for c in network.calls if c.request.url.host == "two.test"]
    assert sent
    assert not any("Authorization" in r.headers for r in sent)


# -- checked: a progress counter's calls ------------------------------------------------------


def test_checked_counts_each_distinct_reference_once(
    network: respx.MockRouter, isolated: Path
) -> None:
    network.get("https://registry.test/v2/").respond(200)
    network.head(url__regex=r"/v2/app/manifests/").respond(404)
    counts: list[tuple[int, int]] = []
    images = ["registry.test/app:1", "registry.test/app:2", "registry.test/app:1"]
    results = imagecheck.check(images, checked=lambda *count: counts.append(count))
    assert len(results) == 3
    assert counts == [(1, 2), (2, 2)]


def test_checked_counts_checks_the_deadline_cut_short(
    network: respx.MockRouter, isolated: Path
) -> None:
    async def never(_: httpx.Request) -> httpx.Response:
        await asyncio.sleep(60)
        raise AssertionError("unreachable")

    network.get("https://registry.test/v2/").mock(side_effect=never)
    counts: list[tuple[int, int]] = []
    results = imagecheck.check(
        ["registry.test/a:1", "registry.test/b:1"],
        deadline=0.1,
        checked=lambda *count: counts.append(count),
    )
    assert {r.status for r in results} == {imagecheck.Status.ERROR}
    assert counts == [(1, 2), (2, 2)]


# The default deadline grows with the run (issue #14): 60 s alone cut 77 of 5,000 images in
# 5,000 repositories on a token registry short.
@pytest.mark.parametrize(
    ("images", "seconds"),
    [(0, 60.0), (1, 60.05), (100, 65.0), (1_000, 110.0), (5_000, 310.0), (10**9, 86400.0)],
    ids=["none", "one", "hundred", "thousand", "five-thousand", "capped-at-a-day"],
)
def test_default_deadline_is_a_minute_plus_50ms_per_image(images: int, seconds: float) -> None:
    assert default_deadline(images) == pytest.approx(seconds)


def test_the_command_line_leaves_the_default_deadline_to_the_library() -> None:
    for command in (check, scan):
        [deadline] = [p for p in command.params if p.name == "deadline"]
        assert deadline.default is None
    assert inspect.signature(imagecheck.acheck).parameters["deadline"].default is None
