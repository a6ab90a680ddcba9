"""Show imagecheck against a real local registry: ``make demo`` (``python scripts/demo.py``).

Starts a no-auth ``docker-registry`` on 127.0.0.1 in a temporary directory, pushes the sample
images, runs the ``imagecheck`` CLI as a subprocess for an image that exists, one that does
not, and both at once as JSON, and prints each command line with its exit code.

Runs from a checkout (it uses the test support in ``tests/support``, which is not installed).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

if not __package__:  # run as `python scripts/demo.py`: make `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.images import seed_samples
from tests.support.registry import LocalRegistry, find_registry_binary

# The checkout's root: where `tests.support` lives, and the imagecheck the child must import.
ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    binary = find_registry_binary()
    if binary is None:
        print(
            "docker-registry not found; install it with: apt-get install docker-registry",
            file=sys.stderr,
        )
        return 2
    with (
        tempfile.TemporaryDirectory(prefix="imagecheck-demo-") as tmp,
        LocalRegistry(Path(tmp), binary=binary) as registry,
    ):
        with httpx.Client(timeout=10.0, trust_env=False) as client:
            seed_samples(client, registry.url)
        present = f"{registry.host}/sample/app:1.0.0"
        missing = f"{registry.host}/sample/app:9.9.9"
        for args in ([present], [missing], [present, missing, "--output", "json"]):
            _run_check(args)
    return 0


def _run_check(args: list[str]) -> int:
    command = [sys.executable, "-m", "imagecheck", "check", *args]
    print(f"$ {shlex.join(command)}", flush=True)
    # The child must import this same imagecheck, installed or not.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    returncode = subprocess.run(command, env=env, check=False).returncode
    print(f"exit code: {returncode}\n", flush=True)
    return returncode


if __name__ == "__main__":
    raise SystemExit(main())
