"""The webhook's defaults for hostile clients and big reviews, in a module without
the webhook extra's imports, so that the CLI can show them before it loads aiohttp."""

# How long a client may take over its TLS handshake, a request's headers, and its body.
DEFAULT_READ_TIMEOUT = 5.0
# Connections open at once: each costs up to about 0.5 MiB (asyncio's TLS buffer is 256 KiB).
DEFAULT_MAX_CONNECTIONS = 250
# Distinct images checked per review; the rest are refused as not checked.
DEFAULT_MAX_IMAGES = 100
