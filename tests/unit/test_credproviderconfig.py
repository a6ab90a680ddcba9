"""The kubelet's CredentialProviderConfig, checked as the kubelet checks it
(``validateCredentialProviderConfig``): every problem one line naming the file and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from imagecheck.authn._credproviderconfig import load_provider_config, parse_go_duration
from imagecheck.errors import CredentialsError
from tests.support.credproviders import provider, write_provider_config

GOOD = provider("ecr-credential-provider", "*.dkr.ecr.*.amazonaws.com", args=["get-credentials"])


def _replace(**fields: Any) -> dict[str, Any]:
    return {**GOOD, **fields}


def _without(name: str) -> dict[str, Any]:
    return {k: v for k, v in GOOD.items() if k != name}


BAD_PROVIDERS = [
    ("name-slash", _replace(name="../ecr"), "providers[0].name: '../ecr'"),
    ("name-dotdot", _replace(name=".."), "providers[0].name: '..'"),
    ("name-space", _replace(name="ecr provider"), "providers[0].name: 'ecr provider'"),
    ("name-missing", _without("name"), "providers[0].name: required"),
    ("api-missing", _without("apiVersion"), "providers[0].apiVersion: required"),
    ("api-unsupported", _replace(apiVersion="credentialprovider.kubelet.k8s.io/v2"),
     "providers[0].apiVersion: 'credentialprovider.kubelet.k8s.io/v2' is not one of"),
    ("match-missing", _without("matchImages"), "providers[0].matchImages: at least 1"),
    ("match-empty", _replace(matchImages=[]), "providers[0].matchImages: at least 1"),
    ("match-unparseable", _replace(matchImages=["host:port"]),
     "providers[0].matchImages: 'host:port' is invalid: invalid port"),
    ("match-not-strings", _replace(matchImages=[1]), "providers[0].matchImages: must be a list"),
    ("duration-missing", _without("defaultCacheDuration"),
     "providers[0].defaultCacheDuration: required"),
    ("duration-words", _replace(defaultCacheDuration="12 hours"),
     "providers[0].defaultCacheDuration: '12 hours' is not a duration"),
    ("duration-negative", _replace(defaultCacheDuration="-1h"),
     "providers[0].defaultCacheDuration: '-1h' is not a duration >= 0"),
    ("duration-number", _replace(defaultCacheDuration=5),
     "providers[0].defaultCacheDuration: '5' is not a duration"),
    ("args", _replace(args="get-credentials"), "providers[0].args: must be a list of strings"),
    ("env", _replace(env=[{"value": "x"}]), "providers[0].env[0]: must be {name, value}"),
    ("token-attributes", _replace(tokenAttributes={"serviceAccountTokenAudience": "x"}),
     "providers[0].tokenAttributes: service account token providers are not supported"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("entry", "expected"),
    [case[1:] for case in BAD_PROVIDERS],
    ids=[case[0] for case in BAD_PROVIDERS],
)
def test_bad_provider_is_one_line_naming_file_and_field(
    tmp_path: Path, entry: dict[str, Any], expected: str
) -> None:
    path = write_provider_config(tmp_path / "config.json", entry)
    with pytest.raises(CredentialsError) as caught:
        load_provider_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert expected in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("apiVersion: kubelet.config.k8s.io/v2\nkind: CredentialProviderConfig\n", "apiVersion"),
        ("apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n", "kind: must be"),
        ("apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\n", "providers:"),
        ("apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders: []\n",
         "providers: at least 1"),
        ("[unclosed", "not valid YAML or JSON"),
        ("- a list\n", "expected a CredentialProviderConfig object"),
    ],
    ids=["api-version", "kind", "no-providers", "empty-providers", "not-yaml", "not-object"],
)  # fmt: skip
def test_bad_document(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CredentialsError, match=expected):
        load_provider_config(path)


def test_duplicate_names_are_refused(tmp_path: Path) -> None:
    path = write_provider_config(tmp_path / "c.json", GOOD, GOOD)
    with pytest.raises(CredentialsError, match=r"providers\[1\].name: duplicate"):
        load_provider_config(path)


def test_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(CredentialsError, match="credential provider config"):
        load_provider_config(tmp_path / "nope.yaml")


def test_yaml_as_the_kubelet_docs_write_it(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "apiVersion: kubelet.config.k8s.io/v1\n"
        "kind: CredentialProviderConfig\n"
        "providers:\n"
        "  - name: ecr-credential-provider\n"
        "    matchImages:\n"
        '      - "*.dkr.ecr.*.amazonaws.com"\n'
        '      - "*.dkr.ecr.*.amazonaws.com.cn"\n'
        '    defaultCacheDuration: "12h"\n'
        "    apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
        "    env:\n"
        "      - name: AWS_PROFILE\n"
        "        value: node\n",
        encoding="utf-8",
    )
    (only,) = load_provider_config(path)
    assert only.name == "ecr-credential-provider"
    assert only.match_images == ("*.dkr.ecr.*.amazonaws.com", "*.dkr.ecr.*.amazonaws.com.cn")
    assert only.default_cache_duration == 12 * 3600
    assert only.env == (("AWS_PROFILE", "node"),)
    assert "node" not in repr(only)  # env values stay out of repr


def test_a_directory_merges_its_files_in_lexical_order(tmp_path: Path) -> None:
    write_provider_config(tmp_path / "d" / "20-b.json", provider("b", "b.example"))
    write_provider_config(tmp_path / "d" / "10-a.yaml", provider("a", "a.example"))
    (tmp_path / "d" / "README").write_text("not a config", encoding="utf-8")
    assert [p.name for p in load_provider_config(tmp_path / "d")] == ["a", "b"]
    write_provider_config(tmp_path / "d" / "30-a.yml", provider("a", "c.example"))
    with pytest.raises(CredentialsError, match=r"30-a\.yml: providers\.name: duplicate"):
        load_provider_config(tmp_path / "d")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("12h", 43200.0), ("1h30m", 5400.0), ("0", 0.0), ("1.5s", 1.5), ("300ms", 0.3),
     ("2m0s", 120.0), ("+5m", 300.0)],
)  # fmt: skip
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "h", "1", "1d", "12 h", ".h"])
def test_not_go_durations(text: str) -> None:
    with pytest.raises(ValueError, match=r".*"):
        parse_go_duration(text)
