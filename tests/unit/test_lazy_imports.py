"""What each way in loads (issue #14): ``import imagecheck`` and ``imagecheck --version`` load
nothing heavy, ``check`` loads neither serve's webhook stack nor scan's PyYAML, and a Ctrl-C
while the modules load is "interrupted" (exit 130), never Python's traceback.

Behaviour, not timings: each case runs a fresh interpreter (the test process has long imported
everything) and reads its ``sys.modules``. The figures are ``benchmarks/startup.py``'s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import imagecheck

ROOT = Path(__file__).resolve().parents[2]

# Print which of these modules the code before it loaded, as a JSON object.
REPORT = """
import json, sys
print(json.dumps({{name: name in sys.modules for name in {names!r}}}))
"""

HEAVY = ["httpx", "httpcore", "anyio", "asyncio", "ssl", "click", "tenacity", "yaml", "logging"]
SERVE_ONLY = [
    "aiohttp",
    "prometheus_client",
    "imagecheck.webhook._server",
    "imagecheck.kube._incluster",
]
SCAN_ONLY = ["yaml", "imagecheck.scanning"]


def python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
        check=False,
    )


def loaded_after(code: str, names: list[str]) -> dict[str, bool]:
    done = python(code + "\n" + REPORT.format(names=names))
    assert done.returncode == 0, done.stderr
    report: dict[str, bool] = json.loads(done.stdout.splitlines()[-1])
    return report


def cli_code(*args: str) -> str:
    """Run the command line as the console script does, then fall through to the report."""
    return (
        "import os, sys\n"
        f"sys.argv = ['imagecheck', *{list(args)!r}]\n"
        "os._exit = lambda code: print('exit', code)  # main() ends the process: not here\n"
        "from imagecheck.cli import main\n"
        "main()"
    )


def test_import_imagecheck_loads_nothing_heavy() -> None:
    loaded = loaded_after("import imagecheck", HEAVY)
    assert not any(loaded.values()), loaded


def test_version_reads_no_module_of_the_library() -> None:
    loaded = loaded_after("import imagecheck; assert imagecheck.__version__", HEAVY)
    assert not any(loaded.values()), loaded


def test_the_public_names_load_on_first_use() -> None:
    loaded = loaded_after(
        "import imagecheck; imagecheck.parse_reference('busybox:1.36')",
        ["imagecheck.reference._reference", "imagecheck.run", "httpx"],
    )
    assert loaded == {
        "imagecheck.reference._reference": True,
        "imagecheck.run": False,
        "httpx": False,
    }
    assert imagecheck.check is imagecheck.run.check
    assert set(imagecheck.__all__) <= set(dir(imagecheck))
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = imagecheck.no_such_name  # type: ignore[attr-defined]


def test_version_command_loads_neither_httpx_nor_asyncio() -> None:
    done = python(cli_code("--version") + "\n" + REPORT.format(names=HEAVY))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == [f"imagecheck, version {imagecheck.__version__}", "exit 0"]
    loaded = json.loads(lines[-1])
    assert not any(loaded.values()), loaded  # not even click


def test_the_quick_version_answer_is_clicks() -> None:
    from click.testing import CliRunner  # noqa: PLC0415

    from imagecheck.cli import cli  # noqa: PLC0415

    done = CliRunner().invoke(cli, ["--version"], prog_name="imagecheck")
    assert (done.exit_code, done.output) == (0, f"imagecheck, version {imagecheck.__version__}\n")


def test_help_still_lists_every_command() -> None:
    done = python(cli_code("--help"))
    assert done.returncode == 0, done.stderr
    commands = done.stdout.split("Commands:")[1].split()
    assert {"check", "scan", "serve"} <= set(commands)


@pytest.mark.parametrize(
    ("args", "absent"),
    [
        (["check", "--output", "json", "Not/Valid"], [*SERVE_ONLY, *SCAN_ONLY]),
        (["scan", "--list", "--output", "json", "tests/fixtures/corpus"], SERVE_ONLY),
    ],
    ids=["check", "scan"],
)
def test_a_command_loads_only_what_it_needs(args: list[str], absent: list[str]) -> None:
    done = python(cli_code(*args) + "\n" + REPORT.format(names=absent))
    assert done.returncode == 0, done.stderr
    assert f"exit {2 if args[0] == 'check' else 0}" in done.stdout.splitlines()
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert not any(loaded.values()), loaded


# A registry in a thread of the child: /v2/ open, every manifest there (HEAD answers only).
REGISTRY = """
import http.server, threading
class Registry(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def answer(self, extra):
        self.send_response(200)
        for name, value in extra:
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def do_GET(self):
        self.answer([])
    def do_HEAD(self):
        self.answer([("Docker-Content-Digest", "sha256:" + "a" * 64),
                     ("Content-Type", "application/vnd.oci.image.manifest.v1+json")])
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Registry)
threading.Thread(target=server.serve_forever, daemon=True).start()
image = f"127.0.0.1:{server.server_address[1]}/app:1"
"""


def test_a_check_answered_at_once_loads_no_retry_machinery_nor_httpx_transport() -> None:
    """imagecheck's own transport (wire.py) replaces httpcore, anyio and h11; tenacity loads
    only when a first attempt fails (retry.py)."""
    run = cli_code("check", "--output", "json", "IMAGE").replace("'IMAGE'", "image")
    absent = ["tenacity", "httpcore", "anyio", "h11"]
    done = python(REGISTRY + run + "\n" + REPORT.format(names=absent))
    assert done.returncode == 0, done.stderr
    assert '"status": "found"' in done.stdout
    assert "exit 0" in done.stdout.splitlines()
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert not any(loaded.values()), loaded


# -- Ctrl-C while the modules load -------------------------------------------------------------

# Sends this process SIGINT from inside the import of MODULE (as a Ctrl-C that lands while it
# loads would), then runs the command line as the console script does.
CTRL_C_DURING_IMPORT = """
import os, signal, sys
from importlib.abc import MetaPathFinder

class CtrlC(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, CtrlC())
sys.argv = ["imagecheck", *{args!r}]
from imagecheck.cli import main
main()
"""


@pytest.mark.parametrize(
    ("module", "args"),
    [
        ("click", ["--help"]),
        ("click", ["check", "registry.test/app:1"]),
        ("imagecheck.cli._check", ["check", "registry.test/app:1"]),
        ("httpx", ["check", "registry.test/app:1"]),
        ("asyncio", ["check", "registry.test/app:1"]),
        ("imagecheck.run", ["check", "registry.test/app:1"]),
    ],
    ids=["click-help", "click", "check-module", "httpx", "asyncio", "run"],
)
def test_ctrl_c_while_loading_is_interrupted_not_a_traceback(module: str, args: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCKER_", "IMAGECHECK_"))}
    env["HOME"] = "/nonexistent"
    done = python(CTRL_C_DURING_IMPORT.format(module=module, args=args), env=env)
    assert "Traceback" not in done.stderr
    assert done.stderr.strip() == "imagecheck: interrupted"
    assert done.returncode == 130
    assert done.stdout == ""
