"""What the webhook shows about itself: Prometheus metrics and JSON log lines."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.reviews = Counter(
            "imagecheck_reviews",
            "Admission reviews by outcome.",
            ["result"],
            registry=self.registry,
        )
        self.registry_requests = Counter(
            "imagecheck_registry_requests",
            "Requests to registries and token services, by kind and HTTP status.",
            ["kind", "status"],
            registry=self.registry,
        )
        self.cache = Counter(
            "imagecheck_cache_lookups", "Result cache lookups.", ["hit"], registry=self.registry
        )
        self.latency = Histogram(
            "imagecheck_review_duration_seconds",
            "Time to answer an admission review.",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )
        self.connections = Gauge(
            "imagecheck_connections", "Client connections open.", registry=self.registry
        )
        self.connections_closed = Counter(
            "imagecheck_connections_closed",
            "Client connections the server closed: refused or evicted at --max-connections, "
            "headers or body not received within --read-timeout.",
            ["reason"],
            registry=self.registry,
        )
        self.not_checked = Counter(
            "imagecheck_images_not_checked",
            "Images refused unchecked: over --max-images-per-review, or queued past the deadline.",
            registry=self.registry,
        )
        # Labelled series, once made (``labels()`` takes a lock and builds a key each time:
        # a warm review counts four of them).
        self._series: dict[tuple[Counter, str], Any] = {}

    def count(self, counter: Counter, label: str, amount: int = 1) -> None:
        """Add ``amount`` to ``counter``'s series for ``label`` (a metric with one label)."""
        series = self._series.get((counter, label))
        if series is None:
            series = self._series[counter, label] = counter.labels(label)
        series.inc(amount)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, message, and any ``extra`` fields."""

    _plain = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}

    def __init__(self) -> None:
        super().__init__()
        self._second = (-1, "")  # the last second formatted, and its text

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": f"{self._time(int(record.created))}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update({k: v for k, v in record.__dict__.items() if k not in self._plain})
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)

    def _time(self, second: int) -> str:
        """``second`` as ISO 8601 UTC text (a line a review: made once a second, not each)."""
        if self._second[0] != second:
            self._second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
        return self._second[1]


def lean_records() -> None:
    """Stop ``logging`` from finding each record's caller (a walk of the stack), thread and
    process (the "Optimization" section of the logging HOWTO): :class:`JsonFormatter` writes
    none of them, and a warm review's log line cost about a quarter more with them."""
    logging._srcfile = None  # the documented switch
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
