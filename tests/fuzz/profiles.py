"""The fuzz suite's hypothesis profiles, loaded on import, and :func:`examples`.

Profiles (``HYPOTHESIS_PROFILE``): ``ci`` (the default under ``CI=true``: derandomized, so a
CI run is reproducible, and no example database), ``dev`` (the default elsewhere: random,
failures kept in ``tests/fuzz/.hypothesis`` and replayed first), ``long`` (random, 20x the
examples, for a campaign) and ``explore`` (as ``dev``, without the known attacks that every
other profile runs first). Every property sets its example count with :func:`examples`.
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

_HERE = Path(__file__).parent
_SLOW_EXAMPLES = [
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
    HealthCheck.large_base_example,
    HealthCheck.function_scoped_fixture,
]
settings.register_profile(
    "dev",
    deadline=None,
    suppress_health_check=_SLOW_EXAMPLES,
    database=DirectoryBasedExampleDatabase(_HERE / ".hypothesis"),
    print_blob=True,
    # The explain phase re-runs a failure hundreds of times to say which parts of it matter:
    # minutes per failure with a process per example. The shrunk example says enough.
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)
settings.register_profile("ci", settings.get_profile("dev"), derandomize=True, database=None)
settings.register_profile("long", settings.get_profile("dev"))
# Random examples only: looks past the known attacks (run first otherwise, and a failing one
# stops the property before any random example).
settings.register_profile(
    "explore",
    settings.get_profile("dev"),
    phases=[Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or (
    "ci" if os.environ.get("CI") == "true" else "dev"
)
settings.load_profile(PROFILE)
_SCALE = 20 if PROFILE == "long" else 1


def examples(n: int) -> int:
    """``n`` examples, or 20x that in the ``long`` profile."""
    return n * _SCALE
