"""The route ``registries.conf`` gives a reference: the hosts containers/image asks, in its
order, with the reference each is asked for; blocked registries and unresolvable short names
are refusals. Expected values are those of containers/image v5.23's Go tests
(``system_registries_v2_test.go``, ``shortnames_test.go``) on its own test files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from imagecheck.errors import InvalidReferenceError
from imagecheck.reference import parse_reference
from imagecheck.routes import Endpoint, Route, Verdict, load_registries_conf

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "registries-conf"
DATA = FIXTURES / "sysregistriesv2"
SHORT = FIXTURES / "shortnames"
NONE = FIXTURES / "this-does-not-exist"
DIGEST = "@sha256:" + "a" * 64
SHORT_DIGEST = "@sha256:d366a4665ab44f0648d7a00ae3fae139d55e32f9712c67accd604bb55df9d05a"


def route_of(conf: Path, text: str, drop_ins: Path = NONE) -> Route:
    return load_registries_conf(conf, drop_ins=drop_ins).route(parse_reference(text), text)


def asked(route: Route) -> list[str]:
    return [f"{endpoint.host}/{endpoint.repository}" for endpoint in route.endpoints]


def written(tmp_path: Path, text: str) -> Path:
    conf = tmp_path / "registries.conf"
    conf.write_text(text)
    return conf


# (registry, the locations asked for a digest, for a tag): TestPullSourcesMirrorFromReference;
# "m1" is mirror-1.registry-X.com, "bar" registry-X.com/bar
MIRRORS = [
    ("a", ["m1", "m2", "bar"], ["m1", "m2", "bar"]),  # any pull
    ("b", ["m1", "m2", "bar"], ["bar"]),  # mirrors digest-only
    ("c", ["m1", "m2", "bar"], ["m1", "bar"]),  # one digest-only mirror, one any
    ("d", ["m1", "m2", "bar"], ["bar"]),  # mirror-by-digest-only on the registry
    ("e", ["bar"], ["m1", "m2", "bar"]),  # mirrors tag-only
    ("f", ["m1", "bar"], ["m1", "m2", "bar"]),  # one tag-only mirror
    ("g", ["m1", "m3", "m4", "bar"], ["m2", "m3", "m4", "bar"]),  # one of each
]


def _location(name: str, letter: str) -> str:
    if name == "bar":
        return f"registry-{letter}.com/bar/image"
    return f"mirror-{name[1:]}.registry-{letter}.com/image"


@pytest.mark.parametrize(("letter", "by_digest", "by_tag"), MIRRORS)
def test_mirrors_by_digest_and_by_tag(letter: str, by_digest: list[str], by_tag: list[str]) -> None:
    conf = DATA / "pull-sources-mirror-reference.conf"
    digest_route = route_of(conf, f"registry-{letter}.com/foo/image{DIGEST}")
    tag_route = route_of(conf, f"registry-{letter}.com/foo/image:aaa")
    assert asked(digest_route) == [_location(name, letter) for name in by_digest]
    assert asked(tag_route) == [_location(name, letter) for name in by_tag]
    assert digest_route.verdict is tag_route.verdict is Verdict.LAST_HOST
    assert [e.mirror for e in tag_route.endpoints] == [True] * (len(by_tag) - 1) + [False]
    # the checker's own filter agrees with the route
    assert all(e.serves(parse_reference(f"x.example/y{DIGEST}")) for e in digest_route.endpoints)
    assert all(e.serves(parse_reference("x.example/y:aaa")) for e in tag_route.endpoints)


def test_pull_sources_rewrite_and_insecure() -> None:
    """TestPullSourcesFromReference."""
    conf = DATA / "pull-sources-from-reference.conf"
    route = route_of(conf, "registry-a.com/foo/image" + DIGEST)
    assert asked(route) == [
        "mirror-1.registry-a.com/image",
        "mirror-2.registry-a.com/image",
        "registry-a.com/bar/image",
    ]
    first, second, primary = route.endpoints
    # insecure: plain HTTP allowed (scheme left to the probe); otherwise HTTPS only
    assert (first.scheme, first.insecure) == ("https", False)
    assert (second.scheme, second.insecure) == (None, True)
    assert primary.origin == f"registry-a.com/foo in {conf}"
    assert first.origin == f"mirror of registry-a.com/foo in {conf}"
    assert asked(route_of(conf, "registry-b.com/foo/image:aaa")) == ["registry-b.com/bar/image"]


# (reference, prefix, location, the name asked): TestRewriteReferenceSuccess
REWRITE = [
    ("example.com/image:latest", "example.com", "example.com", "example.com/image"),
    ("example.com:5000/image", "example.com:5000", "example.com:5000", "example.com:5000/image"),
    ("example.com/foo" + DIGEST, "example.com", "example.com", "example.com/foo"),
    ("example.com/foo/image", "example.com/foo", "example.com", "example.com/image"),
    ("example.com/foo/image", "example.com/foo", "example.com/path", "example.com/path/image"),
    ("docker.io/library/image", "docker.io", "docker.io", "registry-1.docker.io/library/image"),
    ("docker.io/library/image", "docker.io/library", "example.com", "example.com/image"),
    ("docker.io/library/image", "docker.io", "example.com", "example.com/library/image"),
    ("docker.io/namespace/image", "*.io", "example.com", "example.com/namespace/image"),
    (
        "sub.example.io/library/p/image",
        "*.example.io",
        "example.com",
        "example.com/library/p/image",
    ),
    ("another.sub.example.io:5000/l/image", "*.sub.example.io", "e.com", "e.com:5000/l/image"),
    ("foo.bar.io/ns1/ns2", "*.bar.io", "omg.bbq.com/roflmao", "omg.bbq.com/roflmao/ns1/ns2"),
    (
        "abc.internal.registry.com/foo:bar",
        "*.internal.registry.com",
        "",
        "abc.internal.registry.com/foo",
    ),
    ("alien.foobar.io:5000/foo" + DIGEST, "*.foobar.io", "", "alien.foobar.io:5000/foo"),
]


@pytest.mark.parametrize(("ref", "prefix", "location", "name"), REWRITE)
def test_prefix_rewritten_to_location(
    tmp_path: Path, ref: str, prefix: str, location: str, name: str
) -> None:
    conf = written(tmp_path, f'[[registry]]\nprefix = "{prefix}"\nlocation = "{location}"\n')
    route = route_of(conf, ref)
    assert (asked(route), route.blocked) == ([name], None)


# (reference, prefix, location): TestRewriteReferenceFailedDuringParseNamed, where the prefix
# is chosen; containers/image fails the pull before asking anyone
UNREWRITABLE = [
    ("example.com/foo" + DIGEST, "example.com/foo", "example.com"),
    ("example.com:5000/image:latest", "example.com", "example.com:5000"),  # the port quirk
    ("example.com/foo/image:latest", "example.com/foo", "index.docker.io"),  # not canonical
]


@pytest.mark.parametrize(("ref", "prefix", "location"), UNREWRITABLE)
def test_a_name_that_cannot_be_rewritten_is_refused(
    tmp_path: Path, ref: str, prefix: str, location: str
) -> None:
    conf = written(tmp_path, f'[[registry]]\nprefix = "{prefix}"\nlocation = "{location}"\n')
    with pytest.raises(InvalidReferenceError, match="rewriting it to"):
        route_of(conf, ref)


def test_a_mirror_location_keeps_its_slash_and_fails_the_pull(tmp_path: Path) -> None:
    """containers/image trims a mirror's location only to check it, not where it is used."""
    conf = written(
        tmp_path,
        '[[registry]]\nlocation = "a.example"\n[[registry.mirror]]\nlocation = "m.example/"\n',
    )
    with pytest.raises(InvalidReferenceError, match=r"m\.example//x:1"):
        route_of(conf, "a.example/x:1")


