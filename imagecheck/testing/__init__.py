"""Test helpers shipped with imagecheck: a real local registry and images to fill it with.

Used by the integration tests, the benchmarks and ``python -m imagecheck.testing.demo``.
Stdlib and httpx only, so importing this never needs the test extras.
"""

from imagecheck.testing.images import PushedManifest, SampleImages, seed_many, seed_samples
from imagecheck.testing.registry import (
    LocalRegistry,
    TLSFiles,
    TokenAuthSettings,
    find_registry_binary,
)

__all__ = [
    "LocalRegistry",
    "PushedManifest",
    "SampleImages",
    "TLSFiles",
    "TokenAuthSettings",
    "find_registry_binary",
    "seed_many",
    "seed_samples",
]
