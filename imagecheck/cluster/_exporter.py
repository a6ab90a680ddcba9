"""``imagecheck audit --serve``'s metrics: each workload container's image, available or not,
in k8s-image-availability-exporter's names.

k8s-image-availability-exporter (github.com/deckhouse/k8s-image-availability-exporter, once
flant/) exports, per (namespace, container, image, kind, name), one gauge per outcome,
``k8s_image_availability_exporter_<outcome>``: 1 for the outcome of the last check, 0 for the
others. Its alerts (``k8s_image_availability_exporter_available{kind="deployment"} == 0``)
and dashboards read those names and labels, so these are the same; where imagecheck's answers
map onto its outcomes loosely, the reap and audit guide (docs/guides/reap-audit.md) says how
and why.

The series are built at each scrape from the last good audit's snapshot (a custom collector,
as the exporter's own Go collector is): a workload or image gone at the next audit is gone
from the page, with nothing to unregister, and a failed audit leaves the snapshot as it was.
A snapshot holds at most ``max_series`` series; the rest are left out with a log line, the
found images first (alerts are about the others).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from imagecheck.cluster._audit import AuditReport
from imagecheck.cluster._limits import DEFAULT_MAX_SERIES
from imagecheck.result import Status

log = logging.getLogger("imagecheck.audit")

PREFIX = "k8s_image_availability_exporter"
# The exporter's outcomes, each a metric name after PREFIX, and what it says (its README's).
OUTCOMES = {
    "available": "1: the image was found in its registry at the last audit.",
    "absent": "1: the registry says the image's manifest does not exist.",
    "bad_image_format": "1: the image field is not a valid image reference.",
    "registry_unavailable": "1: the registry could not be reached, or failed, after retries.",
    "authentication_failure": "Always 0: imagecheck reports a refusal as authorization_failure.",
    "authorization_failure": "1: the registry refused the credentials offered (pull secrets, "
    "then the local credentials).",
    "unknown_error": "1: the image was not checked (an audit's bug; see the log).",
}
# imagecheck's statuses onto those outcomes. DENIED does not tell a 401 from a 403, so it is
# one outcome; ERROR is network, 5xx, 429 or a broken protocol.
OUTCOME = {
    Status.FOUND: "available",
    Status.MISSING: "absent",
    Status.INVALID: "bad_image_format",
    Status.ERROR: "registry_unavailable",
    Status.DENIED: "authorization_failure",
}
LABELS = ("namespace", "container", "image", "kind", "name")

Row = tuple[tuple[str, str, str, str, str], str]  # the labels, the outcome


class AvailabilityCollector(Collector):
    """The ``k8s_image_availability_exporter_<outcome>`` gauges of the last good audit."""

    def __init__(self, max_series: int = DEFAULT_MAX_SERIES) -> None:
        self.max_series = max_series
        self._rows: tuple[Row, ...] = ()

    def update(self, report: AuditReport) -> int:
        """Replace the snapshot with ``report``'s; the number of series left out."""
        rows = rows_of(report)
        room = self.max_series // len(OUTCOMES)
        dropped = 0
        if len(rows) > room:
            # Stable: the not-found first, each group still sorted (namespace, kind, name).
            rows.sort(key=lambda row: row[1] == "available")
            dropped = (len(rows) - room) * len(OUTCOMES)
            log.warning("metrics: %d of %d workload containers left out (%d series over "
                        "--max-series %d), found images first", len(rows) - room, len(rows),
                        dropped, self.max_series)  # fmt: skip
            del rows[room:]
        self._rows = tuple(rows)  # one assignment: a scrape in another thread sees either
        return dropped

    def collect(self) -> Iterator[Metric]:
        rows = self._rows
        for outcome, help_text in OUTCOMES.items():
            family = GaugeMetricFamily(f"{PREFIX}_{outcome}", help_text, labels=LABELS)
            for labels, actual in rows:
                family.add_metric(labels, 1.0 if actual == outcome else 0.0)
            yield family


def rows_of(report: AuditReport) -> list[Row]:
    """One row per distinct (namespace, container, image, kind, name) of ``report``."""
    rows: dict[tuple[str, str, str, str, str], str] = {}
    for use in report.uses:
        result = report.results.get(use.image)
        outcome = OUTCOME[result.status] if result else "unknown_error"
        # The exporter's kind label is lower case ("deployment"), as are its alert rules.
        rows[(use.namespace, use.container, use.image, use.kind.lower(), use.name)] = outcome
    return list(rows.items())


class AuditMetrics:
    """Everything ``/metrics`` shows: the availability gauges and how the audits went."""

    def __init__(self, max_series: int = DEFAULT_MAX_SERIES) -> None:
        self.registry = CollectorRegistry()
        self.availability = AvailabilityCollector(max_series)
        self.registry.register(self.availability)
        # The exporter's own name for a finished round of checks.
        self.completed = Counter(
            f"{PREFIX}_completed_rechecks", "Audits completed.", registry=self.registry
        )
        self.failures = Counter(
            "imagecheck_audit_failures",
            "Audits that failed (the Kubernetes API unreachable or refusing a list); the "
            "availability gauges keep the last good audit's values.",
            registry=self.registry,
        )
        self.last_failed = Gauge(
            "imagecheck_audit_last_failed",
            "1 when the last audit failed: the availability gauges are from an earlier one.",
            registry=self.registry,
        )
        self.last_success = Gauge(
            "imagecheck_audit_last_success_timestamp_seconds",
            "When the last good audit ended (Unix time); 0: none yet.",
            registry=self.registry,
        )
        self.duration = Gauge(
            "imagecheck_audit_duration_seconds", "How long the last audit took.",
            registry=self.registry,
        )  # fmt: skip
        self.dropped = Gauge(
            "imagecheck_audit_series_dropped",
            "Availability series the last good audit left out, over --max-series.",
            registry=self.registry,
        )
        self.skipped = Gauge(
            "imagecheck_audit_objects_skipped",
            "Malformed objects and containers the last good audit skipped (each logged).",
            registry=self.registry,
        )

    def succeeded(self, report: AuditReport, seconds: float, now: float) -> None:
        self.dropped.set(self.availability.update(report))
        self.skipped.set(report.skipped)
        self.completed.inc()
        self.last_failed.set(0)
        self.last_success.set(now)
        self.duration.set(seconds)

    def failed(self, seconds: float) -> None:
        self.failures.inc()
        self.last_failed.set(1)
        self.duration.set(seconds)
