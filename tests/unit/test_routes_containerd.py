"""containerd's hosts.toml directories as routes: the cases of containerd 1.6.20's own
``remotes/docker/config/hosts_test.go`` (its TOML in tests/fixtures/containerd/, Apache-2.0),
then the directory lookup, the default endpoint, the URL rules and the capabilities."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from imagecheck.reference import parse_reference
from imagecheck.routes import Endpoint, HostTLS, Route, Verdict, load_hosts_dir

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "containerd"
DIGEST = "sha256:" + "a" * 64


def route(root: Path, image: str) -> Route:
    return load_hosts_dir(root).route(parse_reference(image), image)


def write(root: Path, directory: str, text: str) -> Path:
    (root / directory).mkdir(parents=True, exist_ok=True)
    file = root / directory / "hosts.toml"
    file.write_text(text, encoding="utf-8")
    return file


def where(endpoint: Endpoint) -> tuple[str | None, str, str, bool, bool]:
    return endpoint.scheme, endpoint.host, endpoint.path, endpoint.tags, endpoint.digests


# -- containerd's TestParseHostFile: its TOML, its expected hosts in its order ---------------

PULL = (False, True)  # capabilities = ["pull"]: digests only (a tag needs resolve too)
ALL = (True, True)
CERTS = Path("/etc/certs")
PARSE_HOST_FILE = [
    # (scheme, host, path, (tags, digests), ca, client pairs, skip_verify, headers)
    ("https", "mirror.registry", "/v2", PULL, (CERTS / "mirror.pem",), (), False,
     (("x-custom-2", "value1"), ("x-custom-2", "value2"))),
    ("https", "mirror-bak.registry", "/us/v2", PULL, (), (), True, ()),
    ("http", "mirror.registry", "/v2", PULL, (), (), False, ()),
    ("https", "test-1.registry", "/v2", ALL, (CERTS / "test-1-ca.pem", CERTS / "special.pem"),
     ((CERTS / "client.cert", CERTS / "client.key"), (CERTS / "client.pem", None)), False, ()),
    ("https", "test-2.registry", "/v2", ALL, (), ((CERTS / "client.pem", None),), False, ()),
    ("https", "test-3.registry", "/v2", ALL, (),
     ((CERTS / "client-1.pem", None), (CERTS / "client-2.pem", None)), False, ()),
    ("https", "noncompliantmirror.registry", "/v2/namespaceprefix", PULL, (), (), False, ()),
    ("https", "noprefixnoncompliant.registry", "", ALL, (), (), False, ()),
    ("https", "test-default.registry", "/v2", ALL, (Path("/etc/path/default"),), (), False,
     (("x-custom-1", "custom header"),)),
]  # fmt: skip


def test_containerd_parse_host_file(tmp_path: Path) -> None:
    directory = tmp_path / "test-default.registry"
    directory.mkdir()
    shutil.copy(FIXTURES / "parse_host_file.toml", directory / "hosts.toml")
    got = route(tmp_path, "test-default.registry/app:1")
    assert got.verdict is Verdict.FIRST_FAILURE
    assert got.source == f"hosts.toml in {tmp_path}"
    rows = [
        (
            e.scheme,
            e.host,
            e.path,
            (e.tags, e.digests),
            e.tls.ca_files,
            e.tls.client_pairs,
            e.tls.skip_verify,
            e.headers,
        )
        for e in got.endpoints
    ]
    assert rows == PARSE_HOST_FILE
    # Every host but the registry's own gets containerd's ?ns=; each names its table's line.
    assert [e.namespace for e in got.endpoints] == ["test-default.registry"] * 8 + [None]
    assert [e.mirror for e in got.endpoints] == [True] * 8 + [False]
    file = directory / "hosts.toml"
    assert got.endpoints[0].origin == f"{file}:6"
    assert got.endpoints[-1].origin == f"{file}:1"


def test_containerd_default_hosts(tmp_path: Path) -> None:
    """TestDefaultHosts: docker.io with no configuration is https://registry-1.docker.io/v2."""
    (endpoint,) = route(tmp_path, "busybox").endpoints
    assert where(endpoint) == ("https", "registry-1.docker.io", "/v2", True, True)
    assert endpoint.repository == "library/busybox"
    assert endpoint.namespace is None and not endpoint.mirror


