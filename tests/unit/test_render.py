"""Rendering results: text lines, JSON, and the termination message's 4 KiB cap."""

from __future__ import annotations

import json

import pytest

from imagecheck.errors import Hint, ImagecheckError, RegistryError, UsageError
from imagecheck.reference import parse_reference
from imagecheck.render import (
    error_text,
    explained,
    json_chunks,
    render_json,
    render_text,
    termination_summary,
    text_chunks,
)
from imagecheck.result import CheckResult, Status


def result(image: str, status: Status, message: str = "", digest: str | None = None) -> CheckResult:
    return CheckResult(image, parse_reference(image), status, message=message, digest=digest)


def test_text_aligns_and_shows_digest_or_reason() -> None:
    lines = render_text(
        [
            result("busybox", Status.FOUND, "found", digest="sha256:" + "a" * 64),
            result("ghcr.io/org/app:2", Status.MISSING, "tag '2' not found"),
        ]
    ).splitlines()
    assert lines == [
        f"found    docker.io/library/busybox:latest  sha256:{'a' * 64}",
        "missing  ghcr.io/org/app:2                 tag '2' not found",
    ]


def test_json_keeps_input_order_and_fields() -> None:
    data = json.loads(
        render_json([result("b:1", Status.MISSING, "m"), result("a:1", Status.FOUND)])
    )
    assert [d["image"] for d in data] == ["b:1", "a:1"]
    assert set(data[0]) == {
        "image", "reference", "status", "digest", "media_type", "size", "registry", "message",
        "elapsed_ms",
    }  # fmt: skip


def mixed_results() -> list[CheckResult]:
    """Every status, digests and sizes, no reference, and messages JSON must escape."""
    found = CheckResult(
        "busybox", parse_reference("busybox"), Status.FOUND, message="found",
        digest="sha256:" + "a" * 64, media_type="application/vnd.oci.image.index.v1+json",
        size=9124, registry="registry-1.docker.io", elapsed_ms=12.3456,
    )  # fmt: skip
    return [
        found,
        result("ghcr.io/org/app:2", Status.MISSING, "tag '2' not found"),
        result("a:1", Status.ERROR, FORGED + ' "quoted" \\ \u2028 é 日本'),
        CheckResult("Bad Image", None, Status.INVALID, "whitespace is not allowed"),
        result("b:1", Status.DENIED, ""),
        found,
    ]


@pytest.mark.parametrize("count", [0, 1, 6], ids=["none", "one", "mixed"])
def test_json_written_one_result_at_a_time_is_the_same_bytes(count: int) -> None:
    results = mixed_results()[:count]
    chunks = list(json_chunks(iter(results)))  # any iterable: never needs the whole list
    whole = json.dumps([r.to_dict() for r in results], indent=2)
    assert "".join(chunks).encode() == whole.encode()
    assert render_json(results) == whole
    assert len(chunks) == max(1, 2 * count + 1)  # a result per chunk, and its separator


def test_text_written_one_line_at_a_time_is_the_same_text() -> None:
    results = mixed_results()
    chunks = list(text_chunks(results))
    assert len(chunks) == len(results)
    assert "".join(chunks) == render_text(results)
    assert (
        render_text(results).splitlines()[0]
        == f"found    {'docker.io/library/busybox:latest':<32}  sha256:{'a' * 64}"
    )


def summary_of_every_length(results: list[CheckResult], limit: int) -> str:
    """The definition termination_summary keeps to: the most whole parts that fit, with a
    count of the rest; else the line cut."""
    parts = [
        f"{r.status.value} {r.image} ({r.message})" for r in results if r.status is not Status.FOUND
    ]
    line = "imagecheck: " + "; ".join(parts)
    if len(line.encode()) <= limit:
        return line
    for keep in range(len(parts) - 1, 0, -1):
        candidate = "imagecheck: " + "; ".join(parts[:keep]) + f"; and {len(parts) - keep} more"
        if len(candidate.encode()) <= limit:
            return candidate
    return line.encode()[: limit - 3].decode(errors="ignore") + "..."


@pytest.mark.parametrize("limit", [20, 60, 200, 4096])
@pytest.mark.parametrize("count", [0, 1, 3, 40, 2000])
def test_termination_summary_words_only_what_fits(count: int, limit: int) -> None:
    results = [
        CheckResult(f"app:{i}", None, Status.FOUND if i % 3 == 0 else Status.MISSING, "é" * (i % 7))
        for i in range(count)
    ]
    assert termination_summary(results, limit) == summary_of_every_length(results, limit)


def test_termination_summary_names_only_what_failed() -> None:
    line = termination_summary(
        [
            result("a:1", Status.FOUND),
            result("b:1", Status.MISSING, "tag '1' not found"),
            result("c:1", Status.DENIED, "requires authorization"),
        ]
    )
    assert line == (
        "imagecheck: missing docker.io/library/b:1 (tag '1' not found); "
        "denied docker.io/library/c:1 (requires authorization)"
    )


