"""The pull secrets a workload's pods get from their ServiceAccount.

Kubernetes' ServiceAccount admission plugin (kubernetes/kubernetes,
``plugin/pkg/admission/serviceaccount/admission.go``, ``serviceAccount.Admit``) acts on every
Pod CREATE that is not a mirror (static) pod:

1. an empty ``spec.serviceAccountName`` is set to ``default`` (the API's v1 conversion has
   already read the deprecated ``spec.serviceAccount`` into it when it was empty);
2. that ServiceAccount must exist, or the pod is refused;
3. only when ``len(pod.Spec.ImagePullSecrets) == 0``, the ServiceAccount's
   ``imagePullSecrets`` are copied into the pod, in their order. A pod that names any pull
   secret keeps exactly those: the two lists are never merged.

The kubelet then pulls with the pod's ``spec.imagePullSecrets`` alone. So a Pod read from the
API, or reviewed by a webhook (webhooks run after the built-in mutating plugins), carries the
result already; a pod *template* (a Deployment's, a Job's, a CronJob's) does not, and its
pods will get the ServiceAccount's secrets. :func:`service_accounts` names the ServiceAccounts
to read for that; :func:`service_account_pull_secrets` reads one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULT = "default"
# Pod specs nest a few levels deep (a CronJob's is at depth 6); the walk stops far below
# anything the API holds, so a hostile object cannot make it run long.
MAX_DEPTH = 64
# ServiceAccounts named per object: one per pod template, and an object rarely has more
# than a handful (Ray's head and worker groups, a JobSet's replicated jobs).
MAX_ACCOUNTS = 8


def service_accounts(obj: Any) -> list[str]:
    """The ServiceAccounts whose ``imagePullSecrets`` the pods of ``obj`` will get: for each
    pod spec in it (a mapping with a ``containers`` list) that names no pull secret (nor does
    a mapping around it, as an Argo Workflow's ``spec`` does for its templates), its
    ``serviceAccountName``, else ``serviceAccount``, else the nearest one around it, else
    ``default``. In order, each once. None for a core Pod: the plugin has run on it."""
    if not isinstance(obj, Mapping) or (obj.get("apiVersion"), obj.get("kind")) == ("v1", "Pod"):
        return []
    found: dict[str, None] = {}
    stack: list[tuple[Any, int, bool, str | None]] = [(obj, 0, False, None)]
    while stack and len(found) < MAX_ACCOUNTS:
        node, depth, named_secrets, account = stack.pop()
        if isinstance(node, list):
            children = node
        elif isinstance(node, Mapping):
            named_secrets = named_secrets or _names_secrets(node)
            account = _own_account(node) or account
            if isinstance(node.get("containers"), list) and not named_secrets:
                found[account or DEFAULT] = None
            children = list(node.values())
        else:
            continue
        if depth < MAX_DEPTH:
            stack.extend((child, depth + 1, named_secrets, account) for child in reversed(children))
    return list(found)


def _names_secrets(node: Mapping[str, Any]) -> bool:
    # The plugin's test is the list's length: an entry without a name still counts.
    secrets = node.get("imagePullSecrets")
    return isinstance(secrets, list) and len(secrets) > 0


def _own_account(node: Mapping[str, Any]) -> str | None:
    for key in ("serviceAccountName", "serviceAccount"):
        value = node.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def service_account_pull_secrets(account: Mapping[str, Any]) -> list[str]:
    """The names in a ServiceAccount's ``imagePullSecrets`` (as the API answers it), in order,
    each once; anything of another shape is left out."""
    items = account.get("imagePullSecrets")
    names: dict[str, None] = {}
    for item in items if isinstance(items, list) else []:
        name = item.get("name") if isinstance(item, Mapping) else None
        if isinstance(name, str) and name:
            names[name] = None
    return list(names)
