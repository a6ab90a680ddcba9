"""The agreement table: what each puller answered, scenario by scenario."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.integration.differential.oracle import Answer


@dataclass(frozen=True)
class Row:
    scenario: str
    group: str
    what: str
    containerd: Answer
    skopeo: Answer
    imagecheck: Answer
    difference: str | None

    @property
    def agrees(self) -> bool:
        return self.imagecheck.verdict == self.containerd.verdict


TABLE_KEY = pytest.StashKey[list[Row]]()


def render_table(rows: list[Row]) -> str:
    """A Markdown table, then the agreement figures."""
    lines = [
        "| scenario | what | containerd | skopeo | imagecheck | |",
        "|---|---|---|---|---|---|",
    ]
    for row in sorted(rows, key=lambda r: r.scenario):
        mark = (
            "=" if row.agrees else f"differs ({row.difference})" if row.difference else "DISAGREES"
        )
        lines.append(
            f"| {row.scenario} | {row.what} | {row.containerd} | {row.skopeo} | "
            f"{row.imagecheck} | {mark} |"
        )
    listed = sum(1 for r in rows if not r.agrees and r.difference)
    agree = sum(1 for r in rows if r.agrees)
    outside = [r for r in rows if r.difference is None]
    agree_outside = sum(1 for r in outside if r.agrees)
    skopeo = sum(1 for r in rows if r.skopeo.verdict == r.containerd.verdict)
    lines.append("")
    lines.append(
        f"imagecheck = containerd: {agree}/{len(rows)} scenarios "
        f"({100 * agree / len(rows):.0f} %); outside the listed differences "
        f"{agree_outside}/{len(outside)} ({100 * agree_outside / max(1, len(outside)):.0f} %); "
        f"listed differences: {listed}. skopeo = containerd: {skopeo}/{len(rows)}."
    )
    return "\n".join(lines)
