"""``.json`` files: which ones are manifests, and their text as the YAML reader takes it.

JSON is YAML's flow style, so a manifest written in JSON is read by the same event reader as
YAML and keeps exact lines. One difference: libyaml refuses a tab where a line's indentation
would be (``\\t{`` at the top level). In valid JSON a tab is only ever whitespace (a string
cannot hold a raw one), so each becomes a space: same lines, same columns.

A repository holds many JSON files that are not manifests (``package.json``, ``tsconfig.json``
with comments, ``composer.json``); they must neither fail a scan nor fill its output:

- valid JSON whose top level is an object with ``kind`` (Kubernetes, ``List`` included) or
  ``services`` (Compose) is a manifest, scanned;
- any other valid JSON holds no images: nothing is reported;
- invalid JSON that looks like a manifest (it names both ``apiVersion`` and ``kind``, or both
  ``services`` and ``image``) is a :class:`FileProblem` on the line of the error;
- any other invalid JSON is a :class:`FileNote`: not scanned, and not a failure.
"""

from __future__ import annotations

import json
import re

from imagecheck.scanning._model import FileNote, FileProblem

__all__ = ["is_json_name", "manifest_text"]

_KEY = r'"{}"\s*:'
_KUBERNETES = (re.compile(_KEY.format("apiVersion")), re.compile(_KEY.format("kind")))
_COMPOSE = (re.compile(_KEY.format("services")), re.compile(_KEY.format("image")))


def is_json_name(file: str) -> bool:
    return file.lower().endswith(".json")


def manifest_text(text: str, file: str) -> str | FileNote | FileProblem | None:
    """The text to read as YAML when ``text`` is a JSON manifest; None when it is JSON that
    holds no images; else a problem or a note, by the rules above."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        line: int | None = exc.lineno
        reason, where = exc.msg, f" at line {exc.lineno} column {exc.colno}"
    except RecursionError:  # the stdlib parser recurses; the YAML reader bounds depth itself
        line, reason, where = None, "nested too deeply", ""
    else:
        if isinstance(value, dict) and ("kind" in value or "services" in value):
            return text.replace("\t", " ")
        return None
    if any(all(key.search(text) for key in keys) for keys in (_KUBERNETES, _COMPOSE)):
        return FileProblem(file, line, f"invalid JSON: {reason}")
    return FileNote(
        file,
        f"not scanned: not valid JSON ({reason}{where}), nor a Kubernetes manifest or Compose file",
    )
