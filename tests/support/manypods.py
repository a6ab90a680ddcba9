"""A cluster of many pods, made as they are listed (issue #15's 10,000): the pods are never
held by the fake, so what a pass keeps is all that memory shows. Shared by the unit test of
reap's caps and ``benchmarks/reap_scale.py``."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

from imagecheck.cluster import Selector
from imagecheck.cluster._model import JOB, JSON, Kind
from tests.support.fakecluster import FakeCluster
from tests.support.reapcase import FOUND, MISSING, job, pod


class ManyPods(FakeCluster):
    """``pods`` pods listed, of which ``stuck`` (spread evenly) wait on an image pull, each
    owned by its own Job (stored: a Job is read only for a stuck pod past its grace); every
    third stuck pod's image exists, the others' are missing. The rest run, owned by a
    ReplicaSet, each about as large as a real pod's JSON (labels, env, status)."""

    def __init__(self, pods: int, stuck: int) -> None:
        super().__init__()
        self.pods = pods
        self.every = max(1, pods // stuck) if stuck else pods + 1
        self.stuck = min(stuck, pods)
        for n in range(self.stuck):
            self.add(JOB, job(f"job-{n}", cron=None))

    async def list(self, kind: Kind, selector: Selector = Selector()) -> AsyncIterator[JSON]:  # noqa: B008
        if kind.plural != "pods":
            async for obj in super().list(kind, selector):
                yield obj
            return
        self._check("list", kind, selector.namespace)
        for i in range(self.pods):
            n, rest = divmod(i, self.every)
            yield self.stuck_pod(n) if rest == 0 and n < self.stuck else running_pod(i)

    def stuck_pod(self, n: int) -> JSON:
        image = FOUND if n % 3 == 2 else MISSING
        return pod(f"job-{n}-abcde", image, owner=("Job", f"job-{n}", f"uid-job-{n}"))


_RUNNING = pod("web", FOUND, owner=("ReplicaSet", "web-5d8f", "uid-rs"))
_RUNNING["metadata"]["labels"] = {"app": "web", "pod-template-hash": "5d8f", "tier": "frontend"}
_RUNNING["spec"]["containers"][0]["env"] = [
    {"name": f"VAR_{k}", "value": "x" * 40} for k in range(8)
]
_RUNNING["status"]["containerStatuses"][0]["state"] = {
    "running": {"startedAt": "2026-12-01T00:00:00Z"}
}


def running_pod(i: int) -> dict[str, Any]:
    """A running pod (~1.5 KB of JSON), fresh each time as the API's decoder would make it."""
    made = copy.deepcopy(_RUNNING)
    made["metadata"].update(name=f"web-5d8f-{i:05d}", uid=f"uid-web-{i}")
    return made
