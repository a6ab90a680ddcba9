"""The version's one home, below every module that reads it.

Static, not importlib.metadata (a tree of imports of its own): `imagecheck --version` and the
registry client's User-Agent read it. pyproject.toml reads it (hatch), and
tests/packaging/test_version.py holds the image label and CHANGELOG.md to it.
"""

__version__ = "0.1.0"
