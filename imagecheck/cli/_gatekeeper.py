"""The Gatekeeper ``imagecheck gate`` runs, with the command's registry settings: one home for
the one pass (``--once``) and the controller (``_gate_run``), which both start from it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from imagecheck.cli._credentials import read_credentials
from imagecheck.cli._settings import CheckSettings

if TYPE_CHECKING:  # the cluster modules load when gate runs, not for `check`
    from imagecheck.authn import Keychain
    from imagecheck.cluster._gate import GateOptions
    from imagecheck.cluster._gate_pass import Gatekeeper
    from imagecheck.cluster._model import Cluster


@contextlib.asynccontextmanager
async def gatekeeper_for(
    cluster: Cluster, options: GateOptions, settings: CheckSettings
) -> AsyncIterator[Gatekeeper]:
    """A Gatekeeper with the command's registry settings: the pods' own pull secrets first,
    then what the command was given and the shared sources, as reap orders them."""
    from imagecheck.cluster._gate_pass import Gatekeeper  # noqa: PLC0415
    from imagecheck.registry import ImageChecker  # noqa: PLC0415

    credentials = read_credentials(settings)

    def keychain_for(texts: Sequence[tuple[str, str]]) -> Keychain:
        return settings.keychain(credentials, texts)

    async with ImageChecker(settings.client_options(), settings.keychain(credentials)) as checker:
        yield Gatekeeper(cluster, checker, options, keychain_for=keychain_for)
