"""Reports the image's size at the end of the run, whether or not the size test failed."""

from __future__ import annotations

import pytest

IMAGE_SIZE_KEY = "image_size_bytes"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for report in terminalreporter.getreports("passed") + terminalreporter.getreports("failed"):
        for key, value in report.user_properties:
            if key == IMAGE_SIZE_KEY:
                terminalreporter.write_sep("-", "imagecheck image")
                terminalreporter.write_line(
                    f"uncompressed size: {value} bytes ({int(value) / 1e6:.1f} MB)"
                )
                return
