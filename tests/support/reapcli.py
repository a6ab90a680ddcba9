"""Shared by the tests of the ``reap`` command through click: a faked registry (respx) and the
registry settings click hands the command when no option is given."""

from __future__ import annotations

import dataclasses
from typing import Any

import respx

from imagecheck.cli._reap import reap
from imagecheck.cli._settings import CheckSettings


def fake_registry(network: respx.MockRouter) -> None:
    network.get("https://registry.test/v2/").respond(200)
    network.head("https://registry.test/v2/team/train/manifests/1.0.1").respond(404)


def registry_defaults() -> dict[str, Any]:
    """What click hands the command for the registry options when none is given."""
    with reap.make_context("reap", []) as ctx:
        params = dict(ctx.params)
    names = {f.name for f in dataclasses.fields(CheckSettings)}
    return {k: v for k, v in params.items() if k in names}
