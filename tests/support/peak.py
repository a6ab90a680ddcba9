"""Start a command under an address-space limit and measure *its own* peak resident memory.

``wait4``'s ``ru_maxrss`` of a child is not the child's own: Linux records the high-water
mark of the memory the process had before ``exec`` (its parent's, copied by ``fork`` or
borrowed by ``vfork``/``posix_spawn``), so every child of a 300 MiB test process reports at
least 300 MiB, however little it uses. Hence a small launcher (``python -S``, a few MiB):
it sets ``RLIMIT_AS``, forks the command, waits for it, writes the command's ``ru_maxrss``
(KiB) to a report file, and ends as the command ended (the same exit code, or the same
signal). The command's floor is then the launcher's few MiB.

Kill the launcher's whole session (``start_new_session=True`` and ``os.killpg``) to stop
both; a command killed that way leaves no report (:func:`peak_kib` is ``None``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

_LAUNCHER = """\
import os, resource, signal, sys
limit, report, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(signum, lambda n, _: os.kill(pid, n))
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as f:
    f.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


def launched(argv: Sequence[str], *, address_space: int, report: Path) -> list[str]:
    """``argv`` started by the launcher under ``address_space`` bytes of address space, its
    peak RSS to be read from ``report`` once it has ended."""
    return [sys.executable, "-S", "-c", _LAUNCHER, str(address_space), str(report), *argv]


def peak_kib(report: Path) -> int | None:
    """The peak RSS the launcher reported, in KiB; ``None`` if it was killed first."""
    try:
        return int(report.read_text())
    except (OSError, ValueError):
        return None