PREFIXES = (
    "example.com",
    "example.com/library",
    "example.com/foo:bar",
    "*.example.com",
    "*.sub.example.com",
    "**.another.example.com",
)


@pytest.mark.parametrize(
    ("name", "prefix"),
    [
        ("example.com:5000/foo", "example.com"),  # containers/image's known quirk
        ("example.com/library/busybox", "example.com/library"),
        ("example.com/libraryy/busybox", "example.com"),
        ("example.com/foo", "example.com"),  # a prefix with a tag never matches a name
        ("example.net/namespace-ends-in.example.com/foo", None),
        ("sub.example.com/foo/bar", "*.example.com"),
        ("another.sub.example.com/foo/bar", "*.sub.example.com"),
        ("yet.another.example.com/foo", "*.example.com"),  # "**." matches nothing
    ],
)
def test_prefix_matching(tmp_path: Path, name: str, prefix: str | None) -> None:
    """TestRefMatchingPrefix and TestRefMatchingSubdomainPrefix, through the table chosen."""
    conf = written(
        tmp_path,
        "".join(f'[[registry]]\nprefix = "{p}"\nlocation = "x.example"\n' for p in PREFIXES),
    )
    found = load_registries_conf(conf, drop_ins=NONE).find(name)
    assert (found.prefix if found else None) == prefix


# --- blocked ---------------------------------------------------------------------------------


def test_a_blocked_registry_is_refused_naming_the_file() -> None:
    conf = DATA / "base-for-registries.d.conf"
    route = route_of(conf, "base.com/test:latest", DATA / "registries.conf.d")
    assert route.endpoints == ()
    assert (
        route.blocked
        == f"registry base.com is blocked in {DATA / 'registries.conf.d'}/config-2.conf"
    )


def test_mirrors_of_a_blocked_registry_are_asked_first(tmp_path: Path) -> None:
    """containers/image looks up ``blocked`` for each source's own name: a mirror of a
    blocked registry is asked, the blocked primary is the refusal when none has the image;
    a mirror that is itself blocked is never asked."""
    conf = written(
        tmp_path,
        '[[registry]]\nlocation = "a.example"\nblocked = true\n'
        '[[registry.mirror]]\nlocation = "m.example"\n'
        '[[registry.mirror]]\nlocation = "b.example/ns"\n'
        '[[registry]]\nlocation = "b.example"\nblocked = true\n',
    )
    route = route_of(conf, "a.example/x:1")
    assert asked(route) == ["m.example/x"]
    assert route.blocked == f"registry a.example is blocked in {conf}"


