"""Reading ``registries.conf``: containers/image v5.23's own test files
(``pkg/sysregistriesv2/testdata``, in ``tests/fixtures/registries-conf``) give what its Go
tests assert (``system_registries_v2_test.go``); bad and hostile files are one-line errors
naming the file and the line.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from imagecheck.errors import ConfigFileError, UsageError
from imagecheck.routes import load_registries_conf

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "registries-conf"
DATA = FIXTURES / "sysregistriesv2"
NO_DROP_INS = DATA / "this-does-not-exist"


def load(name: str, drop_ins: str = "this-does-not-exist"):  # type: ignore[no-untyped-def]
    return load_registries_conf(DATA / name, drop_ins=DATA / drop_ins)


def locations(router) -> list[str]:  # type: ignore[no-untyped-def]
    return [registry.location for registry in router.conf.registries]


@pytest.mark.parametrize(
    ("name", "count"),
    [
        ("empty.conf", 0),
        ("mirrors.conf", 2),
        ("unqualified-search.conf", 4),
        ("unmarshal.conf", 4),
        ("v1-compatibility.conf", 4),
        ("pull-sources-from-reference.conf", 2),
        ("pull-sources-mirror-reference.conf", 7),
        ("try-update-cache-valid.conf", 1),
    ],
)
def test_the_number_of_registries_containers_image_finds(name: str, count: int) -> None:
    assert len(load(name).conf.registries) == count


def test_mirrors_keep_their_order_and_insecure() -> None:
    registry = load("mirrors.conf").find("registry.com/image:tag")
    assert registry is not None
    assert [(m.location, m.insecure) for m in registry.mirrors] == [
        ("mirror-1.registry.com", False),
        ("mirror-2.registry.com", True),
    ]


def test_registries_are_sorted_by_prefix() -> None:
    assert locations(load("invalidate-cache.conf")) == [
        "blocked.registry.com",
        "insecure.registry.com",
        "registry.com",
        "untrusted.registry.com",
    ]


def test_v1_is_converted() -> None:
    router = load("v1-compatibility.conf")
    assert router.conf.search == ("registry-a.com", "registry-c.com", "registry-d.com")
    registry = router.find("registry-b.com/bar/foo/barfoo:latest")
    assert registry is not None
    assert (registry.insecure, registry.blocked) == (True, True)


# (reference, the table's prefix, its location); None: no table
FIND = [
    ("simple-prefix.com/foo/bar:latest", "simple-prefix.com", "registry.com:5000"),
    ("simple-prefix.com/", "simple-prefix.com", "registry.com:5000"),
    ("simple-prefix.com", "simple-prefix.com", "registry.com:5000"),
    ("not.so.simple-prefix.com/", "*.so.simple-prefix.com", "subdomain-prefix.com"),
    ("not.quite.simple-prefix.com/", "*.simple-prefix.com", "subdomain-prefix-2.com"),
    (
        "not.quite.simple-prefix.com:5000/with/path/and/beyond:tag",
        "*.simple-prefix.com",
        "subdomain-prefix-2.com",
    ),
    (
        "really.not.quite.simple-prefix.com:5000/with/path/and/beyond:tag",
        "*.not.quite.simple-prefix.com",
        "subdomain-prefix-1-overridden-by-dropin-location.com",
    ),
    ("foo.docker.io:5000/omg/wtf/bbq:foo", "*.docker.io", "subdomain-prefix-2.com"),
    (
        "foo.bar.example.com:6000/omg/wtf/bbq@sha256:" + "a" * 64,
        "*.bar.example.com",
        "subdomain-prefix-3-overridden-by-dropin-location.com",
    ),
    ("foo.bar.docker.io:5000/omg/wtf/bbq:foo", "*.bar.docker.io", "subdomain-prefix-4.com"),
    (
        "foo.bar.example.com:5000/omg/wtf/bbq:foo",
        "foo.bar.example.com:5000",
        "subdomain-prefix-5.com",
    ),
    ("simple-prefix.comx", None, None),
    (
        "complex-prefix.com:4000/with/path/and/beyond:tag",
        "complex-prefix.com:4000/with/path",
        "another-registry.com:5000",
    ),
    ("no-prefix.com/foo:tag", "no-prefix.com", "no-prefix.com"),
    ("empty-prefix.com/foo:tag", "empty-prefix.com", "empty-prefix.com"),
]


@pytest.mark.parametrize(("ref", "prefix", "location"), FIND, ids=[case[0] for case in FIND])
def test_the_longest_prefix_chooses_the_table(
    ref: str, prefix: str | None, location: str | None
) -> None:
    router = load("find-registry.conf", "registries.conf.d")
    assert len(router.conf.registries) == 19
    found = router.find(ref)
    assert (found and found.prefix, found and found.location) == (prefix, location)


def test_drop_ins_replace_tables_search_and_aliases() -> None:
    router = load("base-for-registries.d.conf", "registries.conf.d")
    assert router.conf.search == ("example-overwrite.com",)
    assert router.conf.search_origin == str(DATA / "registries.conf.d" / "config-1.conf")
    assert locations(router) == [
        "subdomain-prefix-3-overridden-by-dropin-location.com",
        "subdomain-prefix-2-overridden-by-dropin-location.com",
        "subdomain-prefix-1-overridden-by-dropin-location.com",
        "1.com",
        "2.com",
        "base.com",
    ]
    base = router.find("base.com/test:latest")
    assert base is not None and base.blocked


@pytest.mark.parametrize(
    ("drop_ins", "search"),
    [
        ("registries.conf.d-usr1", ("registry-a.com", "registry-c.com", "registry-d.com")),
        ("registries.conf.d-usr2", ()),  # an empty array in a drop-in empties the list
    ],
)
def test_search_registries_merge(drop_ins: str, search: tuple[str, ...]) -> None:
    assert load("unqualified-search.conf", drop_ins).conf.search == search


@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("aliases.conf", "enforcing"),
        ("registries.conf.d/config-2.conf", "permissive"),
        ("registries.conf.d/config-3.conf", "permissive"),  # unset: permissive
    ],
)
def test_short_name_mode(name: str, mode: str) -> None:
    assert load(name).conf.mode == mode


def test_the_drop_in_directory_is_the_file_name_with_d(tmp_path: Path) -> None:
    conf = tmp_path / "registries.conf"
    conf.write_text('unqualified-search-registries = ["a.example"]\n')
    (tmp_path / "registries.conf.d").mkdir()
    (tmp_path / "registries.conf.d" / "10-b.conf").write_text(
        'unqualified-search-registries = ["b.example"]\n'
    )
    (tmp_path / "registries.conf.d" / "20-c.txt").write_text("not read")
    assert load_registries_conf(conf).conf.search == ("b.example",)


# (file, what the error says); the message starts with the file's path
INVALID = [
    ("insecure-conflicts.conf", "registry 'registry.com' is defined multiple times "),
    ("blocked-conflicts.conf", "with conflicting 'blocked' setting"),
    ("missing-mirror-location.conf", "invalid condition: mirror location is unset"),
    ("invalid-prefix.conf", "invalid location 'http://schema-is-invalid.com'"),
    ("this-does-not-exist.conf", "does not exist"),
    ("invalid-search.conf", "Invalid unqualified-search-registries entry"),
    ("invalid-short-name-mode.conf", "invalid short-name mode"),
    ("v1-invalid-block.conf", "URI schemes are not supported"),
    ("v1-invalid-insecure.conf", "URI schemes are not supported"),
    ("v1-invalid-search.conf", "URI schemes are not supported"),
    ("mixing-v1-v2.conf", "mixing sysregistry v1/v2 is not supported"),
    (
        "invalid-config-level-mirror.conf",
        "pull-from-mirror must not be set for a non-mirror registry 'registry-a.com/foo'",
    ),
    (
        "invalid-conflict-mirror.conf",
        "cannot set mirror usage mirror-by-digest-only for the registry ('registry-a.com/foo') "
        "and pull-from-mirror for per-mirror ('mirror-1.registry-a.com') at the same time",
    ),
    (
        "invalid-value-mirror.conf",
        "unsupported pull-from-mirror value 'notvalid' for mirror 'mirror-1.registry-a.com'",
    ),
    ("try-update-cache-invalid.conf", "not valid TOML"),
    ("invalid-aliases.conf", "validating short-name aliases"),
]


@pytest.mark.parametrize(("name", "reason"), INVALID, ids=[case[0] for case in INVALID])
def test_what_containers_image_refuses_is_a_one_line_error(name: str, reason: str) -> None:
    with pytest.raises(ConfigFileError) as caught:
        load(name)
    message = str(caught.value)
    assert isinstance(caught.value, UsageError)
    assert message.startswith(str(DATA / name))
    assert reason in message
    assert "\n" not in message


# (file content, what the error says, the line it names)
BAD = [
    ('[[registry]]\nlocation = "a.example"\ninsecure = "yes"\n', "insecure must be true", 3),
    (
        '[[registry]]\nlocation = "a"\n[[registry.mirror]]\nlocation = "b"\ninsecure = 1\n',
        "mirror.insecure must be true",
        5,
    ),
    ('[[registry]]\nlocation = "a.example"\n\n[[registry]]\nprefix = "b.example"\n', "unset", 4),
    ('x = 1\n[[registry]]\nlocation = "a.example"\nlocation = "b"\n', "not valid TOML", 4),
    ("registry = 3\n", "registry must be an array of tables", None),
    ('[[registry]]\nprefix = "*.example.com/ns"\n', "Wildcarded prefix", None),
    ('[aliases]\n"quay.io/x" = "quay.io/x"\n', "must not contain registry", 2),
    ('[aliases]\nx = "quay.io/x:1"\n', "must not contain tag", 2),
    ('[aliases]\nx = "x"\n', "must contain registry and repository", 2),
    (
        '[[registry]]\nlocation = "a.example"\n[[registry.mirror]]\n'
        '[[registry.mirror]]\nlocation = "b"\n',
        "mirror location is unset",
        3,
    ),
    ("unqualified-search-registries = 'docker.io'\n", "must be an array of strings", None),
    (b"\xff\xfe", "not UTF-8", None),
]


@pytest.mark.parametrize(("text", "reason", "line"), BAD, ids=[case[1] for case in BAD])
def test_a_bad_file_names_the_line(
    tmp_path: Path, text: str | bytes, reason: str, line: int | None
) -> None:
    conf = tmp_path / "registries.conf"
    if isinstance(text, bytes):
        conf.write_bytes(text)
    else:
        conf.write_text(text)
    with pytest.raises(ConfigFileError) as caught:
        load_registries_conf(conf)
    assert reason in caught.value.reason
    assert caught.value.line == line
    assert str(caught.value).startswith(f"{conf}:{line}: " if line else f"{conf}: ")


def test_a_v1_drop_in_is_refused_by_name(tmp_path: Path) -> None:
    conf = tmp_path / "registries.conf"
    conf.write_text("")
    (tmp_path / "registries.conf.d").mkdir()
    drop_in = tmp_path / "registries.conf.d" / "v1.conf"
    drop_in.write_text('[registries.search]\nregistries = ["a.example"]\n')
    with pytest.raises(ConfigFileError, match="must be in v2 format but is in v1") as caught:
        load_registries_conf(conf)
    assert caught.value.path == drop_in


def test_hostile_files_are_bounded(tmp_path: Path) -> None:
    big = tmp_path / "big.conf"
    big.write_text("# " + "x" * 300_000 + "\n")
    with pytest.raises(ConfigFileError, match="larger than 256 KiB"):
        load_registries_conf(big)
    many = tmp_path / "many.conf"
    many.write_text('[[registry]]\nlocation = "a.example"\n' * 1001)
    with pytest.raises(ConfigFileError, match="more than 1000"):
        load_registries_conf(many)
    fifo = tmp_path / "fifo.conf"
    os.mkfifo(fifo)
    with pytest.raises(ConfigFileError, match="not a regular file"):
        load_registries_conf(fifo)
    with pytest.raises(ConfigFileError, match=r"not a regular file|directory"):
        load_registries_conf(tmp_path)
