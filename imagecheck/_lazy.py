"""A package's public names, imported on first use (PEP 562): ``import imagecheck`` and
``imagecheck --version`` load nothing they do not need, and a front end's extra (aiohttp,
lightkube) is imported only by the command that uses it.

A package's ``__init__`` (its face) maps each public name to the private module defining it,
imports them under ``TYPE_CHECKING`` for type checkers, and hands the map to :func:`lazy_face`::

    if not TYPE_CHECKING:  # hidden from checkers, which would take any misspelt name for it
        __getattr__, __dir__ = lazy_face(__name__, _EXPORTS, globals())
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing's, without importing typing: checkers treat the name as true
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["lazy_face", "load_export"]


def lazy_face(
    package: str, exports: dict[str, str], namespace: dict[str, object]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the package named ``package``, whose module
    globals are ``namespace``: a name of ``exports`` is imported from the module it maps to on
    first access, and kept in ``namespace``; ``dir()`` lists those and the names loaded."""

    def __getattr__(name: str) -> object:
        return load_export(package, exports, name, namespace)

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__


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