def test_no_table_is_the_reference_itself_over_https(tmp_path: Path) -> None:
    route = route_of(written(tmp_path, ""), "docker.io/library/busybox:1")
    assert route.endpoints == (Endpoint("registry-1.docker.io", "library/busybox", scheme="https"),)
    assert route.blocked is None


# --- short names ---------------------------------------------------------------------------


def candidates(conf: Path, text: str, drop_ins: Path = NONE) -> list[str]:
    router = load_registries_conf(conf, drop_ins=drop_ins)
    return [str(ref) for ref in router.candidates(parse_reference(text), text)]


# TestResolve (aliases.conf: enforcing, no search registries)
RESOLVE = [
    ("docker", "docker.io/library/foo:latest"),
    ("docker:tag", "docker.io/library/foo:tag"),
    ("docker" + SHORT_DIGEST, "docker.io/library/foo" + SHORT_DIGEST),
    ("quay/foo", "quay.io/library/foo:latest"),
    ("quay/foo:tag", "quay.io/library/foo:tag"),
    ("quay/foo" + SHORT_DIGEST, "quay.io/library/foo" + SHORT_DIGEST),
    ("example", "example.com/library/foo:latest"),
    ("example:tag", "example.com/library/foo:tag"),
    ("registry.com/repo/image", "registry.com/repo/image:latest"),
    ("registry.com/repo/image" + SHORT_DIGEST, "registry.com/repo/image" + SHORT_DIGEST),
]


@pytest.mark.parametrize(("text", "resolved"), RESOLVE)
def test_short_name_aliases(text: str, resolved: str) -> None:
    assert candidates(SHORT / "aliases.conf", text) == [resolved]


def test_a_short_name_without_alias_or_search_registries_is_invalid() -> None:
    with pytest.raises(InvalidReferenceError) as caught:
        route_of(SHORT / "aliases.conf", "doesnotexist")
    assert "did not resolve to an alias and no unqualified-search registries" in str(caught.value)
    assert str(SHORT / "aliases.conf") in str(caught.value)


# TestResolveWithDropInConfigs (without the aliases podman records after a pull)
DROP_IN_RESOLVE = [
    ("docker", "docker.io/library/config1:latest"),
    ("docker:tag", "docker.io/library/config1:tag"),
    ("quay/foo", "quay.io/library/foo:latest"),
    ("config1" + SHORT_DIGEST, "config1.com/image" + SHORT_DIGEST),
    ("barz:tag", "barz.com/config2:tag"),
    ("doesnotexist", "example-overwrite.com/doesnotexist:latest"),
    ("example", "example-overwrite.com/example:latest"),  # the alias is erased by a drop-in
    ("localhost/repo/fedora:sometag", "localhost/repo/fedora:sometag"),
]


@pytest.mark.parametrize(("text", "resolved"), DROP_IN_RESOLVE)
def test_short_names_with_drop_ins(text: str, resolved: str) -> None:
    conf = SHORT / "aliases.conf"
    assert candidates(conf, text, SHORT / "registries.conf.d") == [resolved]


# TestResolveWithVaryingShortNameModes: (file, mode, name, refused, candidates)
MODES = [
    ("no-reg.conf", "permissive", "repo/image", False, 1),
    ("two-reg.conf", "permissive", "repo/image", False, 1),
    ("no-reg.conf", "permissive", "doesnotexist", True, 0),
    ("one-reg.conf", "permissive", "doesnotexist", False, 1),
    ("two-reg.conf", "permissive", "doesnotexist", False, 2),
    ("two-reg.conf", "disabled", "doesnotexist", False, 2),
    ("one-reg.conf", "enforcing", "doesnotexist", False, 1),
    ("two-reg.conf", "enforcing", "doesnotexist", True, 0),  # no terminal to prompt on
    ("two-reg.conf", "enforcing", "repo/image", False, 1),
]


@pytest.mark.parametrize(("name", "mode", "text", "refused", "count"), MODES)
def test_short_name_modes_without_a_terminal(
    tmp_path: Path, name: str, mode: str, text: str, refused: bool, count: int
) -> None:
    conf = written(tmp_path, f'short-name-mode = "{mode}"\n' + (SHORT / name).read_text())
    if refused:
        with pytest.raises(InvalidReferenceError, match="short-name"):
            route_of(conf, text)
    else:
        route = route_of(conf, text)
        assert (route.blocked, len(route.endpoints)) == (None, count)


def test_docker_hub_search_adds_library(tmp_path: Path) -> None:
    conf = written(
        tmp_path,
        'unqualified-search-registries = ["quay.io", "docker.io"]\n'
        '[[registry]]\nprefix = "docker.io/library"\nlocation = "hub-mirror.example/library"\n',
    )
    route = route_of(conf, "busybox:1.36")
    assert asked(route) == ["quay.io/busybox", "hub-mirror.example/library/busybox"]
    assert route.blocked is None
