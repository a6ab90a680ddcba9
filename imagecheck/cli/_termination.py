"""``--termination-log``: the one-line summary Kubernetes shows as a pod's termination
message, written where the kubelet mounted the file."""

from __future__ import annotations

from pathlib import Path

import click

from imagecheck._files import write_regular_file
from imagecheck.errors import UsageError


def write_termination_log(path: str, summary: str) -> None:
    """Only into a regular file that exists: Kubernetes mounts one at /dev/termination-log in
    the pod. A FIFO there would block the exit; it is refused with a warning instead."""
    target = Path(path)
    if not target.exists():
        return
    try:
        write_regular_file(
            target, (summary + "\n").encode(), what="--termination-log", error=UsageError
        )
    except UsageError as exc:
        click.echo(f"imagecheck: warning: {exc}", err=True)
