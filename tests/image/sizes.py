"""The images' size limits and the keys their sizes are recorded under (``record_property``),
which the conftest prints at the end of the run."""

from __future__ import annotations

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

# Measured 36.0 MB (36,004,864 bytes; 15.9 MB as the gzip layer a registry stores): the
# default image (25.1 MB) plus 10.4 MB of files: lightkube 2.1, httpx2 and msgspec 2.2,
# aiohttp and prometheus-client 3.8, libstdc++ and libgcc_s 2.3 (frozenlist loads them;
# docker/README.md has the table). A tenth of headroom, as for the other two images: a new
# dependency has to be noticed.
CLUSTER_MAX_SIZE = 40_000_000


WEBHOOK_MAX_SIZE = 45_000_000
