"""The webhook's defaults for hostile clients and big reviews, in a module without
the webhook extra's imports, so that the CLI can show them before it loads aiohttp."""

# How long a client may take over its TLS handshake, a request's headers, and its body.
DEFAULT_READ_TIMEOUT = 5.0
# Connections open at once: an idle TLS one costs about 0.06 MiB, one whose client never reads
# its answers about 1.2 MiB (benchmarks/webhook_attack.py).
DEFAULT_MAX_CONNECTIONS = 250
# Distinct images checked per review; the rest are refused as not checked.
DEFAULT_MAX_IMAGES = 100
# AdmissionReviews carry the whole object; etcd stores objects up to 1.5 MiB.
MAX_REVIEW_BYTES = 3 * 1024 * 1024
