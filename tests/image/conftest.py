"""Reports each image's size at the end of the run, whether or not its size test failed."""

from __future__ import annotations

import pytest

IMAGE_SIZE_KEY = "image_size_bytes"
# record_property key -> the heading its size is printed under: one per image the tests build.
SIZE_KEYS = {
    IMAGE_SIZE_KEY: "imagecheck image",
    "webhook_image_size_bytes": "imagecheck webhook image",
    "cluster_image_size_bytes": "imagecheck cluster image",
    "multiarch_amd64_size_bytes": "imagecheck multi-arch image, linux/amd64",
    "multiarch_arm64_size_bytes": "imagecheck multi-arch image, linux/arm64",
    **{
        f"multiarch_{extra}_{arch}_size_bytes": f"imagecheck-{extra} multi-arch image, linux/{arch}"
        for extra in ("webhook", "cluster")
        for arch in ("amd64", "arm64")
    },
}
# The multi-arch layout's platforms: (uncompressed key, compressed key); the compressed size
# (the gzip layer a node downloads) is printed under the same heading.
MULTIARCH_SIZE_KEYS = {
    "linux/amd64": ("multiarch_amd64_size_bytes", "multiarch_amd64_gzip_bytes"),
    "linux/arm64": ("multiarch_arm64_size_bytes", "multiarch_arm64_gzip_bytes"),
}
# The same for the webhook and cluster images' layouts (scripts/image-build-multiarch.sh
# --webhook, --cluster).
MULTIARCH_EXTRA_SIZE_KEYS = {
    extra: {
        f"linux/{arch}": (
            f"multiarch_{extra}_{arch}_size_bytes",
            f"multiarch_{extra}_{arch}_gzip_bytes",
        )
        for arch in ("amd64", "arm64")
    }
    for extra in ("webhook", "cluster")
}
GZIP_KEYS = {
    gz: raw
    for keys in (MULTIARCH_SIZE_KEYS, *MULTIARCH_EXTRA_SIZE_KEYS.values())
    for raw, gz in keys.values()
}


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    sizes: dict[str, int] = {}
    for report in terminalreporter.getreports("passed") + terminalreporter.getreports("failed"):
        for key, value in report.user_properties:
            if key in SIZE_KEYS or key in GZIP_KEYS:
                sizes.setdefault(key, int(value))
    compressed = {GZIP_KEYS[key]: value for key, value in sizes.items() if key in GZIP_KEYS}
    for key, value in sizes.items():
        if key not in SIZE_KEYS:
            continue
        terminalreporter.write_sep("-", SIZE_KEYS[key])
        terminalreporter.write_line(f"uncompressed size: {value} bytes ({value / 1e6:.1f} MB)")
        if key in compressed:
            gz = compressed[key]
            terminalreporter.write_line(f"compressed size: {gz} bytes ({gz / 1e6:.1f} MB)")
