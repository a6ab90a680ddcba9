"""Tests for the images a Dockerfile's build pulls besides its ``FROM``s: ``COPY --from`` and
``RUN --mount=from=`` (issue #13).

Each row gives a Dockerfile and every (line, image, stage, skipped) expected from it, in order,
and every problem. The rules are BuildKit's (moby/buildkit, frontend/dockerfile); the last
test asks buildah, a builder nobody here wrote, whether a ``--from`` names a stage or an image.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from imagecheck.scanning import scan_text
from tests.support.dockerfilescan import assert_dockerfile
from tests.support.tools import system_tool

NO_ARG = "BuildKit substitutes no ARG in COPY --from"
NO_MOUNT_ARG = "BuildKit substitutes no ARG in RUN --mount from"

# (id, Dockerfile text, [(line, image, stage name, skipped)], [(line, message)])
CASES: list[
    tuple[str, str, list[tuple[int, str, str | None, str | None]], list[tuple[int, str]]]
] = [
    ("copy-from-image", "FROM alpine AS app\nCOPY --from=nginx:1.27 /etc/nginx /n\n",
     [(1, "alpine", "app", None), (2, "nginx:1.27", "app", None)], []),
    ("copy-from-in-unnamed-stage", "FROM alpine\nCOPY --chown=1 --from=busybox:1.36 /b /b\n",
     [(1, "alpine", None, None), (2, "busybox:1.36", None, None)], []),
    ("earlier-stage", "FROM alpine AS build\nFROM alpine\nCOPY --from=build /a /a\n",
     [(1, "alpine", "build", None), (2, "alpine", None, None)], []),
    ("stage-name-any-case", "FROM alpine AS Build\nFROM alpine\nCOPY --from=BUILD /a /a\n",
     [(1, "alpine", "Build", None), (2, "alpine", None, None)], []),
    # BuildKit looks --from up among every stage of the file (then fails: it must come first);
    # a FROM sees only the stages before it.
    ("later-stage", "FROM alpine\nCOPY --from=late /a /a\nRUN --mount=from=late true\n"
                    "FROM late\nFROM busybox AS late\n",
     [(1, "alpine", None, None), (4, "late", None, None), (5, "busybox", "late", None)], []),
    ("own-stage", "FROM alpine AS a\nCOPY --from=a /x /x\n", [(1, "alpine", "a", None)], []),
    ("stage-index", "FROM alpine\nFROM alpine\nCOPY --from=0 /a /a\nCOPY --from=+1 /b /b\n"
                    "COPY --from=7 /c /c\n",
     [(1, "alpine", None, None), (2, "alpine", None, None)], []),
    # Past Go's int, Atoi fails and BuildKit looks the text up as a name: an image.
    ("number-too-large-for-an-index", "FROM a\nCOPY --from=99999999999999999999 / /\n",
     [(1, "a", None, None), (2, "99999999999999999999", None, None)], []),
    ("scratch-and-empty", "FROM a\nCOPY --from=scratch / /\nCOPY --from= / /\n"
                          "RUN --mount=from=scratch,target=/s true\n", [(1, "a", None, None)], []),
    ("continuation-line-of-the-flag",
     "FROM a\nCOPY \\\n  --link \\\n  # a comment\n  --from=golang:1.22 \\\n  /go /go\n",
     [(1, "a", None, None), (5, "golang:1.22", None, None)], []),
    # Quotes inside a flag word are removed; a word that starts with one is no flag.
    ("quoted-flag", "FROM a\nCOPY --from=\"b:1\" /x /x\nCOPY --fr'om'=c:2 /y /y\n"
                    "COPY \"--from=d\" /z /z\n",
     [(1, "a", None, None), (2, "b:1", None, None), (3, "c:2", None, None)], []),
    ("flags-end-at-the-first-other-word", "FROM a\nCOPY /x --from=b /y\nCOPY -- --from=c /z\n",
     [(1, "a", None, None)], []),
    ("flag-name-is-exact", "FROM a\nCOPY --FROM=b /x /x\nCOPY --from b /y /y\n"
                           "RUN --mount-x=from=c true\n", [(1, "a", None, None)], []),
    ("add-has-no-from", "FROM a\nADD --from=b /x /x\n", [(1, "a", None, None)], []),
    ("onbuild-runs-in-another-build", "FROM a\nONBUILD COPY --from=b /x /x\n",
     [(1, "a", None, None)], []),
    ("before-any-from", "COPY --from=b /x /x\nFROM a\n", [(2, "a", None, None)], []),
    ("mount-bind-default-type", "FROM a AS s\nRUN --mount=from=b:1,target=/b true\n",
     [(1, "a", "s", None), (2, "b:1", "s", None)], []),
    ("mount-options-any-order-and-types",
     "FROM a\nRUN --mount=target=/c,FROM=c:1,type=cache \\\n"
     "    --mount=type=bind,source=/,from=d:1,target=/d,rw make\n"
     "RUN --network=none --mount=type=tmpfs,target=/t,from=e:1 true\n",
     [(1, "a", None, None), (2, "c:1", None, None), (3, "d:1", None, None),
      (4, "e:1", None, None)], []),
    ("mount-csv-quotes",
     "FROM a\nRUN --mount='type=bind,\"from=registry.example:5000/b,c\",target=/b' \\\n"
     "    --mount='\"from=\"\"d\"\"\",target=/d' --mount=\"from=\"\"e\"\"\" true\n",
     [(1, "a", None, None), (2, "registry.example:5000/b,c", None, None),
      (3, '"d"', None, None), (3, "e", None, None)], []),
    ("mount-last-from-wins", "FROM a\nRUN --mount=from=b,from=c,target=/x true\n",
     [(1, "a", None, None), (2, "c", None, None)], []),
    ("mount-from-stage", "FROM a AS b\nRUN --mount=from=B,target=/b true\n",
     [(1, "a", "b", None)], []),
    # RUN --mount has no stage index: BuildKit looks "0" up as a name, then pulls image "0".
    ("mount-number-is-an-image", "FROM a\nRUN --mount=from=0,target=/x true\n",
     [(1, "a", None, None), (2, "0", None, None)], []),
    ("mount-without-from", "FROM a\nRUN --mount=type=cache,target=/c --mount=type=secret,id=s \\\n"
                           "  --mount true\n", [(1, "a", None, None)], []),
    ("mount-invalid-csv", "FROM a\nRUN --mount='from=b\"c' true\nRUN --mount='\"from=b' true\n"
                          "RUN --mount='\"from=b\"x' true\nRUN --mount= true\n",
     [(1, "a", None, None)], [(2, 'RUN --mount: invalid CSV: bare " in non-quoted-field'),
                              (3, 'RUN --mount: invalid CSV: extraneous or missing " in '
                                  "quoted-field"),
                              (4, 'RUN --mount: invalid CSV: extraneous or missing " in '
                                  "quoted-field"),
                              (5, "RUN --mount: invalid CSV: EOF")]),
    # BuildKit expands no ARG in --from, global, re-declared in the stage, or the stage's own.
    ("arg-in-from-is-skipped",
     "ARG IMG=alpine\nFROM $IMG\nARG IMG\nARG TAG=1\nCOPY --from=${IMG}:$TAG /a /a\n"
     "RUN --mount=from=$IMG,target=/i true\n",
     [(2, "alpine", None, None), (5, "${IMG}:$TAG", None, f"template placeholder ${{IMG}}: "
                                                          f"{NO_ARG}"),
      (6, "$IMG", None, f"template placeholder $IMG: {NO_MOUNT_ARG}")], []),
    ("escaped-dollar-is-no-arg", "FROM a\nCOPY --from=b\\$c / /\n",
     [(1, "a", None, None), (2, "b$c", None, f"template placeholder $c: {NO_ARG}")], []),
    ("template-file", "FROM a\nCOPY --from={{ .Builder }} / /\n",
     [(1, "a", None, None), (2, "{{", None, "template placeholder {{")], []),
    ("heredoc-body-is-no-instruction",
     "FROM a\nRUN <<EOF\nCOPY --from=x / /\nRUN --mount=from=y true\nEOF\n"
     "COPY <<-EOT /f\n\tCOPY --from=z / /\n\tEOT\nCOPY --from=w / /\n",
     [(1, "a", None, None), (9, "w", None, None)], []),
    ("backtick-escape", "# escape=`\nFROM a\nCOPY `\n  --from=b:1 C:\\x C:\\y\n",
     [(2, "a", None, None), (4, "b:1", None, None)], []),
    ("over-the-limit", f"FROM a\nCOPY --from={'x' * 5000} / /\n"
                       f"RUN --mount=from={'y' * 5000} true\n",
     [(1, "a", None, None)], [(2, "COPY --from: longer than 4096 characters"),
                              (3, "RUN --mount from: longer than 4096 characters")]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "expected", "expected_problems"),
    [row[1:] for row in CASES],
    ids=[row[0] for row in CASES],
)
def test_sources(
    text: str,
    expected: list[tuple[int, str, str | None, str | None]],
    expected_problems: list[tuple[int, str]],
) -> None:
    assert_dockerfile(text, expected, expected_problems)


@pytest.mark.timeout(60)
def test_many_flags_take_linear_time() -> None:
    """100,000 --mount flags on one continued RUN, and as many stages: no quadratic step.

    Not a timing (~3 s): each flag's line once looked up through a list of all the RUN's lines
    (over 120 s)."""
    flags = " \\\n".join(f"  --mount=from=s{i},target=/m{i}" for i in range(100_000))
    stages = "".join(f"FROM a AS s{i}\n" for i in range(100_000))
    occurrences, problems = scan_text(f"FROM a\nRUN {flags} true\n{stages}", "Dockerfile")
    assert (len(occurrences), problems) == (100_001, [])


# --- a peer: buildah ---------------------------------------------------------------------

BUILD_STAGE = "FROM scratch AS build\nCOPY a /a\n"


@pytest.mark.parametrize(
    ("text", "is_stage"),
    [
        (f"{BUILD_STAGE}FROM scratch\nCOPY --from=build /a /b\n", True),
        (f"FROM scratch\nCOPY --from=build /a /b\n{BUILD_STAGE}", True),
        (f"{BUILD_STAGE}FROM scratch\nCOPY --from=0 /a /b\n", True),
        (f"{BUILD_STAGE}FROM scratch\nCOPY --from=imagecheck.invalid/b:1 /a /b\n", False),
    ],
    ids=["earlier-stage", "later-stage", "stage-index", "image"],
)
def test_buildah_agrees_on_stage_or_image(text: str, is_stage: bool, tmp_path: Path) -> None:
    """buildah builds with --pull=never (no network) exactly when the scan finds no image:
    every --from is a stage. Stages from scratch need no image at all."""
    buildah = system_tool("buildah")  # installed by scripts/system-deps.sh when missing
    occurrences, problems = scan_text(text, "Dockerfile")
    assert problems == []
    assert (occurrences == []) is is_stage
    (tmp_path / "a").write_text("a\n")
    (tmp_path / "Dockerfile").write_text(text)
    storage = tmp_path / "storage"
    built = subprocess.run(
        [buildah, "--root", str(storage / "root"), "--runroot", str(storage / "run"),
         "--storage-driver", "vfs", "build", "--pull=never", "--isolation", "chroot",
         "-q", "-f", str(tmp_path / "Dockerfile"), str(tmp_path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (built.returncode == 0) is is_stage, built.stderr
    if not is_stage:
        assert "no stage or image found with that name" in built.stderr
