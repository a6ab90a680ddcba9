"""The whole matrix: the core scenarios, then the emulated registries."""

from __future__ import annotations

from tests.integration.differential.emulations import EMULATED
from tests.integration.differential.scenarios import CORE, Scenario

SCENARIOS: tuple[Scenario, ...] = (*CORE, *EMULATED)
