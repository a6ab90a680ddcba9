"""The site's "Where imagecheck and the kubelet differ" (docs/kubelet-differences.md) is the
suite's own table, and explains every difference the scenarios list."""

from __future__ import annotations

import re

from tests.integration.differential.matrix import SCENARIOS
from tests.integration.differential.report import PAGE, page_block, render_declared


def test_page_table_is_the_scenarios_table() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert page_block(text) == render_declared(SCENARIOS), (
        f"{PAGE.name}'s agreement table is stale: python -m tests.integration.differential.report"
    )


def test_every_listed_difference_is_explained() -> None:
    text = PAGE.read_text(encoding="utf-8")
    explained = set(re.findall(r'<a id="difference-([a-z0-9-]+)"></a>', text))
    listed = {s.difference for s in SCENARIOS if s.difference is not None}
    assert listed <= explained, f"no {PAGE.name} entry for {sorted(listed - explained)}"
    assert explained <= listed, (
        f"{PAGE.name} explains differences no scenario shows: {sorted(explained - listed)}"
    )


def test_scenario_ids_are_unique_and_enough() -> None:
    ids = [s.id for s in SCENARIOS]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 40
