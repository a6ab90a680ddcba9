"""Turning results into what people and machines read: text lines, JSON, and the one-line
summary Kubernetes shows as a pod's termination message. Pure: returns strings."""

from __future__ import annotations

import json
from collections.abc import Sequence

from imagecheck.result import CheckResult, Status

# Kubernetes keeps at most 4096 bytes of a container's termination message.
TERMINATION_LOG_LIMIT = 4096


def shown(result: CheckResult) -> str:
    return str(result.reference) if result.reference is not None else result.image


def render_text(results: Sequence[CheckResult]) -> str:
    """One line per image: status, normalized reference, digest (found) or reason."""
    width = max((len(shown(r)) for r in results), default=0)
    lines = []
    for r in results:
        detail = r.digest if r.status is Status.FOUND and r.digest else r.message
        lines.append(f"{r.status.value:<8} {shown(r):<{width}}  {detail}".rstrip())
    return "\n".join(lines)


def render_json(results: Sequence[CheckResult]) -> str:
    return json.dumps([r.to_dict() for r in results], indent=2)


def termination_summary(results: Sequence[CheckResult], limit: int = TERMINATION_LOG_LIMIT) -> str:
    """``imagecheck: missing X (reason); denied Y (reason)``: every image that was not found,
    on one line, cut to ``limit`` bytes of UTF-8 (with a count of what was left out)."""
    bad = [r for r in results if r.status is not Status.FOUND]
    parts = [f"{r.status.value} {shown(r)} ({r.message})" for r in bad]
    line = "imagecheck: " + "; ".join(parts)
    encoded = line.encode()
    if len(encoded) <= limit:
        return line
    for keep in range(len(parts) - 1, 0, -1):
        candidate = "imagecheck: " + "; ".join(parts[:keep]) + f"; and {len(parts) - keep} more"
        if len(candidate.encode()) <= limit:
            return candidate
    return encoded[: limit - 3].decode(errors="ignore") + "..."
