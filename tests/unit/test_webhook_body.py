"""``imagecheck.webhook._body``: a review body's content codings undone within the body limit,
or a clear refusal (415 for a coding not accepted, 400 for data that does not decode, 413 for
what inflates past the limit). The differential suite shows the same answers over HTTP on
both webhook paths; these pin each rule down."""

from __future__ import annotations

import gzip
import zlib

import pytest

from imagecheck.webhook._body import (
    MAX_CODINGS,
    MAX_GZIP_MEMBERS,
    Unreadable,
    content_codings,
    decoded,
)

REVIEW = b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}' * 20
LIMIT = 64 * 1024


def refusal(body: bytes, codings: list[str], limit: int = LIMIT) -> tuple[int, str]:
    with pytest.raises(Unreadable) as caught:
        decoded(body, codings, limit)
    return caught.value.status, caught.value.reason


def raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


@pytest.mark.parametrize(
    ("codings", "encode"),
    [
        ([], lambda b: b),
        (["identity"], lambda b: b),
        (["gzip"], gzip.compress),
        (["x-gzip"], gzip.compress),
        (["deflate"], zlib.compress),  # the zlib format RFC 9110 names
        (["deflate"], raw_deflate),  # what some clients send as deflate
        (["deflate", "gzip"], lambda b: gzip.compress(zlib.compress(b))),
        (["gzip"], lambda b: gzip.compress(b[:100]) + gzip.compress(b[100:])),  # two members
    ],
    ids=["none", "identity", "gzip", "x-gzip", "zlib", "raw-deflate", "stacked", "members"],
)
def test_each_accepted_coding_is_undone_last_applied_first(
    codings: list[str], encode: object
) -> None:
    assert callable(encode)
    assert decoded(encode(REVIEW), codings, LIMIT) == REVIEW


def test_header_lines_and_lists_are_read_in_order_case_blind() -> None:
    assert content_codings(["GZip, identity", " deflate "]) == ["gzip", "identity", "deflate"]
    assert content_codings([]) == []


@pytest.mark.parametrize("coding", ["br", "zstd", "compress", "gzip;q=1", "\u00e9"])
def test_a_coding_not_accepted_is_a_415_naming_the_accepted_ones(coding: str) -> None:
    with pytest.raises(Unreadable) as caught:
        content_codings([f"gzip, {coding}"])
    assert caught.value.status == 415
    assert "use gzip, deflate" in caught.value.reason
    assert caught.value.headers == {"Accept-Encoding": "gzip, deflate"}


def test_too_many_stacked_codings_are_refused() -> None:
    with pytest.raises(Unreadable) as caught:
        content_codings(["gzip"] * (MAX_CODINGS + 1))
    assert caught.value.status == 415


@pytest.mark.parametrize(
    ("body", "coding", "reason"),
    [
        (REVIEW, "gzip", "body is not valid gzip data"),
        (gzip.compress(REVIEW)[:-20], "gzip", "body is not complete gzip data"),
        (b"", "gzip", "body is not complete gzip data"),
        (zlib.compress(REVIEW) + b"tail", "deflate", "body has data after its deflate stream"),
        (gzip.compress(REVIEW) + b"garbage!", "gzip", "body is not valid gzip data"),
        (b"\xff\xff\xff\xff", "deflate", "body is not valid deflate data"),  # block type 3
    ],
    ids=["plain", "truncated", "empty", "trailing", "trailing-member", "garbage"],
)
def test_data_that_does_not_decode_is_a_400_saying_so(
    body: bytes, coding: str, reason: str
) -> None:
    assert refusal(body, [coding]) == (400, reason)


ZEROS = b"\0" * (50 * 1024 * 1024)


@pytest.mark.parametrize(
    ("body", "codings"),
    [
        (gzip.compress(ZEROS), ["gzip"]),  # 50 MiB of zeros in about 50 KiB
        (gzip.compress(gzip.compress(ZEROS)), ["gzip", "gzip"]),  # the outer one fits
        (gzip.compress(b"\0" * 40_000) * 2, ["gzip"]),  # two members: each fits, not both
    ],
    ids=["bomb", "nested-bomb", "members"],
)
def test_what_inflates_past_the_limit_is_a_413(body: bytes, codings: list[str]) -> None:
    assert refusal(body, codings) == (413, f"body is larger than {LIMIT} bytes once decoded")


def test_many_gzip_members_are_refused_before_they_cost_a_decompressor_each() -> None:
    body = gzip.compress(b"{}") * (MAX_GZIP_MEMBERS + 1)
    assert refusal(body, ["gzip"]) == (400, f"body has more than {MAX_GZIP_MEMBERS} gzip members")
    assert decoded(gzip.compress(b"{}") * MAX_GZIP_MEMBERS, ["gzip"], LIMIT) == b"{}" * 64
