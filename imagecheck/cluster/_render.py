"""``imagecheck audit``'s output, as ``scan``'s (``imagecheck.render``) with
namespace/kind/name/container where scan has file:line. Pure: returns strings. Names come
from the API, so text output makes them printable as scan does a file's content."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from imagecheck.cluster._audit import Use
from imagecheck.render import github_escape, printable_line, shown, status_groups
from imagecheck.result import CheckResult, Status


def where(use: Use) -> str:
    """``namespace/Kind/name, container c`` (a cluster-scoped object has no namespace)."""
    path = "/".join(p for p in (use.namespace, use.kind, use.name) if p)
    return printable_line(f"{path}, container {use.container}")


def render_audit_text(uses: Sequence[Use], results: Mapping[str, CheckResult]) -> str:
    """Grouped by status, worst first; each image once, with every workload that uses it."""
    places: dict[str, list[Use]] = {}
    for use in uses:
        places.setdefault(use.image, []).append(use)
    return "\n".join(status_groups(places, results, where))


def render_audit_json(uses: Sequence[Use], results: Mapping[str, CheckResult]) -> str:
    """Every use with its ``result`` (``check --output json``'s object)."""
    found = [
        {
            "namespace": u.namespace,
            "kind": u.kind,
            "name": u.name,
            "container": u.container,
            "image": u.image,
            "result": results[u.image].to_dict(),
        }
        for u in uses
    ]
    return json.dumps({"uses": found}, indent=2)


def render_audit_github(uses: Sequence[Use], results: Mapping[str, CheckResult]) -> str:
    """``::error title=...::...`` workflow commands, one per use of an image not found (no
    file to annotate: the message names the workload)."""
    lines = []
    for u in uses:
        r = results[u.image]
        if r.status is Status.FOUND:
            continue
        message = github_escape(
            f"{r.status.value}: {shown(r)}: {printable_line(r.message)} ({where(u)})"
        )
        lines.append(f"::error title=image {r.status.value}::{message}")
    return "\n".join(lines)


RENDERERS = {"text": render_audit_text, "json": render_audit_json, "github": render_audit_github}
