"""The Reaper ``imagecheck reap`` runs, with the command's registry settings: one home for the
one pass (``_reap``) and the loop (``_reap_loop``), which both start from it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from imagecheck.cli._credentials import read_credentials
from imagecheck.cli._settings import CheckSettings

if TYPE_CHECKING:  # the cluster modules load when reap runs, not for `check`
    from imagecheck.authn import Keychain
    from imagecheck.cluster import Cluster, Reaper, ReapOptions


@contextlib.asynccontextmanager
async def reaper_for(
    cluster: Cluster, reap_options: ReapOptions, settings: CheckSettings
) -> AsyncIterator[Reaper]:
    """A Reaper with the command's registry settings: the pods' own pull secrets first, then
    what the command was given, as `check` orders them."""
    from imagecheck.cluster import Reaper  # noqa: PLC0415
    from imagecheck.registry import ImageChecker  # noqa: PLC0415

    credentials = read_credentials(settings)

    def keychain_for(texts: Sequence[tuple[str, str]]) -> Keychain:
        return settings.keychain(credentials, texts)

    own = settings.keychain(credentials)
    async with ImageChecker(settings.client_options(), own) as checker:
        yield Reaper(cluster, checker, reap_options, keychain_for=keychain_for)
