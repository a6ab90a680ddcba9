"""Ground truth for issue #13: ``scan`` on files copied verbatim from public repositories.

tests/fixtures/corpus/ holds files from public repositories (``<owner>__<repo>/<path>``),
each listed in SOURCES.tsv with its repository, path, commit and license. EXPECTED.tsv is the
table a careful reviewer wrote by reading the files, not a snapshot of what scan answers: one
row per image occurrence, ``file<TAB>line<TAB>image`` for an image to check (as it would be
checked: ``${VAR:-default}`` with its default), or ``file<TAB>line<TAB>skip<TAB>text`` for one
to skip, where ``text`` must appear in the occurrence's skip reason (the placeholder, or
``ko://``). HELM_SKIPPED.tsv lists chart templates: no occurrence from them, and at most a
note that names Helm or the chart. Lines starting with ``#`` are comments.

The comparison is two sets, so a miss (recall) and an extra (false positive) both fail, each
listed by file and line.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from imagecheck.scanning import FileProblem, Occurrence, scan_paths

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "corpus"
TABLES = frozenset({"SOURCES.tsv", "EXPECTED.tsv", "HELM_SKIPPED.tsv"})
SKIP = "skip"
# Licenses that let the files be copied here: permissive code licenses, and CC-BY-4.0 for a
# repository of documentation (kubernetes/website) whose examples are part of its documents.
LICENSES = frozenset({"Apache-2.0", "MIT", "BSD-2-Clause", "BSD-3-Clause", "ISC", "CC-BY-4.0"})

# (file, line, image or "skip", skip text or "")
Row = tuple[str, int, str, str]


def table(name: str) -> Iterator[list[str]]:
    for number, line in enumerate((CORPUS / name).read_text(encoding="utf-8").splitlines(), 1):
        if line and not line.startswith("#"):
            fields = line.split("\t")
            assert all(fields), f"{name}:{number}: empty field in {line!r}"
            yield fields


def expected_rows() -> set[Row]:
    rows: set[Row] = set()
    for fields in table("EXPECTED.tsv"):
        file, line, image, *rest = fields
        assert (image == SKIP) == (len(rest) == 1) and len(rest) <= 1, fields
        rows.add((file, int(line), image, rest[0] if rest else ""))
    return rows


def corpus_files() -> set[str]:
    found: set[str] = set()
    for directory, _, files in os.walk(CORPUS):
        for name in files:
            path = os.path.relpath(os.path.join(directory, name), CORPUS)
            if path not in TABLES:
                found.add(Path(path).as_posix())
    return found


@pytest.fixture(scope="module")
def scanned() -> tuple[list[Occurrence], list[FileProblem]]:
    """One scan of the whole corpus from inside it, so that file names are relative. The
    files under hidden directories (``.github/``, ``.woodpecker/``) and hidden files
    (``.drone.yml``) are named too, so that what is read does not depend on which of them a
    directory walk enters; a file named twice is read once."""
    cwd = os.getcwd()
    os.chdir(CORPUS)
    hidden = sorted(f for f in corpus_files() if any(p.startswith(".") for p in Path(f).parts))
    try:
        return scan_paths([".", *hidden])
    finally:
        os.chdir(cwd)


def relative(file: str) -> str:
    return Path(os.path.normpath(file)).as_posix()


def actual_rows(occurrences: list[Occurrence], expected: set[Row]) -> set[Row]:
    """Scan's answer in the table's terms. A skipped occurrence takes the expected row's text
    when the reason contains it, else its whole reason, so that it shows in the diff."""
    texts = {(file, line): text for file, line, image, text in expected if image == SKIP}
    rows: set[Row] = set()
    for o in occurrences:
        file = relative(o.file)
        if o.skipped is None:
            rows.add((file, o.line, o.image, ""))
            continue
        text = texts.get((file, o.line), "")
        rows.add((file, o.line, SKIP, text if text and text in o.skipped else o.skipped))
    return rows


def render(rows: set[Row]) -> str:
    return "\n".join(
        f"  {file}:{line}  {image}{' ' + text if text else ''}"
        for file, line, image, text in sorted(rows)
    )


def test_every_file_has_a_source_and_every_source_a_file() -> None:
    sources = {fields[0]: fields for fields in table("SOURCES.tsv")}
    files = corpus_files()
    assert sorted(files - sources.keys()) == [], "files without a SOURCES.tsv row"
    assert sorted(sources.keys() - files) == [], "SOURCES.tsv rows without a file"
    for file, repository, path, commit, license_ in sources.values():
        owner, name = repository.split("/")
        assert file == f"{owner}__{name}/{path}", file
        assert len(commit) == 40 and all(c in "0123456789abcdef" for c in commit), file
        assert license_ in LICENSES, file


def test_expected_rows_name_corpus_files() -> None:
    files = corpus_files()
    named = {row[0] for row in expected_rows()} | {f[0] for f in table("HELM_SKIPPED.tsv")}
    assert sorted(named - files) == []


def test_scan_finds_exactly_the_expected_occurrences(
    scanned: tuple[list[Occurrence], list[FileProblem]],
) -> None:
    occurrences, _ = scanned
    expected = expected_rows()
    actual = actual_rows(occurrences, expected)
    missing, unexpected = expected - actual, actual - expected
    recall = (len(expected) - len(missing)) / len(expected)
    assert not missing and not unexpected, (
        f"recall {recall:.0%} ({len(expected) - len(missing)}/{len(expected)}), "
        f"{len(unexpected)} unexpected\n"
        f"missing ({len(missing)}):\n{render(missing)}\n"
        f"unexpected ({len(unexpected)}):\n{render(unexpected)}"
    )
    assert recall == 1.0
    assert len(unexpected) == 0


def test_no_problems_but_notes_on_chart_templates(
    scanned: tuple[list[Occurrence], list[FileProblem]],
) -> None:
    occurrences, problems = scanned
    charts = {fields[0] for fields in table("HELM_SKIPPED.tsv")}
    assert sorted({relative(o.file) for o in occurrences} & charts) == []
    wrong = [
        f"{relative(p.file)}:{p.line}: {p.message}"
        for p in problems
        if relative(p.file) not in charts
        or not any(word in p.message.lower() for word in ("helm", "chart"))
    ]
    assert wrong == []
