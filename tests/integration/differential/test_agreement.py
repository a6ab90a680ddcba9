"""imagecheck's verdict equals the kubelet's puller's (containerd), scenario by scenario.

Each scenario asserts, in this order: containerd gave the verdict the table says the kubelet
gives (so the table is measured, not believed); imagecheck gave the same, or the listed
deliberate difference; skopeo gave what the table says of it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.differential.matrix import SCENARIOS
from tests.integration.differential.oracle import (
    Containerd,
    imagecheck_verdict,
    skopeo_verdict,
)
from tests.integration.differential.report import Row
from tests.integration.differential.scenarios import Scenario
from tests.integration.differential.site import Site
from tests.support.tools import system_tool


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
def test_agreement(
    scenario: Scenario, site: Site, containerd: Containerd, agreement: list[Row], tmp_path: Path
) -> None:
    skopeo = system_tool("skopeo")
    with scenario.prepare(site) as case:
        kubelet = containerd.pull(case.reference, case.access)
        peer = skopeo_verdict(case.reference, case.access, skopeo=skopeo)
        ours = imagecheck_verdict(case.reference, case.access, tmp_path, scenario.options)
    agreement.append(
        Row(scenario.id, scenario.group, scenario.what, kubelet, peer, ours, scenario.difference)
    )
    assert kubelet.verdict == scenario.kubelet, f"containerd: {kubelet.detail}"
    assert ours.verdict == scenario.imagecheck_expected, f"imagecheck: {ours.detail}"
    assert case.answered_by in ours.detail, f"imagecheck names another host: {ours.detail}"
    assert peer.verdict == scenario.skopeo_expected, f"skopeo: {peer.detail}"
