"""One pass of ``imagecheck kueue-check`` over a :class:`~imagecheck.cluster._model.Cluster`:
our AdmissionChecks made Active, then every Workload waiting on one of them judged
(``kueue.py`` decides) and its check's state written through the status subresource.

A pod set's images are checked with the credentials its pods will have: the template's
``imagePullSecrets``, else its ServiceAccount's (in the Workload's namespace), then the
command's own sources (the kubelet's credential providers, the cloud identity), as ``reap``
and ``serve`` order them. Each distinct (image, secrets) is asked once a Workload.

The wait for a missing image is measured from the check's *first look*: kept in memory (a
bounded map), and after a restart taken from the entry's ``lastTransitionTime`` when it is
``Retry`` (set at the first look that found an image missing). A check Kueue reset to Pending
after a restart starts the wait again: a Workload is rejected late, never early.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from imagecheck.authn import Keychain
from imagecheck.cluster._fields import Malformed, now, parse_time
from imagecheck.cluster._images import ImagePass
from imagecheck.cluster._kueue import (
    CONTROLLER_NAME,
    Decision,
    OnError,
    PodSet,
    State,
    active_patch,
    decide,
    open_checks,
    ours,
    pod_sets,
    state_patch,
)
from imagecheck.cluster._model import (
    ADMISSION_CHECK,
    JSON,
    SERVICEACCOUNT,
    WORKLOAD,
    Cluster,
    Conflict,
    Forbidden,
    Selector,
)
from imagecheck.cluster._secrets import KeychainFor
from imagecheck.kube import service_account_pull_secrets
from imagecheck.registry import ImageChecker
from imagecheck.result import CheckResult, Status

log = logging.getLogger("imagecheck")

MAX_CONFLICT_RETRIES = 3
MAX_TRACKED = 10_000  # first looks remembered; beyond, a wait starts at each look


@dataclass(frozen=True)
class KueueOptions:
    controller_name: str = CONTROLLER_NAME
    wait: float = 600.0
    on_error: OnError = OnError.PASS
    dry_run: bool = False
    namespace: str | None = None
    deadline: float = 60.0  # seconds for one image's check, retries included
    max_tracked: int = MAX_TRACKED


@dataclass(frozen=True, slots=True)
class Outcome:
    """What was done about one check of one Workload, and why: one line of output."""

    namespace: str
    workload: str
    check: str
    previous: str
    state: str  # the state set (or that would be, with dry_run)
    why: str
    verdict: Status
    written: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "workload": self.workload,
            "check": self.check,
            "previous": self.previous,
            "state": self.state,
            "verdict": self.verdict.value,
            "written": self.written,
            "why": self.why,
        }

    def text(self) -> str:
        done = "set" if self.written else "would set" if self.state != self.previous else "kept"
        return (
            f"{done} {self.check} {self.state}: workload {self.namespace}/{self.workload}: "
            f"{self.why}"
        )


class KueueChecker(ImagePass[KueueOptions]):
    """Runs passes; one per process (it keeps first looks, and what RBAC refused)."""

    def __init__(
        self,
        cluster: Cluster,
        checker: ImageChecker,
        options: KueueOptions,
        *,
        keychain_for: KeychainFor | None = None,
        clock: Callable[[], float] = now,
    ) -> None:
        super().__init__(cluster, checker, options, keychain_for=keychain_for, clock=clock)
        self.checks: set[str] = set()  # our AdmissionChecks' names
        self.first_look: dict[tuple[str, str], float] = {}
        self.account_refused = False

    async def run_once(self) -> list[Outcome]:
        """Our checks made Active, then every Workload waiting on one judged."""
        await self.refresh_checks()
        outcomes: list[Outcome] = []
        async for workload in self.cluster.list(WORKLOAD, Selector(self.options.namespace)):
            outcomes += await self.judge(workload)
        return outcomes

    async def refresh_checks(self) -> str:
        """Our AdmissionChecks listed (``checks``), each made Active when it is not yet; the
        list's resourceVersion, to watch from."""
        names: set[str] = set()
        listing = self.cluster.snapshot(ADMISSION_CHECK)
        async for check in listing:
            await self.admission_check(check)
            if ours(check, self.options.controller_name):
                names.add(check["metadata"]["name"])
        self.checks = names
        return listing.resource_version

    async def admission_check(self, check: JSON) -> None:
        """Keep an AdmissionCheck of ours Active (left alone with dry_run)."""
        if not ours(check, self.options.controller_name):
            return
        patch = active_patch(check, self.clock())
        if patch is None or self.options.dry_run:
            return
        name = check["metadata"]["name"]
        try:
            await self.cluster.patch(ADMISSION_CHECK, "", name, patch, status=True)
            log.info("admission check %s: Active", name)
        except Conflict:  # changed meanwhile: the watch brings the new one, judged again
            log.info("admission check %s changed while being made Active", name)

    async def judge(self, workload: JSON) -> list[Outcome]:
        """Each of our open checks on ``workload`` given its state; [] when it has none."""
        waiting = open_checks(workload, self.checks)
        if not waiting:
            return []
        results = await self._results(workload)
        return [await self._set(workload, name, results) for name in sorted(waiting)]

    async def _set(self, workload: JSON, name: str, results: list[CheckResult]) -> Outcome:
        meta = workload["metadata"]
        key = (str(meta.get("uid") or meta.get("name")), name)
        entry = open_checks(workload, [name])[name]
        waited = self.clock() - self._first_look(key, entry)
        decision = decide(results, waited, self.options.wait, self.options.on_error)
        if decision.state is not State.RETRY:
            self.first_look.pop(key, None)
        said = _Said(meta.get("namespace", ""), meta["name"], name, entry.get("state", ""))
        if self.options.dry_run:
            return said(decision, written=False)
        written = await self._write(workload, name, decision)
        return said(decision, written=written)

    def _first_look(self, key: tuple[str, str], entry: Mapping[str, Any]) -> float:
        if key in self.first_look:
            return self.first_look[key]
        look = self.clock()
        if entry.get("state") == State.RETRY:
            with contextlib.suppress(Malformed):
                look = min(look, parse_time(entry.get("lastTransitionTime")))
        if len(self.first_look) < self.options.max_tracked:
            self.first_look[key] = look
        return look

    async def _write(self, workload: JSON, name: str, decision: Decision) -> bool:
        """Patch the check's state; a Workload that changed meanwhile is read again (and left
        alone once the check is no longer open). True when written."""
        meta = workload["metadata"]
        namespace, wl_name = meta.get("namespace", ""), meta["name"]
        for _ in range(MAX_CONFLICT_RETRIES + 1):
            patch = state_patch(workload, name, decision.state, decision.message, self.clock())
            if patch is None:
                return False
            try:
                await self.cluster.patch(WORKLOAD, namespace, wl_name, patch, status=True)
            except Conflict:
                fresh = await self.cluster.get(WORKLOAD, namespace, wl_name)
                if fresh is None or name not in open_checks(fresh, [name]):
                    return False
                workload = fresh
                continue
            log.info("workload %s/%s: check %s %s: %s", namespace, wl_name, name,
                     decision.state.value, decision.message)  # fmt: skip
            return True
        log.warning("workload %s/%s changed %d times while being patched", namespace, wl_name,
                    MAX_CONFLICT_RETRIES + 1)  # fmt: skip
        return False

    async def _results(self, workload: JSON) -> list[CheckResult]:
        """The registry's answer for each image of each pod set, each (image, secrets) once."""
        namespace = workload["metadata"].get("namespace", "")
        done: dict[tuple[str, tuple[str, ...]], CheckResult] = {}
        for pod_set in pod_sets(workload):
            secrets = await self._secret_names(namespace, pod_set)
            keychain: Keychain | None = None
            for image in pod_set.images:
                if (image, secrets) in done:
                    continue
                if keychain is None and secrets:
                    where = f"workload {workload['metadata']['name']} pod set {pod_set.name}"
                    keychain = await self.keychains.for_secrets(namespace, secrets, where)
                done[(image, secrets)] = await self.check(image, keychain)
        return list(done.values())

    async def _secret_names(self, namespace: str, pod_set: PodSet) -> tuple[str, ...]:
        """The template's pull secrets, else its ServiceAccount's (as the pods will get)."""
        if pod_set.pull_secrets or pod_set.service_account is None or self.account_refused:
            return pod_set.pull_secrets
        try:
            account = await self.cluster.get(SERVICEACCOUNT, namespace, pod_set.service_account)
        except Forbidden as exc:
            self.account_refused = True
            log.warning("%s: ServiceAccounts' pull secrets are not used", exc)
            return ()
        return tuple(service_account_pull_secrets(account)) if account else ()


@dataclass(frozen=True)
class _Said:
    namespace: str
    workload: str
    check: str
    previous: str

    def __call__(self, decision: Decision, *, written: bool) -> Outcome:
        return Outcome(
            self.namespace,
            self.workload,
            self.check,
            self.previous,
            decision.state.value,
            decision.message,
            decision.verdict,
            written,
        )
