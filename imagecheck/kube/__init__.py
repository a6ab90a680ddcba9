"""Kubernetes objects: where a workload keeps its images and pull secrets, and the pod
this process runs in, read from inside the cluster.

The walk of a pod spec knows the shapes of containers rather than a table of kinds, so a
custom resource that embeds a pod template is read like a Deployment.
"""

from __future__ import annotations

from imagecheck._lazy import lazy_face

TYPE_CHECKING = False  # typing's, without importing typing: checkers treat the name as true

_EXPORTS = {
    "CORE_GROUPS": "imagecheck.kube._workload",
    "InCluster": "imagecheck.kube._incluster",
    "JSON": "imagecheck.kube._workload",
    "KubeClient": "imagecheck.kube._incluster",
    "api_group": "imagecheck.kube._workload",
    "dockerconfig_text": "imagecheck.kube._incluster",
    "pull_secrets": "imagecheck.kube._workload",
    "service_account_pull_secrets": "imagecheck.kube._serviceaccount",
    "service_accounts": "imagecheck.kube._serviceaccount",
}

if TYPE_CHECKING:
    from imagecheck.kube._incluster import InCluster, KubeClient, dockerconfig_text
    from imagecheck.kube._serviceaccount import service_account_pull_secrets, service_accounts
    from imagecheck.kube._workload import CORE_GROUPS, JSON, api_group, pull_secrets

if not TYPE_CHECKING:  # hidden from checkers, which would take any misspelt name for it
    __getattr__, __dir__ = lazy_face(__name__, _EXPORTS, globals())


__all__ = [
    "CORE_GROUPS",
    "JSON",
    "InCluster",
    "KubeClient",
    "api_group",
    "dockerconfig_text",
    "pull_secrets",
    "service_account_pull_secrets",
    "service_accounts",
]
