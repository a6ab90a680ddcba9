"""The whole matrix: the core scenarios, the emulated registries, the node's hosts.toml."""

from __future__ import annotations

from tests.integration.differential.emulations import EMULATED
from tests.integration.differential.hosts_scenarios import HOSTS
from tests.integration.differential.scenarios import CORE, Scenario

SCENARIOS: tuple[Scenario, ...] = (*CORE, *EMULATED, *HOSTS)
