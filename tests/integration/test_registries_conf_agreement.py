"""``--registries-conf``: imagecheck asks the hosts a CRI-O node would ask, and gives the
verdict skopeo gives with the same file (skopeo 1.9 reads it through containers/image, as
CRI-O and podman do). Real Distribution registries: a mirror that has or lacks the image,
mirrors for digests only or tags only, blocked registries, a prefix rewritten to another
registry and repository, a plain-HTTP mirror with and without ``insecure``, an alias, a
wildcard prefix.

skopeo does not resolve short names (``docker://busybox`` is Docker Hub's); for the alias
the judge is given the name the alias stands for.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.clirun import run_cli
from tests.support.regconf import Bench, bench, skopeo_verdict
from tests.support.tools import system_tool

EXIT_VERDICTS = {0: "found", 1: "missing", 2: "invalid", 3: "denied", 4: "error"}


@dataclass(frozen=True)
class Case:
    id: str
    conf: str  # {U} {M} {O} {P}: the registries' HOST:PORT; {D} the mirror-only digest
    reference: str
    verdict: str
    answered_by: str | None = None  # "U", "M", "O" or "P"
    judge_reference: str | None = None  # what skopeo is given, when it differs


MIRROR = '[[registry]]\nlocation = "{U}"\n[[registry.mirror]]\nlocation = "{M}"\n'

CASES = [
    Case("mirror-has", MIRROR, "{U}/team/app:1", "found", "M"),
    Case("mirror-lacks", MIRROR, "{U}/team/only-up:1", "found", "U"),
    Case("neither-has", MIRROR, "{U}/team/none:1", "missing"),
    Case("mirror-only", MIRROR, "{U}/team/mirror-only:1", "found", "M"),
    Case(
        "digest-only-mirror-tag",
        MIRROR.replace("[[registry.mirror]]", "mirror-by-digest-only = true\n[[registry.mirror]]"),
        "{U}/team/mirror-only:1",
        "missing",
    ),
    Case(
        "digest-only-mirror-digest",
        MIRROR.replace("[[registry.mirror]]", "mirror-by-digest-only = true\n[[registry.mirror]]"),
        "{U}/team/mirror-only@{D}",
        "found",
        "M",
    ),
    Case(
        "tag-only-mirror-digest",
        MIRROR + 'pull-from-mirror = "tag-only"\n',
        "{U}/team/mirror-only@{D}",
        "missing",
    ),
    Case(
        "tag-only-mirror-tag",
        MIRROR + 'pull-from-mirror = "tag-only"\n',
        "{U}/team/mirror-only:1",
        "found",
        "M",
    ),
    Case("blocked", '[[registry]]\nlocation = "{U}"\nblocked = true\n', "{U}/team/app:1", "denied"),
    Case(
        "blocked-namespace",
        '[[registry]]\nprefix = "{U}/team"\nlocation = "{U}/team"\nblocked = true\n',
        "{U}/team/app:1",
        "denied",
    ),
    Case(
        "blocked-with-mirror",
        MIRROR.replace('"{U}"\n', '"{U}"\nblocked = true\n', 1),
        "{U}/team/mirror-only:1",
        "found",
        "M",
    ),
    Case(
        "blocked-with-mirror-lacking",
        MIRROR.replace('"{U}"\n', '"{U}"\nblocked = true\n', 1),
        "{U}/team/only-up:1",
        "denied",
    ),
    Case(
        # containers/image checks a mirror's location without its trailing slash but uses it
        # with: the rewritten name does not parse, and the pull fails before any request.
        "mirror-location-with-slash",
        MIRROR.replace('"{M}"', '"{M}/"'),
        "{U}/team/app:1",
        "invalid",
    ),
    Case(
        "prefix-rewrite",
        '[[registry]]\nprefix = "{U}/old"\nlocation = "{O}/new"\n',
        "{U}/old/app:1",
        "found",
        "O",
    ),
    Case(
        "insecure-plain-mirror",
        '[[registry]]\nlocation = "{U}"\n[[registry.mirror]]\nlocation = "{P}"\ninsecure = true\n',
        "{U}/team/plain-only:1",
        "found",
        "P",
    ),
    Case(
        "plain-mirror-not-insecure",
        '[[registry]]\nlocation = "{U}"\n[[registry.mirror]]\nlocation = "{P}"\n',
        "{U}/team/plain-only:1",
        "missing",
    ),
    Case(
        "alias",
        '[aliases]\n"icalias/app" = "{U}/team/app"\n',
        "icalias/app:1",
        "found",
        "U",
        judge_reference="{U}/team/app:1",
    ),
    Case(
        "wildcard-prefix",
        '[[registry]]\nprefix = "*.wild.test"\nlocation = "{U}"\n',
        "a.wild.test/team/app:1",
        "found",
        "U",
    ),
]


@dataclass(frozen=True)
class Site:
    bench: Bench
    names: dict[str, str]
    skopeo: str

    def fill(self, template: str) -> str:
        return template.format(**self.names)


@pytest.fixture(scope="module")
def site(registry_binary: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    skopeo = system_tool("skopeo")
    with bench(tmp_path_factory.mktemp("regconf"), registry_binary) as registries:
        registries.push(registries.upstream, "team/app:1")
        registries.push(registries.upstream, "team/only-up:1")
        registries.push(registries.mirror, "team/app:1")
        only = registries.push(registries.mirror, "team/mirror-only:1")
        registries.push(registries.other, "new/app:1")
        registries.push(registries.plain, "team/plain-only:1")
        yield Site(
            registries,
            {
                "U": registries.upstream.host,
                "M": registries.mirror.host,
                "O": registries.other.host,
                "P": registries.plain.host,
                "D": only.digest,
            },
            skopeo,
        )


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_imagecheck_gives_skopeos_verdict(site: Site, case: Case, tmp_path: Path) -> None:
    conf = tmp_path / "registries.conf"
    conf.write_text(site.fill(case.conf))
    judged, said = skopeo_verdict(
        conf,
        site.fill(case.judge_reference or case.reference),
        site.bench.ca_file,
        skopeo=site.skopeo,
    )
    assert judged == case.verdict, f"skopeo: {said}"
    args = ["check", "--platform", "auto", "--deadline", "30", "--output", "json"]
    args += ["--registries-conf", str(conf), "--ca-file", str(site.bench.ca_file)]
    done = run_cli([*args, site.fill(case.reference)], tmp_path / "home")
    output = done.stdout + done.stderr
    assert EXIT_VERDICTS.get(done.code) == judged, output
    if case.answered_by is not None:
        (result,) = done.json()
        host = site.names[case.answered_by]
        assert result["registry"] == host, output
        assert f"answered by https://{host}" in result["message"] or (
            f"answered by {host}" in result["message"]
        ), output
