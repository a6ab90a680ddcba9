"""A package's public names, imported on first use (PEP 562): ``import imagecheck`` and
``imagecheck --version`` load nothing they do not need (issue #14)."""

from __future__ import annotations

import importlib


def load_export(
    package: str, exports: dict[str, str], name: str, namespace: dict[str, object]
) -> object:
    """``name`` from the module ``exports`` maps it to, kept in the package's ``namespace`` so
    that the package's ``__getattr__`` runs once per name."""
    module_name = exports.get(name)
    if module_name is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    namespace[name] = value
    return value
