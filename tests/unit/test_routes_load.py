"""Which router a node's registry configuration makes, and what the checker does with a route
it cannot make (``imagecheck.routes.load_router``, ``registry._routing.route_of``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from imagecheck.cli import cli
from imagecheck.errors import UsageError
from imagecheck.reference import Reference, parse_reference
from imagecheck.registry._routing import endpoint_reference, route_of
from imagecheck.result import CheckResult, Status
from imagecheck.routes import Endpoint, Route, load_router


def test_no_configuration_is_no_router() -> None:
    assert load_router() is None
    assert load_router(mirrors=True) is None


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"hosts_dir": "/d", "registries_conf": "/f"}, "not both"),
        ({"hosts_dir": "/d", "mirrors": True}, "mirrors cannot be given beside"),
        ({"registries_conf": "/f", "mirrors": True}, "mirrors cannot be given beside"),
    ],
    ids=["both-runtimes", "hosts-dir-and-mirrors", "registries-conf-and-mirrors"],
)
def test_one_runtime_and_no_mirrors_beside_it(given: dict[str, object], says: str) -> None:
    with pytest.raises(UsageError, match=says):
        load_router(**given)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "args",
    [
        ["--hosts-dir", "/d", "--registries-conf", "/f"],
        ["--hosts-dir", "/d", "--mirror", "docker.io=mirror.example:5000"],
    ],
    ids=["both", "with-mirror"],
)
def test_the_cli_refuses_them_with_exit_2(args: list[str]) -> None:
    result = CliRunner().invoke(cli, ["check", *args, "busybox"])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output


class _Refusing:
    def route(self, ref: Reference, text: str) -> Route:
        raise UsageError(f"short name {text!r} is ambiguous")


def test_a_reference_the_router_cannot_route_is_invalid() -> None:
    ref = parse_reference("busybox")
    result = route_of(ref, "busybox", _Refusing(), ())
    assert isinstance(result, CheckResult)
    assert result.status is Status.INVALID
    assert "ambiguous" in result.message


def test_mirrors_come_before_the_registry_without_a_router() -> None:
    ref = parse_reference("docker.io/library/busybox:1")
    route = route_of(ref, "busybox:1", None, (("docker.io", "m1:5000"), ("quay.io", "m2")))
    assert isinstance(route, Route)
    assert [(e.host, e.mirror) for e in route.endpoints] == [
        ("m1:5000", True),
        ("registry-1.docker.io", False),
    ]


def test_an_endpoint_of_the_references_own_registry_keeps_the_reference() -> None:
    ref = parse_reference("docker.io/library/busybox:1")
    own = endpoint_reference(ref, Endpoint("registry-1.docker.io", "library/busybox"))
    assert own is ref and own.is_docker_hub  # Docker Hub's credentials still apply
    moved = endpoint_reference(ref, Endpoint("mirror:5000", "hub/library/busybox"))
    assert (moved.registry, moved.repository, moved.tag) == (
        "mirror:5000",
        "hub/library/busybox",
        "1",
    )


def test_a_directory_is_read_as_a_path(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not both"):
        load_router(hosts_dir=tmp_path, registries_conf=tmp_path / "f")
