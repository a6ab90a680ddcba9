"""Reports each image's size at the end of the run, whether or not its size test failed."""

from __future__ import annotations

import pytest

IMAGE_SIZE_KEY = "image_size_bytes"
# record_property key -> the heading its size is printed under: one per image the tests build.
SIZE_KEYS = {
    IMAGE_SIZE_KEY: "imagecheck image",
    "webhook_image_size_bytes": "imagecheck webhook image",
    "cluster_image_size_bytes": "imagecheck cluster image",
}


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    sizes: dict[str, int] = {}
    for report in terminalreporter.getreports("passed") + terminalreporter.getreports("failed"):
        for key, value in report.user_properties:
            if key in SIZE_KEYS:
                sizes.setdefault(key, int(value))
    for key, value in sizes.items():
        terminalreporter.write_sep("-", SIZE_KEYS[key])
        terminalreporter.write_line(f"uncompressed size: {value} bytes ({value / 1e6:.1f} MB)")
