"""What ``imagecheck gate``'s controller shows about itself on ``/metrics`` and ``/healthz``
(served by ``reap_metrics.serve``). Labels are bounded by construction: an action (five
values), a verdict (the :class:`~imagecheck.result.Status` values), an API error's class.
Never a namespace, pod or image."""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge

from imagecheck.cluster._gate import Action, GatedPod, GateOutcome
from imagecheck.cluster._gate_loop import GateHooks
from imagecheck.cluster._reap_metrics import _error_class


class GateMetrics(GateHooks):
    """The loop's hooks, counted. ``healthy()``: the loop listed, or a candidate tried the
    Lease, within ``stale_after`` seconds."""

    def __init__(self, stale_after: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.registry = CollectorRegistry()
        self.stale_after = stale_after
        self.monotonic = monotonic
        self.last_beat = monotonic()
        self.last_pass: float | None = None
        reg = self.registry
        self.gated_pods = Gauge("imagecheck_gate_gated_pods",
                                "Pods carrying the gate that the controller tracks.",
                                registry=reg)  # fmt: skip
        self.oldest = Gauge("imagecheck_gate_oldest_gate_seconds",
                            "Age of the oldest tracked gated pod (from its creation).",
                            registry=reg)  # fmt: skip
        self.outcomes = Counter("imagecheck_gate_outcomes",
                                "What was done about a gated pod, by action and verdict "
                                "(kept counts every re-check).",
                                ["action", "verdict"], registry=reg)  # fmt: skip
        self.passes = Counter("imagecheck_gate_passes", "Full lists done.", registry=reg)
        self.api_errors = Counter("imagecheck_gate_api_errors",
                                  "Kubernetes API errors, by class.", ["error"],
                                  registry=reg)  # fmt: skip
        self.leader = Gauge("imagecheck_gate_leader", "1 while this replica holds the Lease.",
                            registry=reg)  # fmt: skip

    def beat(self) -> None:
        self.last_beat = self.monotonic()

    def healthy(self) -> bool:
        return self.monotonic() - self.last_beat <= self.stale_after

    def passed(self) -> None:
        self.passes.inc()
        self.last_pass = self.monotonic()
        self.beat()

    def api_error(self, error: Exception) -> None:
        self.api_errors.labels(_error_class(error)).inc()

    def gated(self, pods: dict[str, GatedPod], now: float) -> None:
        self.gated_pods.set(len(pods))
        self.oldest.set(max((now - p.since for p in pods.values()), default=0.0))

    def outcome(self, outcome: GateOutcome) -> None:
        if outcome.done and not outcome.dry_run:
            verdict = outcome.verdict.value if outcome.verdict else "none"
            self.outcomes.labels(outcome.action.value, verdict).inc()

    def leading(self, leading: bool) -> None:
        self.leader.set(1 if leading else 0)
        self.beat()


__all__ = ["Action", "GateMetrics"]