@pytest.mark.parametrize(
    ("files", "ca", "pairs"),
    [
        (["ca.crt"], ["ca.crt"], []),
        (["ca.crt", "client.cert", "client.key"], ["ca.crt"], [("client.cert", "client.key")]),
        (["client.cert", "client.key"], [], [("client.cert", "client.key")]),
        (
            ["client.cert", "b.crt", "a.crt", "other.pem"],
            ["a.crt", "b.crt"],
            [("client.cert", None)],
        ),
    ],
    ids=["crt-only", "crt-and-cert-pair", "cert-pair-only", "cert-without-key-name-order"],
)
def test_containerd_load_cert_files(
    tmp_path: Path, files: list[str], ca: list[str], pairs: list[tuple[str, str | None]]
) -> None:
    """TestLoadCertFiles: without hosts.toml, Docker's layout gives the registry's TLS."""
    directory = tmp_path / "testing.io"
    directory.mkdir()
    for name in files:
        (directory / name).write_text("x", encoding="utf-8")
    (directory / "sub.crt").mkdir()  # a directory is no CA, whatever its name
    (endpoint,) = route(tmp_path, "testing.io/app:1").endpoints
    assert where(endpoint) == ("https", "testing.io", "/v2", True, True)
    assert endpoint.tls == HostTLS(
        ca_files=tuple(directory / name for name in ca),
        client_pairs=tuple((directory / c, directory / k if k else None) for c, k in pairs),
    )
    assert endpoint.origin == str(directory)


# -- which directory serves a registry --------------------------------------------------------


@pytest.mark.parametrize(
    ("directories", "image", "served_by"),
    [
        (
            ["reg.local_5000_", "reg.local:5000", "_default"],
            "reg.local:5000/a:1",
            "reg.local_5000_",
        ),
        (["reg.local:5000", "_default"], "reg.local:5000/a:1", "reg.local:5000"),
        (["reg.local", "_default"], "reg.local:5000/a:1", "_default"),
        (["reg.local_5000_"], "reg.local/a:1", None),
        (["docker.io"], "index.docker.io/library/busybox", "docker.io"),
        (["registry-1.docker.io"], "busybox", None),
    ],
    ids=["port-dir-first", "host-port-dir", "default-dir", "none", "hub-normalised", "hub-api"],
)
def test_host_directory(
    tmp_path: Path, directories: list[str], image: str, served_by: str | None
) -> None:
    for number, name in enumerate(directories):
        write(tmp_path, name, f'server = "https://mirror-{number}.local"\n[host]\n')
    (endpoint,) = route(tmp_path, image).endpoints
    if served_by is None:
        assert endpoint.origin == ""
    else:
        assert endpoint.host == f"mirror-{directories.index(served_by)}.local"
        assert endpoint.origin == f"{tmp_path / served_by / 'hosts.toml'}:1"


@pytest.mark.parametrize(
    ("image", "scheme", "host", "skip_verify"),
    [
        ("busybox", "https", "registry-1.docker.io", False),
        ("localhost:5000/a", "http", "localhost:5000", True),
        ("localhost/a", "http", "localhost", True),
        ("127.0.0.1:5000/a", "http", "127.0.0.1:5000", True),
        ("[::1]:5000/a", "http", "[::1]:5000", True),
        ("127.0.0.2:5000/a", "http", "127.0.0.2:5000", True),
        ("quay.io/a/b", "https", "quay.io", False),
        ("reg.local:5000/a", "https", "reg.local:5000", False),
    ],
)
def test_default_endpoint(
    tmp_path: Path, image: str, scheme: str, host: str, skip_verify: bool
) -> None:
    """ConfigureHosts pins the default endpoint's scheme: HTTPS, but plain HTTP (TLS not
    verified) for a loopback registry."""
    (endpoint,) = route(tmp_path, image).endpoints
    assert (endpoint.scheme, endpoint.host, endpoint.tls.skip_verify) == (scheme, host, skip_verify)
    assert endpoint.path == "/v2" and endpoint.namespace is None


def test_file_without_server_keeps_its_tls_for_the_default_endpoint(tmp_path: Path) -> None:
    write(
        tmp_path,
        "reg.local",
        'capabilities = ["pull"]\nca = "ca.pem"\n[header]\n  x-a = "1"\n'
        '[host."https://mirror.local"]\n',
    )
    mirror, server = route(tmp_path, "reg.local/a:1").endpoints
    assert where(mirror) == ("https", "mirror.local", "/v2", True, True)
    # containerd fills in the registry's endpoint with every capability, keeping the rest.
    assert where(server) == ("https", "reg.local", "/v2", True, True)
    assert server.tls.ca_files == (tmp_path / "reg.local" / "ca.pem",)
    assert server.headers == (("x-a", "1"),)


