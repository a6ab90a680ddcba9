""":func:`containers` of :mod:`imagecheck.kube._workload` over parsed JSON, without its
``Tree`` protocol: the webhook walks every review's whole object, and through the protocol
each node cost a few method calls and a generator, the walk about a tenth of a warm review's
CPU.

The rules are the generic walk's, read from its tables (``CONTAINER_LISTS``,
``CONTAINER_KEYS``, ``CONTAINER_FIELDS``, ``OPERATOR_FIELDS``), in the same
order; only the access is direct (``isinstance`` on ``dict``, ``list``, ``str``). Scalars are
not pushed on the stack, and nothing tracks the collections being walked: ``json.loads``
makes trees, with no collection inside itself. ``tests/unit/test_workload_json.py`` holds it
to the generic walk's slots over the test corpora.
"""

from __future__ import annotations

from typing import Any

from imagecheck.kube._workload import (
    CONTAINER_FIELDS,
    CONTAINER_KEYS,
    CONTAINER_LISTS,
    JSON,
    Slot,
    operator_fields,
)

__all__ = ["containers"]


def containers(obj: Any) -> list[Slot[Any]]:
    """``workload.containers(JSON, obj)``, for ``obj`` from ``json.loads`` (string keys, no
    collection inside itself)."""
    operator = {id(holder): slot for holder, slot in operator_fields(JSON, obj)}
    if not operator:
        return [slot for _, slot in _shaped(obj)]
    # A field of the table that also looks like a container is named as the table has it.
    found = [operator.pop(id(holder), slot) for holder, slot in _shaped(obj)]
    return found + list(operator.values())


def _shaped(obj: Any) -> list[tuple[Any, Slot[Any]]]:
    # Depth first, in document order: (node, the key it is under, the name of the nearest
    # mapping around it that has one, whether it is an item of a container list).
    found: list[tuple[Any, Slot[Any]]] = []
    stack: list[tuple[Any, str | None, str | None, bool]] = [(obj, None, None, False)]
    pop, extend = stack.pop, stack.extend
    while stack:
        node, key, owner, listed = pop()
        if isinstance(node, dict):
            # Most mappings have no image: no call for them.
            slot = (
                _container(node, key, owner, listed) if "image" in node or key == "image" else None
            )
            if slot is not None:
                found.append((node, slot))
                continue
            name = node.get("name")
            if not isinstance(name, str) or not name:
                name = owner
            extend(
                [
                    (value, k, name, False)
                    for k, value in reversed(node.items())
                    if isinstance(value, (dict, list))
                ]
            )
        elif isinstance(node, list):
            in_list = key in CONTAINER_LISTS
            extend(
                [
                    (item, key, owner, in_list)
                    for item in reversed(node)
                    if isinstance(item, (dict, list))
                ]
            )
    return found


def _container(
    node: dict[str, Any], key: str | None, owner: str | None, listed: bool
) -> Slot[Any] | None:
    """``workload._container`` for a JSON mapping."""
    image = node.get("image")
    if image is not None:
        name = node.get("name")
        if not isinstance(name, str):
            name = None
        if listed:
            return Slot(image, name, key or "")
        if key in CONTAINER_KEYS:
            return Slot(image, name or owner or key, key or "")
        if isinstance(image, str) and not CONTAINER_FIELDS.isdisjoint(node):
            return Slot(image, name or key, key or "")
    if key == "image":
        reference = node.get("reference")
        if isinstance(reference, str):
            # An image volume (Kubernetes 1.31+): the kubelet pulls it like a container's.
            return Slot(reference, owner, "volumes.image")
    return None
