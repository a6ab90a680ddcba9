"""Leader election over a ``coordination.k8s.io/v1`` Lease, as client-go's
``tools/leaderelection`` does it, so that of ``imagecheck reap``'s replicas one acts.

Each candidate, every ``retry`` seconds, reads the Lease and:

* creates it, holding it, when there is none;
* takes it when its holder is empty (released) or has not renewed it for the Lease's
  ``leaseDurationSeconds`` *as measured on this candidate's own clock*: like client-go, the
  time is when this candidate last saw the record change, never the holder's ``renewTime``,
  so clock skew between nodes cannot make a live Lease look expired;
* renews it when it holds it (``renewTime``; ``acquireTime`` and ``leaseTransitions`` change
  only when the holder does).

Every write is a PUT carrying the ``resourceVersion`` read, so of two candidates racing for an
expired Lease one wins and the other's write is refused (409 :class:`Conflict`: it lost this
round). The leader that has not renewed for ``renew_deadline`` (10 s, under the 15 s others wait)
stops acting at once: its work is cancelled before another can take over. On a clean stop
the Lease is released (holder emptied) so a successor need not wait out the 15 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from imagecheck.cluster._model import JSON, LEASE, AlreadyExists, Cluster, ClusterError, Conflict

log = logging.getLogger("imagecheck")

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True)
class LeaseConfig:
    """The Lease and the timings (client-go's names; its defaults, but a 5 s retry)."""

    name: str
    namespace: str
    identity: str
    duration: float = 15.0  # leaseDurationSeconds: how long others wait for a silent holder
    renew_deadline: float = 10.0  # the leader gives up when it has not renewed for this long
    retry: float = 5.0  # between attempts to acquire or renew


def identity() -> str:
    """``<pod name>_<random>``: the pod's name (``POD_NAME``, else the hostname, which is the
    pod's name in a pod) says who leads; the suffix keeps a restarted container from
    mistaking its predecessor's Lease for its own."""
    name = os.environ.get("POD_NAME") or socket.gethostname() or "imagecheck"
    return f"{name}_{secrets.token_hex(4)}"


def own_namespace() -> str:
    """The pod's namespace (``POD_NAMESPACE``, else the service account's), else "default"."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    with contextlib.suppress(OSError, UnicodeDecodeError):
        text = SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip()
        if text:
            return text
    return "default"


class Elector:
    """Runs work while it holds the Lease. ``on_change(leading)`` hears every change."""

    def __init__(
        self,
        cluster: Cluster,
        config: LeaseConfig,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        on_change: Callable[[bool], None] | None = None,
        on_round: Callable[[], None] | None = None,
        on_error: Callable[[ClusterError], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.config = config
        self.clock = clock
        self.monotonic = monotonic
        self.on_change = on_change
        self.on_round = on_round  # each round the API answered (a follower's sign of life)
        self.on_error = on_error  # each API error (not a lost race): the loop's api_errors
        self.leading = False
        self._observed: Any = None  # the Lease's spec as last seen
        self._observed_at = 0.0  # when (monotonic) it was seen to change

    async def try_acquire_or_renew(self) -> bool:
        """One round: True when this candidate holds the Lease afterwards."""
        cfg = self.config
        try:
            lease = await self.cluster.get(LEASE, cfg.namespace, cfg.name)
            if lease is None:
                created = await self.cluster.create(LEASE, cfg.namespace, self._body(None))
                self._observe(created)
                self._answered()
                return True
            self._observe(lease)
            if not self._may_take(lease):
                self._answered()
                return False
            renewed = await self.cluster.replace(LEASE, cfg.namespace, cfg.name, self._body(lease))
        except (Conflict, AlreadyExists):
            self._answered()
            return False  # another candidate wrote first: it won this round
        except ClusterError as exc:
            self._error(exc)
            log.warning("leader election: lease %s/%s: %s", cfg.namespace, cfg.name, exc)
            return False
        self._observe(renewed)
        self._answered()
        return True

    def _answered(self) -> None:
        if self.on_round is not None:
            self.on_round()

    def _error(self, error: ClusterError) -> None:
        if self.on_error is not None:
            self.on_error(error)

    async def run(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Acquire, run ``work`` while leading, and stop it the moment leadership is lost;
        then try again. Returns (or raises) when ``work`` does."""
        try:
            while True:
                while not await self.try_acquire_or_renew():
                    await asyncio.sleep(self.config.retry)
                task = asyncio.create_task(work())
                self._set(True)
                try:
                    await self._renew_while(task)
                finally:
                    self._set(False)
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
                if task.done() and not task.cancelled():
                    task.result()  # the work's own error, if it ended with one
                    return
        finally:
            await self.release()

    async def _renew_while(self, task: asyncio.Task[None]) -> None:
        """Renew every ``retry`` seconds until ``task`` ends or no renewal has succeeded
        for ``renew_deadline`` (each attempt cut off at that deadline)."""
        renewed = self.monotonic()
        while not task.done():
            await asyncio.wait({task}, timeout=self.config.retry)
            if task.done():
                return
            left = renewed + self.config.renew_deadline - self.monotonic()
            ok = False
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(left, 0.001)):
                    ok = await self.try_acquire_or_renew()
            if ok:
                renewed = self.monotonic()
            elif self._taken() or self.monotonic() - renewed >= self.config.renew_deadline:
                log.warning("leader election: lost lease %s", self.config.name)
                return

    def led(self) -> bool:
        """Some candidate holds the Lease, seen renewed (on this candidate's own clock)
        within the Lease's duration: a controller is acting, whichever replica it is."""
        observed = self._observed or {}
        duration = observed.get("leaseDurationSeconds")
        if not isinstance(duration, int) or duration <= 0:
            duration = self.config.duration
        fresh = self.monotonic() - self._observed_at < duration
        return bool(observed.get("holderIdentity")) and fresh

    def _taken(self) -> bool:
        """Another candidate holds the Lease now (seen, not guessed)."""
        holder = (self._observed or {}).get("holderIdentity")
        return bool(holder) and holder != self.config.identity

    async def release(self) -> None:
        """Give the Lease up (holder emptied), so a successor takes it without waiting."""
        cfg = self.config
        if self._observed is None or self._observed.get("holderIdentity") != cfg.identity:
            return
        try:
            lease = await self.cluster.get(LEASE, cfg.namespace, cfg.name)
            if lease is not None and _spec(lease).get("holderIdentity") == cfg.identity:
                body = self._body(lease)
                body["spec"].update(holderIdentity="", leaseDurationSeconds=1)
                await self.cluster.replace(LEASE, cfg.namespace, cfg.name, body)
        except ClusterError as exc:
            # Not released: a successor waits out the Lease's duration instead.
            self._error(exc)
            log.warning(
                "leader election: lease %s/%s not released: %s", cfg.namespace, cfg.name, exc
            )
        self._observed = None

    def _may_take(self, lease: JSON) -> bool:
        spec = _spec(lease)
        holder = spec.get("holderIdentity")
        if not holder or holder == self.config.identity:
            return True
        duration = spec.get("leaseDurationSeconds")
        if not isinstance(duration, int) or isinstance(duration, bool) or duration <= 0:
            duration = self.config.duration
        return self.monotonic() >= self._observed_at + duration

    def _observe(self, lease: JSON) -> None:
        spec = dict(_spec(lease))
        if spec != self._observed:
            self._observed = spec
            self._observed_at = self.monotonic()

    def _body(self, lease: JSON | None) -> JSON:
        """The Lease held by this candidate from now: a new one, or ``lease`` taken/renewed."""
        now = _micro_time(self.clock())
        old = _spec(lease) if lease is not None else {}
        kept = old.get("holderIdentity") == self.config.identity
        transitions = old.get("leaseTransitions")
        transitions = transitions if isinstance(transitions, int) else 0
        spec = {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": int(self.config.duration),
            "acquireTime": old.get("acquireTime") if kept else now,
            "renewTime": now,
            "leaseTransitions": transitions if kept or lease is None else transitions + 1,
        }
        meta: dict[str, Any] = {"name": self.config.name, "namespace": self.config.namespace}
        if lease is not None:
            meta["resourceVersion"] = (lease.get("metadata") or {}).get("resourceVersion")
        return {"apiVersion": LEASE.api_version, "kind": LEASE.kind, "metadata": meta, "spec": spec}

    def _set(self, leading: bool) -> None:
        if leading != self.leading:
            self.leading = leading
            log.info(
                "leader election: %s lease %s",
                "holding" if leading else "not holding",
                self.config.name,
            )
            if self.on_change is not None:
                self.on_change(leading)


def _spec(lease: JSON) -> dict[str, Any]:
    """The Lease's spec; an empty one (free to take) when it is not an object."""
    spec = lease.get("spec")
    return spec if isinstance(spec, dict) else {}


def _micro_time(seconds: float) -> str:
    """A MicroTime, as the API writes it: ``2026-12-03T09:00:00.000000Z``."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
