"""The ``status`` subresource as the API server enforces it, for the kinds that have one (the
Kueue kinds here: ``Workload``, ``AdmissionCheck``, CRDs with ``subresources: {status: {}}``).

The rules, from https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#status-subresource
and https://kubernetes.io/docs/reference/using-api/api-concepts/#status-subresource:

* the main resource's endpoint (POST, PUT, PATCH) ignores the ``status`` stanza: a create
  stores none, an update or patch keeps the stored one;
* ``PUT``/``PATCH .../NAME/status`` changes ``status`` alone: changes to anything else in the
  body (spec, labels, annotations) are ignored; ``metadata.resourceVersion`` is still checked
  (409 on a stale one), as it is for any update;
* ``metadata.generation`` starts at 1 and is incremented by a change to anything but
  ``metadata`` and ``status`` (the spec), never by a status write.

RBAC names the subresource as a resource of its own (``workloads/status``): a role that may
patch ``workloads`` may not patch their status, and the other way round.
"""

from __future__ import annotations

import copy
from typing import Any

JSON = dict[str, Any]
STATUS = "status"


def created(has_status: bool, obj: JSON) -> JSON:
    """The object a create stores: its status dropped when the kind has the subresource."""
    obj = copy.deepcopy(obj)
    if has_status:
        obj.pop(STATUS, None)
        obj["metadata"]["generation"] = 1
    return obj


def written(has_status: bool, current: JSON, proposed: JSON, subresource: str | None) -> JSON:
    """The object an update or patch of ``current`` to ``proposed`` stores."""
    if not has_status:
        return proposed
    if subresource == STATUS:
        obj = copy.deepcopy(current)
        if STATUS in proposed:
            obj[STATUS] = copy.deepcopy(proposed[STATUS])
        else:
            obj.pop(STATUS, None)
        return obj
    obj = copy.deepcopy(proposed)
    if STATUS in current:
        obj[STATUS] = copy.deepcopy(current[STATUS])
    else:
        obj.pop(STATUS, None)
    generation = current["metadata"].get("generation") or 1
    if _spec_of(obj) != _spec_of(current):
        generation += 1
    obj["metadata"]["generation"] = generation
    return obj


def _spec_of(obj: JSON) -> JSON:
    return {k: v for k, v in obj.items() if k not in ("metadata", STATUS)}
