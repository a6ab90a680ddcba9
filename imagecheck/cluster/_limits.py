"""``imagecheck audit --serve``'s defaults, in a module without the cluster extra's imports,
so that the CLI can show them before it loads aiohttp and prometheus_client."""

# From one audit's start to the next. k8s-image-availability-exporter's --check-interval was
# 5m as well (1m since, but each tick checks a batch of images, not all of them).
DEFAULT_INTERVAL = 300.0
MAX_INTERVAL = 7 * 24 * 3600.0
# The exporter's --bind-address default.
DEFAULT_LISTEN = "0.0.0.0:8080"
# Seven series (one per outcome) a workload container: some 14,000 containers, a page of tens
# of megabytes, about as much as a scrape should wait for (exporter.py's collector renders it).
# Past it, the found images are left out.
DEFAULT_MAX_SERIES = 100_000
