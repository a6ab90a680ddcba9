"""Running ``python -m imagecheck`` as a real subprocess, as users and pods do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.integration.conftest import RegistryEndpoint


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> list[dict[str, Any]]:
        data = json.loads(self.stdout)
        assert isinstance(data, list)
        return data


def run_cli(
    args: list[str],
    home: Path,
    *,
    stdin: str = "",
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> Run:
    """Run the CLI with a clean HOME and no DOCKER_*/IMAGECHECK_*/REGISTRY_AUTH_FILE/XDG
    variables from the outer environment, so only what the test sets is in play."""
    dropped = ("DOCKER_", "IMAGECHECK_", "REGISTRY_AUTH_FILE", "XDG_RUNTIME_DIR")
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    full_env["HOME"] = str(home)
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "imagecheck", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def tls_args(endpoint: RegistryEndpoint) -> list[str]:
    return ["--ca-file", str(endpoint.ca_file)] if endpoint.ca_file else []
