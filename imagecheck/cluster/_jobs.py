"""Failing a Job, as ``reap`` and ``gate`` do it: set ``spec.activeDeadlineSeconds`` (mutable)
to the Job's age. The Job controller measures the deadline from the Job's
``status.startTime`` (``pastActiveDeadline`` in pkg/controller/job/job_controller.go; never
while suspended), so a deadline at or below that age fails the Job with
``DeadlineExceeded`` at its next sync and deletes its pods. The same merge patch carries the
reason (:data:`REAPED`) and the ``resourceVersion`` read, so a Job that changed meanwhile is
refused (409), read again and judged again, rather than overwritten.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from imagecheck._text import printable
from imagecheck.cluster._fields import Malformed, Owner, is_map, mapping, parse_time, text
from imagecheck.cluster._images import MAX_REASON
from imagecheck.cluster._model import JOB, JSON, Cluster, Conflict

log = logging.getLogger("imagecheck")

# A patch refused because the Job changed is read again and retried this many times.
MAX_CONFLICT_RETRIES = 3
REAPED = "imagecheck.io/reaped"


_FINISHED = frozenset({"Complete", "Failed", "FailureTarget", "SuccessCriteriaMet"})


def job_skip_reason(job: JSON, owner: Owner, now: float) -> str | None:
    """Why this Job is to be left alone (None: fail it). Each makes the action idempotent."""
    meta = mapping(job, "metadata")
    if owner.uid and meta.get("uid") != owner.uid:
        return "its Job was replaced by another of the same name"
    text(meta, "resourceVersion")  # the patch's precondition: without it, no safe write
    annotations = mapping(meta, "annotations")
    if REAPED in annotations:
        return f"Job reaped already ({printable(annotations[REAPED], MAX_REASON)})"
    status = mapping(job, "status")
    for condition in status.get("conditions") or []:
        finished = is_map(condition) and condition.get("type") in _FINISHED
        if finished and condition.get("status") == "True":
            return f"Job finished already ({condition['type']})"
    if mapping(job, "spec").get("suspend") is True:
        return "Job is suspended (the controller deletes its pods itself)"
    if not status.get("startTime"):
        return "Job has no status.startTime yet"
    age = job_age(job, now)  # parsed here, where a bad time is a skip, not in the patch
    deadline = mapping(job, "spec").get("activeDeadlineSeconds")
    if isinstance(deadline, int) and deadline <= age:
        return "Job's activeDeadlineSeconds is already past (the controller is failing it)"
    return None


def job_age(job: JSON, now: float) -> int:
    """Whole seconds since the Job's ``status.startTime``: at least 1, the smallest deadline
    the API accepts."""
    started = parse_time(mapping(job, "status").get("startTime"))
    return max(1, int(now - started))


def fail_patch(job: JSON, now: float, reason: str) -> dict[str, Any]:
    """The merge patch that fails ``job`` now, recording ``reason``; refused by the API if the
    Job changed since it was read."""
    meta = mapping(job, "metadata")
    return {
        "metadata": {
            "resourceVersion": meta.get("resourceVersion"),
            "annotations": {REAPED: reason},
        },
        "spec": {"activeDeadlineSeconds": job_age(job, now)},
    }


async def fail_job(
    cluster: Cluster,
    job: JSON,
    namespace: str,
    owner: Owner,
    reason: str,
    clock: Callable[[], float],
) -> JSON | str:
    """Patch the Job to fail; a Job that changed meanwhile is read again and judged again.
    The Job as patched, else why it was left alone."""
    name = owner.name
    for _ in range(MAX_CONFLICT_RETRIES + 1):
        try:
            job = await cluster.patch(JOB, namespace, name, fail_patch(job, clock(), reason))
            break
        except Conflict:
            fresh = await cluster.get(JOB, namespace, name)
            if fresh is None:
                return "its Job is gone"
            try:
                skip = job_skip_reason(fresh, owner, clock())
            except Malformed as exc:
                return f"its Job is malformed: {exc}"
            if skip:
                return skip
            job = fresh
    else:
        return f"its Job changed {MAX_CONFLICT_RETRIES + 1} times while being patched"
    log.info("failed Job %s/%s: %s", namespace, name, reason)
    return job