def test_file_without_host_table_is_ignored_as_containerd_1_6_does(tmp_path: Path) -> None:
    """containerd 1.6 cannot decode a hosts.toml without a [host] table (containerd issue
    10027): it uses the directory's certificate files and the registry's own endpoint."""
    file = write(tmp_path, "reg.local", 'server = "https://mirror.local"\n')
    (tmp_path / "reg.local" / "ca.crt").write_text("x", encoding="utf-8")
    (endpoint,) = route(tmp_path, "reg.local/a:1").endpoints
    assert where(endpoint) == ("https", "reg.local", "/v2", True, True)
    assert endpoint.tls.ca_files == (tmp_path / "reg.local" / "ca.crt",)
    assert str(file) in endpoint.origin and "no [host] table" in endpoint.origin


def test_empty_hosts_toml_is_docker_layout(tmp_path: Path) -> None:
    write(tmp_path, "reg.local", "")
    (endpoint,) = route(tmp_path, "reg.local/a:1").endpoints
    assert where(endpoint) == ("https", "reg.local", "/v2", True, True)


def test_hosts_in_file_order_server_last(tmp_path: Path) -> None:
    write(
        tmp_path,
        "docker.io",
        'server = "https://registry-1.docker.io"\n'
        '[host."https://z.mirror"]\n[host."https://a.mirror"]\n[host."https://m.mirror"]\n',
    )
    got = route(tmp_path, "busybox")
    assert [e.host for e in got.endpoints] == [
        "z.mirror",
        "a.mirror",
        "m.mirror",
        "registry-1.docker.io",
    ]
    # registry-1.docker.io is Docker Hub's own host: no ?ns= for it.
    assert [e.namespace for e in got.endpoints] == ["docker.io"] * 3 + [None]


# -- URLs --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "override", "scheme", "host", "path"),
    [
        ("mirror.local", False, "https", "mirror.local", "/v2"),
        ("mirror.local:5000", False, "https", "mirror.local:5000", "/v2"),
        ("http://mirror.local:5000", False, "http", "mirror.local:5000", "/v2"),
        ("https://mirror.local/", False, "https", "mirror.local", "/v2"),
        ("https://mirror.local/v2/", False, "https", "mirror.local", "/v2"),
        ("https://mirror.local//a/../b/", False, "https", "mirror.local", "/b/v2"),
        ("https://mirror.local/api", True, "https", "mirror.local", "/api"),
        ("https://mirror.local", True, "https", "mirror.local", ""),
        ("https://user:pw@mirror.local?x=1#y", False, "https", "mirror.local", "/v2"),
        ("https://[::1]:5000/p%2Fq", False, "https", "[::1]:5000", "/p/q/v2"),
    ],
)
def test_host_url(
    tmp_path: Path, key: str, override: bool, scheme: str, host: str, path: str
) -> None:
    flag = "  override_path = true\n" if override else ""
    write(tmp_path, "reg.local", f'[host."{key}"]\n{flag}')
    mirror, _ = route(tmp_path, "reg.local/a:1").endpoints
    assert (mirror.scheme, mirror.host, mirror.path) == (scheme, host, path)


def test_server_with_path(tmp_path: Path) -> None:
    write(tmp_path, "reg.local", 'server = "reg.local/prefix"\n[host]\n')
    (server,) = route(tmp_path, "reg.local/a:1").endpoints
    assert (server.scheme, server.host, server.path) == ("https", "reg.local", "/prefix/v2")
    assert server.namespace is None


# -- capabilities ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capabilities", "tag", "digest"),
    [
        ("[]", True, True),
        ('["pull"]', False, True),
        ('["resolve"]', False, False),
        ('["pull", "resolve"]', True, True),
        ('["PULL", "Resolve"]', True, True),
        ('["push"]', False, False),
    ],
)
def test_capabilities(tmp_path: Path, capabilities: str, tag: bool, digest: bool) -> None:
    write(tmp_path, "reg.local", f'[host."https://m.local"]\n  capabilities = {capabilities}\n')
    mirror, server = route(tmp_path, "reg.local/a:1").endpoints
    by_tag, by_digest = parse_reference("reg.local/a:1"), parse_reference(f"reg.local/a@{DIGEST}")
    assert (mirror.serves(by_tag), mirror.serves(by_digest)) == (tag, digest)
    assert server.serves(by_tag) and server.serves(by_digest)
