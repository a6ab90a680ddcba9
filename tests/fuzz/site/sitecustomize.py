"""Imported at start-up by every Python process whose ``PYTHONPATH`` holds this directory: the
fuzz suite's imagecheck subprocesses. Installs ``tests/fuzz/netguard.py`` (see there)."""

import importlib.util
import os

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "netguard.py")
_SPEC = importlib.util.spec_from_file_location("_imagecheck_fuzz_netguard", _PATH)
if _SPEC is not None and _SPEC.loader is not None:
    _MODULE = importlib.util.module_from_spec(_SPEC)
    _SPEC.loader.exec_module(_MODULE)
    _MODULE.install_from_environment()
