"""The kubelet's credential provider plugins as a keychain: real plugin executables in a
temporary bin dir, run through the bounded runner, sync and on the event loop."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from imagecheck._deadline import Deadline
from imagecheck.authn import CredentialProviders
from imagecheck.authn._credproviderconfig import Provider
from imagecheck.authn._credproviders import parse_response, plugin_path
from imagecheck.errors import CredentialsError, DeadlineExceeded
from imagecheck.reference import parse_reference
from tests.support.credproviders import (
    PLUGIN_API,
    answer,
    install_plugin,
    plugin_runs,
    provider,
    write_provider_config,
)

ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
SECRET = "s3cr3t-token-value"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def keychain(
    tmp_path: Path, body: str, *entries: dict[str, object], **kwargs: object
) -> tuple[CredentialProviders, Path]:
    script = install_plugin(tmp_path / "bin", "ecr-credential-provider", body)
    entries = entries or (provider("ecr-credential-provider", "*.dkr.ecr.*.amazonaws.com"),)
    config = write_provider_config(tmp_path / "config.json", *entries)
    return CredentialProviders.from_files(config, tmp_path / "bin", **kwargs), script


def test_a_matching_image_gets_the_plugins_answer(tmp_path: Path) -> None:
    entry = provider(
        "ecr-credential-provider",
        "*.dkr.ecr.*.amazonaws.com",
        args=["get-credentials"],
        env=[{"name": "PLUGIN_MARK", "value": "from-config"}],
    )
    chain, script = keychain(tmp_path, answer({ECR: ("AWS", SECRET)}), entry)
    (creds,) = chain.resolve(parse_reference(f"{ECR}/team/app:1.0"))
    assert (creds.username, creds.password) == ("AWS", SECRET)
    assert creds.source == "credential provider plugin ecr-credential-provider"
    assert SECRET not in repr(creds)
    (run,) = plugin_runs(script)
    assert run["request"] == {
        "apiVersion": PLUGIN_API,
        "kind": "CredentialProviderRequest",
        "image": f"{ECR}/team/app",
    }
    assert run["argv"] == ["get-credentials"]
    assert run["env"] == "from-config"


def test_an_image_no_provider_matches_runs_nothing(tmp_path: Path) -> None:
    chain, script = keychain(tmp_path, answer({ECR: ("AWS", SECRET)}))
    assert chain.resolve(parse_reference("ghcr.io/org/app:1")) == ()
    assert chain.resolve(parse_reference(f"a.{ECR}/app:1")) == ()  # one label per '*'
    assert plugin_runs(script) == []


def test_the_most_specific_auth_key_comes_first(tmp_path: Path) -> None:
    auth = {ECR: ("registry", "p1"), f"{ECR}/team": ("team", "p2"), "other.example": ("x", "p3")}
    chain, _ = keychain(tmp_path, answer(auth))
    found = chain.resolve(parse_reference(f"{ECR}/team/app:1"))
    assert [c.username for c in found] == ["team", "registry"]


@pytest.mark.parametrize(
    ("key_type", "second", "runs"),
    [("Registry", f"{ECR}/other:1", 1), ("Image", f"{ECR}/other:1", 2),
     ("Image", f"{ECR}/app:2", 1), ("Global", "999.dkr.ecr.eu-west-1.amazonaws.com/x:1", 1)],
)  # fmt: skip
def test_answers_are_cached_per_cache_key_type(
    tmp_path: Path, key_type: str, second: str, runs: int
) -> None:
    chain, script = keychain(
        tmp_path, answer({"*.dkr.ecr.*.amazonaws.com": ("AWS", SECRET)}, cache_key_type=key_type)
    )
    chain.resolve(parse_reference(f"{ECR}/app:1"))
    assert chain.resolve(parse_reference(second))
    assert len(plugin_runs(script)) == runs


def test_cache_duration_then_default_then_zero(tmp_path: Path) -> None:
    clock = Clock()
    body = answer({ECR: ("AWS", SECRET)}, cache_duration="1m")
    chain, script = keychain(tmp_path, body, clock=clock)
    image = parse_reference(f"{ECR}/app:1")
    chain.resolve(image)
    clock.now += 59
    chain.resolve(image)
    assert len(plugin_runs(script)) == 1
    clock.now += 2  # past the answer's minute
    chain.resolve(image)
    assert len(plugin_runs(script)) == 2

    entry = provider(
        "ecr-credential-provider", "*.dkr.ecr.*.amazonaws.com", defaultCacheDuration="10s"
    )
    chain, script = keychain(
        tmp_path / "default", answer({ECR: ("AWS", SECRET)}), entry, clock=clock
    )
    chain.resolve(image)
    clock.now += 9
    chain.resolve(image)
    clock.now += 2
    chain.resolve(image)
    assert len(plugin_runs(script)) == 2

    chain, script = keychain(tmp_path / "zero", answer({ECR: ("AWS", SECRET)}, cache_duration="0s"))
    chain.resolve(image)
    chain.resolve(image)
    assert len(plugin_runs(script)) == 2


def test_the_cache_is_bounded(tmp_path: Path) -> None:
    chain, script = keychain(
        tmp_path, answer({ECR: ("AWS", SECRET)}, cache_key_type="Image"), max_cached=2
    )
    for name in ("a", "b", "c", "a"):
        chain.resolve(parse_reference(f"{ECR}/{name}:1"))
    assert len(plugin_runs(script)) == 4  # "a" was dropped when "c" came


PROBLEMS = [
    ("exits-non-zero", f"print({SECRET!r}); sys.stderr.write('no instance role\\n'); sys.exit(3)",
     "credential provider plugin ecr-credential-provider failed (exit 3): no instance role"),
    ("prints-too-much", "sys.stdout.write('x' * (1 << 20)); sys.stdout.flush(); time.sleep(30)",
     "credential provider plugin ecr-credential-provider printed more than 64 KiB"),
    ("not-json", f"print('{{' + {SECRET!r})",
     "credential provider plugin ecr-credential-provider printed something that is not a JSON"),
    ("wrong-api-version",
     answer({ECR: ("AWS", SECRET)}, api_version="credentialprovider.kubelet.k8s.io/v1beta1"),
     "answered apiVersion 'credentialprovider.kubelet.k8s.io/v1beta1', not " + PLUGIN_API),
    ("bad-cache-key-type", answer({ECR: ("AWS", SECRET)}, cache_key_type="Pod"),
     "answered cacheKeyType 'Pod', not Image, Registry or Global"),
    ("bad-cache-duration", answer({ECR: ("AWS", SECRET)}, cache_duration="soon"),
     "answered a cacheDuration that is not a duration"),
    ("auth-not-object", "print(json.dumps({'apiVersion': request['apiVersion'], 'kind': "
     "'CredentialProviderResponse', 'cacheKeyType': 'Image', 'auth': {'x': "
     + repr(SECRET) + "}}))",
     "answered an auth entry without username/password"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("body", "expected"), [p[1:] for p in PROBLEMS], ids=[p[0] for p in PROBLEMS]
)
def test_plugin_problems_are_one_line_without_the_secret(
    tmp_path: Path, body: str, expected: str
) -> None:
    chain, _ = keychain(tmp_path, body)
    with pytest.raises(CredentialsError) as caught:
        chain.resolve(parse_reference(f"{ECR}/app:1"))
    message = str(caught.value)
    assert expected in message
    assert SECRET not in message
    assert "\n" not in message


def test_a_hanging_plugin_is_killed_at_its_time_limit(tmp_path: Path) -> None:
    chain, _ = keychain(tmp_path, "time.sleep(60)", timeout=0.5)
    with pytest.raises(CredentialsError, match=r"did not answer within 0.5s"):
        chain.resolve(parse_reference(f"{ECR}/app:1"))


def test_on_the_event_loop_a_hanging_plugin_ends_at_the_deadline(tmp_path: Path) -> None:
    chain, script = keychain(tmp_path, "print(os.getpid(), file=sys.stderr); time.sleep(60)")

    async def run() -> None:
        await chain.aresolve(parse_reference(f"{ECR}/app:1"), Deadline.after(0.5))

    with pytest.raises(DeadlineExceeded, match="before the deadline"):
        asyncio.run(run())
    assert len(plugin_runs(script)) == 1


def test_on_the_event_loop_overlapping_asks_share_one_run(tmp_path: Path) -> None:
    chain, script = keychain(
        tmp_path, "time.sleep(0.3)\n" + answer({ECR: ("AWS", SECRET)}, cache_duration="0")
    )
    image = parse_reference(f"{ECR}/app:1")

    async def run() -> list[str]:
        found = await asyncio.gather(*(chain.aresolve(image, Deadline.after(20)) for _ in range(5)))
        return [c[0].password for c in found]

    assert asyncio.run(run()) == [SECRET] * 5
    assert len(plugin_runs(script)) == 1


# plugin_test.go (commit 2b02db1be88b09193d96585c4b6dd796d6b2e06c) Test_decodeResponse: each
# apiVersion decodes; a wrong kind or group is refused (here: not the provider's apiVersion).
_DECODE = (
    '{{"kind":"{kind}","apiVersion":"{api}","cacheKeyType":"Registry","cacheDuration":"1m",'
    '"auth":{{"*.registry.io":{{"username":"user","password":"password"}}}}}}'
)


@pytest.mark.parametrize(
    ("kind", "api", "ok"),
    [("CredentialProviderResponse", "credentialprovider.kubelet.k8s.io/v1", True),
     ("CredentialProviderResponse", "credentialprovider.kubelet.k8s.io/v1beta1", True),
     ("CredentialProviderResponse", "credentialprovider.kubelet.k8s.io/v1alpha1", True),
     ("WrongKind", "credentialprovider.kubelet.k8s.io/v1beta1", False),
     ("CredentialProviderResponse", "foobar.kubelet.k8s.io/v1beta1", False)],
    ids=["v1", "v1beta1", "v1alpha1", "wrong-kind", "wrong-group"],
)  # fmt: skip
def test_decode_response(kind: str, api: str, ok: bool) -> None:
    version = api if ok else "credentialprovider.kubelet.k8s.io/v1beta1"
    entry = Provider("p", version, ("*.registry.io",), 0.0)
    text = _DECODE.format(kind=kind, api=api)
    if not ok:
        with pytest.raises(CredentialsError):
            parse_response(entry, text)
        return
    key_type, duration, auth = parse_response(entry, text)
    assert (key_type, duration) == ("Registry", 60.0)
    ((key, creds),) = auth
    assert (key, creds.username, creds.password) == ("*.registry.io", "user", "password")


def test_the_plugin_must_be_an_executable_file_inside_the_bin_dir(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    outside = install_plugin(tmp_path / "elsewhere", "evil", "pass")
    install_plugin(bin_dir, "inside", "pass")
    (bin_dir / "escape").symlink_to(outside)
    (bin_dir / "alias").symlink_to(bin_dir / "inside")
    (bin_dir / "plain").write_text("#!/bin/sh\n")
    (bin_dir / "dir").mkdir()
    assert plugin_path(bin_dir, "alias") == (bin_dir / "inside").resolve()
    for name, problem in [
        ("escape", "leads out of"),
        ("plain", "is not executable"),
        ("dir", "is not a regular file"),
        ("missing", "does not exist"),
    ]:
        with pytest.raises(CredentialsError, match=problem):
            plugin_path(bin_dir, name)
    with pytest.raises(CredentialsError, match=r"bin dir .* does not exist"):
        plugin_path(tmp_path / "no-bin", "inside")


def test_a_missing_plugin_is_an_error_when_the_keychain_is_built(tmp_path: Path) -> None:
    config = write_provider_config(tmp_path / "c.json", provider("gcp", "*.gcr.io"))
    (tmp_path / "bin").mkdir()
    with pytest.raises(
        CredentialsError, match=r"credential provider plugin gcp: .* does not exist"
    ):
        CredentialProviders.from_files(config, tmp_path / "bin")
    assert os.listdir(tmp_path / "bin") == []
