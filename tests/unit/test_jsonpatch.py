"""The stand-in's JSON Patch (``tests/support/jsonpatch.py``) against RFC 6902's own
examples (Appendix A), so that a gate patch it applies is applied as the API server would."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.jsonpatch import PatchError, apply_patch

# (document, patch, result) from RFC 6902 Appendix A (A.1-A.5, A.8, A.10, A.16).
APPLIED = {
    "A.1 add an object member": ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}],
                                 {"baz": "qux", "foo": "bar"}),
    "A.2 add an array element": ({"foo": ["bar", "baz"]},
                                 [{"op": "add", "path": "/foo/1", "value": "qux"}],
                                 {"foo": ["bar", "qux", "baz"]}),
    "A.3 remove an object member": ({"baz": "qux", "foo": "bar"},
                                    [{"op": "remove", "path": "/baz"}], {"foo": "bar"}),
    "A.4 remove an array element": ({"foo": ["bar", "qux", "baz"]},
                                    [{"op": "remove", "path": "/foo/1"}],
                                    {"foo": ["bar", "baz"]}),
    "A.5 replace a value": ({"baz": "qux", "foo": "bar"},
                            [{"op": "replace", "path": "/baz", "value": "boo"}],
                            {"baz": "boo", "foo": "bar"}),
    "A.8 test a value": ({"baz": "qux", "foo": ["a", 2, "c"]},
                         [{"op": "test", "path": "/baz", "value": "qux"},
                          {"op": "test", "path": "/foo/1", "value": 2}],
                         {"baz": "qux", "foo": ["a", 2, "c"]}),
    "A.10 add a nested member object": ({"foo": "bar"},
                                        [{"op": "add", "path": "/child",
                                          "value": {"grandchild": {}}}],
                                        {"foo": "bar", "child": {"grandchild": {}}}),
    "A.14 ~ escape ordering": ({"/": 9, "~1": 10},
                               [{"op": "test", "path": "/~01", "value": 10}],
                               {"/": 9, "~1": 10}),
    "A.16 add an array value": ({"foo": ["bar"]},
                                [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
                                {"foo": ["bar", ["abc", "def"]]}),
}  # fmt: skip

# (document, patch) that must fail (A.9, A.12, A.13, A.15 and the pointer rules).
REFUSED = {
    "A.9 test a value: error": ({"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}]),
    "A.12 add to a nonexistent target": (
        {"foo": "bar"},
        [{"op": "add", "path": "/baz/bat", "value": "qux"}],
    ),
    "A.13 invalid operation": ({"foo": "bar"}, [{"op": "move", "from": "/foo", "path": "/x"}]),
    "A.15 comparing strings and numbers": (
        {"/": 9, "~1": 10},
        [{"op": "test", "path": "/~01", "value": "10"}],
    ),
    "index past the end": ({"foo": ["a"]}, [{"op": "add", "path": "/foo/2", "value": "b"}]),
    "leading zero index": ({"foo": ["a", "b"]}, [{"op": "remove", "path": "/foo/01"}]),
    "pointer without slash": ({"foo": 1}, [{"op": "add", "path": "foo", "value": 2}]),
    "not an array": ({"foo": 1}, {"op": "add", "path": "/foo", "value": 2}),
    "add without value": ({"foo": 1}, [{"op": "add", "path": "/bar"}]),
}


@pytest.mark.parametrize(("document", "patch", "result"), APPLIED.values(), ids=APPLIED)
def test_the_rfc_examples_apply(document: Any, patch: Any, result: Any) -> None:
    assert apply_patch(document, patch) == result


@pytest.mark.parametrize(("document", "patch"), REFUSED.values(), ids=REFUSED)
def test_a_patch_that_does_not_apply_fails_whole_and_leaves_the_document(
    document: Any, patch: Any
) -> None:
    before = repr(document)
    with pytest.raises(PatchError):
        apply_patch(document, patch)
    assert repr(document) == before