@pytest.mark.parametrize("count", [1, 30, 500], ids=["one", "thirty", "five-hundred"])
def test_termination_summary_fits_the_kubernetes_limit(count: int) -> None:
    results = [result(f"team/app:t{i}", Status.MISSING, "é" * 200) for i in range(count)]
    line = termination_summary(results)
    assert len(line.encode()) <= 4096
    assert "\n" not in line
    if count > 20:
        assert line.endswith(" more")


FORGED = "denied\n\x1b[32mfound    docker.io/library/evil:1  sha256:00\x1b[0m\r"


def test_text_and_termination_summary_never_carry_control_characters() -> None:
    results = [result("a:1", Status.ERROR, FORGED)]
    text = render_text(results)
    summary = termination_summary(results)
    for out in (text, summary):
        assert len(out.splitlines()) == 1
        assert not any(ch in out for ch in "\n\r\x1b")
    assert text.endswith("denied??[32mfound    docker.io/library/evil:1  sha256:00?[0m?")


def test_json_keeps_the_message_faithfully() -> None:
    (data,) = json.loads(render_json([result("a:1", Status.ERROR, FORGED)]))
    assert data["message"] == FORGED


def test_explained_words_the_hint_with_the_option_name() -> None:
    ref = parse_reference("registry.test/app:1")
    plain = CheckResult("registry.test/app:1", ref, Status.ERROR, message="refused")
    assert explained(plain) is plain
    hinted = CheckResult(
        "registry.test/app:1", ref, Status.ERROR, message="refused", hint=Hint("auth.test:80")
    )
    shown = explained(hinted)
    assert shown.message == "refused; add --insecure-registry auth.test:80 to allow it"
    assert shown.hint is None
    assert explained(shown) == shown  # worded once


def test_explained_words_a_certificate_hint_with_the_ca_file_option() -> None:
    ref = parse_reference("registry.test/app:1")
    message = "TLS certificate of registry.test is not trusted (self-signed certificate)"
    hinted = CheckResult(
        "registry.test/app:1", ref, Status.ERROR, message=message, hint=Hint(ca_file=True)
    )
    assert explained(hinted).message == f"{message}; pass --ca-file with the CA that signed it"


# (id, error, the line the command prints after "imagecheck: error: ")
ERRORS: list[tuple[str, ImagecheckError, str]] = [
    ("plain", UsageError("--tls-cert and --tls-key go together"),
     "--tls-cert and --tls-key go together"),
    ("hinted", RegistryError("credentials kept from plain HTTP", hint=Hint("auth.test:80")),
     "credentials kept from plain HTTP; add --insecure-registry auth.test:80 to allow it"),
    ("one-line", UsageError("cannot read /tmp/a\nfound\x1b[0m"), "cannot read /tmp/a?found?[0m"),
]  # fmt: skip


@pytest.mark.parametrize(("error", "line"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_error_text_is_one_line_with_its_hint(error: ImagecheckError, line: str) -> None:
    assert error_text(error) == line


def test_scan_outputs_show_where_a_rewritten_image_was_written() -> None:
    from imagecheck.scanning import (  # noqa: PLC0415 - PyYAML
        FileNote,
        Occurrence,
        render_scan_list_json,
        render_scan_list_text,
        render_scan_text,
    )

    rewritten = Occurrence(
        "app:2\x1b[2J", "kustomization.yaml", 4, "Deployment", "web", "app",
        origin="base/deploy.yaml:9",
    )  # fmt: skip
    note = FileNote("chart/templates", "skipped\nforged line")
    invalid = {rewritten.image: CheckResult(rewritten.image, None, Status.INVALID, "bad")}
    assert render_scan_list_text([rewritten], invalid, [], [note]).splitlines() == [
        "FILE:LINE             KIND/NAME       CONTAINER  IMAGE",
        "kustomization.yaml:4  Deployment/web  app        'app:2\\x1b[2J'"
        "  (invalid: bad; rewrites base/deploy.yaml:9)",
        "note     chart/templates  skipped?forged line",
    ]
    [listed] = json.loads(render_scan_list_json([rewritten], invalid, [], [note]))["occurrences"]
    assert (listed["origin"], listed["invalid"]) == ("base/deploy.yaml:9", "bad")
    assert render_scan_text([rewritten], invalid, []).splitlines()[-1] == (
        "    kustomization.yaml:4 (Deployment/web, container app, rewrites base/deploy.yaml:9)"
    )


def test_text_names_the_host_that_had_the_image_when_not_its_own() -> None:
    ref = parse_reference("docker.io/library/busybox:1")
    digest = "sha256:" + "a" * 64
    own = CheckResult("busybox:1", ref, Status.FOUND, digest=digest, registry=ref.api_host)
    mirrored = CheckResult("busybox:1", ref, Status.FOUND, digest=digest, registry="m.local:5000")
    assert render_text([own]).endswith(digest)
    assert render_text([mirrored]).endswith(f"{digest} via m.local:5000")
