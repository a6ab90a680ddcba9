"""References are parsed once: ``run.parse_each`` splits valid from invalid in one pass, and a
``Reference`` given is taken as it is (its text is its own)."""

from __future__ import annotations

import pytest

from imagecheck.errors import InvalidReferencesError
from imagecheck.reference import parse_reference
from imagecheck.run import parse_all, parse_each


def test_parse_each_keeps_the_text_as_given_and_every_invalid_one() -> None:
    ref = parse_reference("ghcr.io/org/app:1")
    parsed, invalid = parse_each(["busybox", "Bad", ref, "also bad"])
    assert parsed == [("busybox", parse_reference("busybox")), (str(ref), ref)]
    assert [e.reference for e in invalid] == ["Bad", "also bad"]


def test_parse_all_raises_for_all_the_invalid_ones() -> None:
    with pytest.raises(InvalidReferencesError) as caught:
        parse_all(["Bad", "busybox", "also bad"])
    assert [e.reference for e in caught.value.invalid] == ["Bad", "also bad"]
