"""The fuzz suite's shared fixtures; its hypothesis profiles are in :mod:`tests.fuzz.profiles`
(imported here, so that the profile is loaded before any property runs).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fuzz import netguard, profiles  # noqa: F401 - profiles: registers and loads the profile
from tests.fuzz.proc import IMAGECHECK, child_env, run_bounded
from tests.support.standin import StandIn

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(_HERE):
            # Examples with 100 kB headers are the point here, not a mistake.
            item.add_marker(pytest.mark.filterwarnings("ignore:Generating overly large repr"))
            # A property runs for a minute or two; shrinking a failure may take five more
            # (hypothesis's own limit), and its report must not be lost to pytest-timeout.
            item.add_marker(pytest.mark.timeout(900))


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    """One hostile registry per module, reconfigured by each example."""
    with StandIn() as server:
        yield server
    assert server.errors == [], f"the stand-in itself failed: {server.errors!r}"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture(scope="module")
def netlog(workdir: Path) -> Path:
    """The network guard's log for this module's processes (the module fails if it ever
    holds a line: see each property)."""
    path = workdir / "netguard.log"
    path.touch()
    return path


@pytest.fixture
def guarded_here(netlog: Path) -> Iterator[Path]:
    """The network guard in the pytest process itself, for in-process properties."""
    with netguard.installed(str(netlog)):
        yield netlog


@pytest.fixture(scope="session")
def startup_seconds(tmp_path_factory: pytest.TempPathFactory) -> float:
    """What an ``imagecheck check`` takes when the registry answers at once: interpreter and
    import start-up, the time allowance every time bound adds. The median of three runs."""
    home = tmp_path_factory.mktemp("startup")
    netlog = home / "netguard.log"
    netlog.touch()
    times = []
    with StandIn() as server:
        for _ in range(3):
            done = run_bounded(
                [IMAGECHECK, "check", server.ref("repo:tag"), "--deadline", "10"],
                env=child_env(home, netlog),
                kill_after=30,
            )
            assert done.code == 0, done
            times.append(done.elapsed)
    assert netlog.read_text() == "", "the network guard saw a plain run leave the machine"
    return statistics.median(times)


@pytest.fixture(scope="session")
def allowance(startup_seconds: float) -> float:
    """Start-up allowance over ``deadline + 1 s``: three times the measured start-up, at
    least one second (2 shared cores, other test processes running)."""
    return max(1.0, 3 * startup_seconds)


@pytest.fixture(scope="session", autouse=True)
def _guard_works(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Before any fuzzing: the network guard is active in a child process and refuses a
    metadata address and a DNS name (neither leaves the machine: it refuses before any
    packet)."""
    home = tmp_path_factory.mktemp("guard")
    netlog = home / "netguard.log"
    netlog.touch()
    probe = (
        "import socket\n"
        "for target in [('169.254.169.254', 80), ('registry.invalid', 443)]:\n"
        "    try:\n"
        "        socket.create_connection(target, timeout=0.5)\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__)\n"
        "    else:\n"
        "        print('CONNECTED')\n"
    )
    import sys  # noqa: PLC0415

    done = run_bounded([sys.executable, "-c", probe], env=child_env(home, netlog), kill_after=20)
    log = netlog.read_text()
    assert done.code == 0 and "CONNECTED" not in done.out, done
    assert "169.254.169.254" in log and "registry.invalid" in log, log
