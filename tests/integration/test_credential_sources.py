"""Every credential source gives access to a private repository of the real registry, in
htpasswd (Basic over TLS) and token modes; and no secret ever shows in what the CLI prints."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.clirun import Run, run_cli, tls_args
from tests.support.credentials import install_helper, write_json
from tests.support.endpoint import RegistryEndpoint

PRIVATE = "private/secret:1.0"
AUTH_MODES = ["registry_basic", "registry_token"]


@pytest.fixture(params=AUTH_MODES)
def endpoint(request: pytest.FixtureRequest) -> RegistryEndpoint:
    value = request.getfixturevalue(request.param)
    assert isinstance(value, RegistryEndpoint)
    return value


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def auth_entry(endpoint: RegistryEndpoint, password: str | None = None) -> dict[str, str]:
    return {"auth": b64(f"{endpoint.username}:{password or endpoint.password}")}


def check_private(
    endpoint: RegistryEndpoint, home: Path, *args: str, env: dict[str, str] | None = None
) -> Run:
    return run_cli(["check", *tls_args(endpoint), *args, endpoint.ref(PRIVATE)], home, env=env)


# -- each source on its own ----------------------------------------------------------------

Source = Callable[[RegistryEndpoint, Path], tuple[list[str], dict[str, str]]]


def _env_vars(ep: RegistryEndpoint, tmp: Path) -> tuple[list[str], dict[str, str]]:
    assert ep.username is not None and ep.password is not None
    return [], {"IMAGECHECK_USERNAME": ep.username, "IMAGECHECK_PASSWORD": ep.password}


def _config_auth(ep: RegistryEndpoint, tmp: Path) -> tuple[list[str], dict[str, str]]:
    write_json(tmp / "docker" / "config.json", {"auths": {ep.host: auth_entry(ep)}})
    return [], {"DOCKER_CONFIG": str(tmp / "docker")}


def _config_fields_https_key(ep: RegistryEndpoint, tmp: Path) -> tuple[list[str], dict[str, str]]:
    entry = {"username": ep.username, "password": ep.password}
    write_json(tmp / "cfg.json", {"auths": {f"https://{ep.host}/v2/": entry}})
    return ["--docker-config", str(tmp / "cfg.json")], {}


def _home_config(ep: RegistryEndpoint, tmp: Path) -> tuple[list[str], dict[str, str]]:
    write_json(tmp / ".docker" / "config.json", {"auths": {ep.host: auth_entry(ep)}})
    return [], {}


def _docker_auth_config(ep: RegistryEndpoint, tmp: Path) -> tuple[list[str], dict[str, str]]:
    return [], {"DOCKER_AUTH_CONFIG": json.dumps({"auths": {ep.host: auth_entry(ep)}})}


def _registry_auth_file(ep: RegistryEndpoint, tmp: Path) -> tuple[list[str], dict[str, str]]:
    path = write_json(tmp / "auth.json", {"auths": {f"{ep.host}/private": auth_entry(ep)}})
    return [], {"REGISTRY_AUTH_FILE": str(path)}


def _xdg_auth_json(ep: RegistryEndpoint, tmp: Path) -> tuple[list[str], dict[str, str]]:
    write_json(tmp / "run" / "containers" / "auth.json", {"auths": {ep.host: auth_entry(ep)}})
    return [], {"XDG_RUNTIME_DIR": str(tmp / "run")}


def _pull_secret_dir(ep: RegistryEndpoint, tmp: Path) -> tuple[list[str], dict[str, str]]:
    write_json(tmp / "secret" / ".dockerconfigjson", {"auths": {ep.host: auth_entry(ep)}})
    return ["--pull-secret", str(tmp / "secret")], {}


def _pull_secret_legacy_file(ep: RegistryEndpoint, tmp: Path) -> tuple[list[str], dict[str, str]]:
    path = write_json(tmp / "legacy" / ".dockercfg", {f"https://{ep.host}": auth_entry(ep)})
    return ["--pull-secret", str(path)], {}


def _pull_secret_env(ep: RegistryEndpoint, tmp: Path) -> tuple[list[str], dict[str, str]]:
    write_json(tmp / "s1" / ".dockerconfigjson", {"auths": {"other.example:5000": {}}})
    write_json(tmp / "s2" / ".dockerconfigjson", {"auths": {ep.host: auth_entry(ep)}})
    return [], {"IMAGECHECK_PULL_SECRETS": f"{tmp / 's1'}{os.pathsep}{tmp / 's2'}"}


def _pull_secret_glob(ep: RegistryEndpoint, tmp: Path) -> tuple[list[str], dict[str, str]]:
    port = ep.host.rsplit(":", 1)[1]
    key = f"*.0.0.1:{port}/private"  # kubelet globs match one label each
    write_json(tmp / "glob" / ".dockerconfigjson", {"auths": {key: auth_entry(ep)}})
    return ["--pull-secret", str(tmp / "glob")], {}


SOURCES: dict[str, Source] = {
    "env-vars": _env_vars,
    "config-json-auth": _config_auth,
    "config-json-fields-url-key": _config_fields_https_key,
    "home-docker-config": _home_config,
    "docker-auth-config": _docker_auth_config,
    "registry-auth-file-namespace-key": _registry_auth_file,
    "xdg-auth-json": _xdg_auth_json,
    "pull-secret-dir": _pull_secret_dir,
    "pull-secret-legacy-dockercfg": _pull_secret_legacy_file,
    "pull-secrets-env": _pull_secret_env,
    "pull-secret-glob-and-path": _pull_secret_glob,
}


@pytest.mark.parametrize("source", list(SOURCES), ids=list(SOURCES))
def test_source_gives_access_to_private_repository(
    endpoint: RegistryEndpoint, tmp_path: Path, source: str
) -> None:
    args, env = SOURCES[source](endpoint, tmp_path)
    run = check_private(endpoint, tmp_path, *args, env=env)
    assert run.code == 0, run.stdout + run.stderr
    assert run.stdout.startswith("found")


def test_without_any_source_is_denied(endpoint: RegistryEndpoint, tmp_path: Path) -> None:
    run = check_private(endpoint, tmp_path)
    assert run.code == 3
    assert "requires authorization" in run.stdout


def test_wrong_password_in_config_is_denied(endpoint: RegistryEndpoint, tmp_path: Path) -> None:
    write_json(
        tmp_path / "d" / "config.json", {"auths": {endpoint.host: auth_entry(endpoint, "nope")}}
    )
    run = check_private(endpoint, tmp_path, env={"DOCKER_CONFIG": str(tmp_path / "d")})
    assert run.code == 3
    assert "denied" in run.stdout


def test_first_matching_pull_secret_wrong_second_right(
    endpoint: RegistryEndpoint, tmp_path: Path
) -> None:
    """Like the kubelet: the more specific entry is tried first, refused, then the next."""
    write_json(
        tmp_path / "a" / ".dockerconfigjson",
        {"auths": {f"{endpoint.host}/private": auth_entry(endpoint, "wrong-password")}},
    )
    write_json(
        tmp_path / "b" / ".dockerconfigjson", {"auths": {endpoint.host: auth_entry(endpoint)}}
    )
    args = ["--pull-secret", str(tmp_path / "a"), "--pull-secret", str(tmp_path / "b")]
    run = check_private(endpoint, tmp_path, *args)
    assert run.code == 0, run.stdout + run.stderr


def test_precedence_flags_over_pull_secrets_over_config(
    endpoint: RegistryEndpoint, tmp_path: Path
) -> None:
    assert endpoint.username is not None and endpoint.password is not None
    write_json(tmp_path / "d" / "config.json", {"auths": {endpoint.host: auth_entry(endpoint)}})
    write_json(
        tmp_path / "s" / ".dockerconfigjson",
        {"auths": {endpoint.host: auth_entry(endpoint, "bad")}},
    )
    env = {"DOCKER_CONFIG": str(tmp_path / "d")}
    secret = ["--pull-secret", str(tmp_path / "s")]
    # The pull secret (wrong) outranks config.json (right): denied.
    assert check_private(endpoint, tmp_path, *secret, env=env).code == 3
    # Flags (right) outrank the pull secret (wrong): found.
    flags = ["--username", endpoint.username, "--password-stdin"]
    run = run_cli(
        ["check", *tls_args(endpoint), *flags, *secret, endpoint.ref(PRIVATE)],
        tmp_path,
        stdin=endpoint.password + "\n",
        env=env,
    )
    assert run.code == 0, run.stdout + run.stderr


# -- token-mode specifics ------------------------------------------------------------------


def test_identity_token_uses_oauth_refresh(
    registry_token: RegistryEndpoint, tmp_path: Path
) -> None:
    server = registry_token.token_server
    assert server is not None
    [refresh] = list(server.refresh_tokens)
    entry = {"auth": b64("<token>:"), "identitytoken": refresh}
    write_json(tmp_path / "d" / "config.json", {"auths": {registry_token.host: entry}})
    run = check_private(registry_token, tmp_path, env={"DOCKER_CONFIG": str(tmp_path / "d")})
    assert run.code == 0, run.stdout + run.stderr
    [post] = [r for r in server.requests if r.method == "POST"]
    assert post.form["grant_type"] == ["refresh_token"]
    assert post.form["refresh_token"] == [refresh]
    assert post.scopes == ["repository:private/secret:pull"]


def test_registry_token_is_sent_as_bearer(registry_token: RegistryEndpoint, tmp_path: Path) -> None:
    server = registry_token.token_server
    assert server is not None
    access = [{"type": "repository", "name": "private/secret", "actions": ["pull"]}]
    token = server.issue("alice", access)
    write_json(
        tmp_path / "d" / "config.json", {"auths": {registry_token.host: {"registrytoken": token}}}
    )
    run = check_private(registry_token, tmp_path, env={"DOCKER_CONFIG": str(tmp_path / "d")})
    assert run.code == 0, run.stdout + run.stderr
    assert server.requests == []  # no token exchange at all


# -- credential helpers ----------------------------------------------------------------------

HELPERS = {
    "ok": 'printf \'{"ServerURL":"%s","Username":"%s","Secret":"%s"}\' "$server" "$USER_" "$PASS_"',
    "notfound": 'echo "credentials not found in native keychain"; exit 1',
    "broken": 'echo "helper exploded: keychain locked" >&2; exit 3',
    "garbage": 'echo "this is not json $PASS_"',
    # Prints its answer, then fails: the Secret is on stdout, and must stay there.
    "leaky": 'printf \'{"Username":"%s","Secret":"%s"}\' "$USER_" "$PASS_"; exit 1',
    "noisy": "printf 'keychain \\033[31mlocked\\r\\nfound x\\n' >&2; exit 4",
}


def helper_env(
    endpoint: RegistryEndpoint, tmp_path: Path, config: dict[str, object]
) -> dict[str, str]:
    assert endpoint.username is not None and endpoint.password is not None
    bin_dir = tmp_path / "bin"
    for name, body in HELPERS.items():
        install_helper(bin_dir, name, body)
    write_json(tmp_path / "d" / "config.json", config)
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "DOCKER_CONFIG": str(tmp_path / "d"),
        "USER_": endpoint.username,
        "PASS_": endpoint.password,
    }


@pytest.mark.parametrize("key", ["credHelpers", "credsStore"])
def test_credential_helper_success(endpoint: RegistryEndpoint, tmp_path: Path, key: str) -> None:
    config: dict[str, object] = (
        {"credHelpers": {endpoint.host: "ok"}} if key == "credHelpers" else {"credsStore": "ok"}
    )
    run = check_private(endpoint, tmp_path, env=helper_env(endpoint, tmp_path, config))
    assert run.code == 0, run.stdout + run.stderr
    log = (tmp_path / "bin" / "docker-credential-ok.log").read_text().split()
    assert log == [endpoint.host]  # asked once, with the registry host


def test_credential_helper_not_found_means_anonymous(
    endpoint: RegistryEndpoint, tmp_path: Path
) -> None:
    env = helper_env(endpoint, tmp_path, {"credHelpers": {endpoint.host: "notfound"}})
    run = check_private(endpoint, tmp_path, env=env)
    assert run.code == 3  # anonymous, so denied: not an error
    assert "anonymously" in run.stdout


@pytest.mark.parametrize(
    ("helper", "expected"),
    [
        ("broken", "docker-credential-broken failed (exit 3): helper exploded"),
        ("garbage", "docker-credential-garbage printed something that is not JSON"),
        ("missing", "docker-credential-missing is not on PATH"),
        ("leaky", "docker-credential-leaky failed (exit 1)\n"),
        ("noisy", "docker-credential-noisy failed (exit 4): keychain ?[31mlocked\n"),
    ],
    ids=["fails", "garbage", "missing", "secret-on-stdout", "control-characters"],
)
def test_credential_helper_problems_are_one_line_usage_errors(
    registry_basic: RegistryEndpoint, tmp_path: Path, helper: str, expected: str
) -> None:
    env = helper_env(registry_basic, tmp_path, {"credHelpers": {registry_basic.host: helper}})
    before = registry_basic.registry.request_count()
    run = check_private(registry_basic, tmp_path, env=env)
    assert run.code == 2
    assert run.stdout == ""
    assert len(run.stderr.splitlines()) == 1
    assert run.stderr.startswith(f"imagecheck: error: credential helper {expected}")
    assert registry_basic.password is not None
    assert registry_basic.password not in run.stderr  # the garbage helper echoes it
    assert registry_basic.registry.request_count() == before  # nothing was sent


# -- malformed inputs: exit 2 before any request ---------------------------------------------


@pytest.mark.parametrize(
    ("what", "expected"),
    [
        ("bad-json", "not valid JSON"),
        ("bad-base64", "'auth' is not valid base64"),
        ("no-colon", "'auth' must encode 'username:password'"),
        ("missing-secret", "does not exist"),
    ],
    ids=["bad-json", "bad-base64", "no-colon", "missing-secret"],
)
def test_malformed_credentials_exit_2_before_any_request(
    registry_basic: RegistryEndpoint, tmp_path: Path, what: str, expected: str
) -> None:
    secret = tmp_path / "s" / ".dockerconfigjson"
    secret.parent.mkdir()
    if what == "bad-json":
        secret.write_text("{not json")
    elif what == "bad-base64":
        write_json(secret, {"auths": {registry_basic.host: {"auth": "%%%"}}})
    elif what == "no-colon":
        write_json(secret, {"auths": {registry_basic.host: {"auth": b64("nocolon")}}})
    else:
        secret = tmp_path / "nowhere"
    before = registry_basic.registry.request_count()
    run = check_private(registry_basic, tmp_path, "--pull-secret", str(secret))
    assert run.code == 2
    [line] = run.stderr.strip().splitlines()
    assert expected in line
    assert str(secret) in line
    assert registry_basic.registry.request_count() == before


# -- no secret anywhere in the output, at any verbosity ----------------------------------------


def test_verbose_output_never_contains_a_secret(
    registry_token: RegistryEndpoint, tmp_path: Path
) -> None:
    ep = registry_token
    assert ep.username is not None and ep.password is not None and ep.token_server is not None
    [refresh] = list(ep.token_server.refresh_tokens)
    secrets = {
        "flag": ep.password,
        "pull": "pull-secret-" + "x" * 12,
        "gitlab": "gitlab-" + "y" * 12,
        "config": "config-" + "z" * 12,
        "refresh": refresh,
    }
    write_json(
        tmp_path / "s" / ".dockerconfigjson", {"auths": {ep.host: auth_entry(ep, secrets["pull"])}}
    )
    write_json(
        tmp_path / "d" / "config.json",
        {
            "auths": {
                "other.test": {"identitytoken": refresh},
                ep.host: auth_entry(ep, secrets["config"]),
            }
        },
    )
    env = {
        "DOCKER_CONFIG": str(tmp_path / "d"),
        "DOCKER_AUTH_CONFIG": json.dumps({"auths": {ep.host: auth_entry(ep, secrets["gitlab"])}}),
    }
    images = [ep.ref(PRIVATE), ep.ref("sample/app:1.0.0"), ep.ref("sample/app:nope")]
    for output in ("text", "json"):
        for password in (ep.password, "wrong-" + "w" * 10):
            args = ["check", "-v", "-o", output, *tls_args(ep), "--username", ep.username]
            args += ["--password-stdin", "--pull-secret", str(tmp_path / "s"), *images]
            run = run_cli(args, tmp_path, stdin=password + "\n", env=env)
            everything = run.stdout + run.stderr
            assert "Authorization: Bearer [redacted]" in everything or run.code == 3
            for secret in [*secrets.values(), password]:
                assert secret not in everything
            # Tokens the server issued are secrets too: no JWT-looking text anywhere.
            assert "eyJ" not in everything
