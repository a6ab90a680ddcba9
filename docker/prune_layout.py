"""Where things are, for docker/prune.py's steps: the build interpreter's layout and the root.

:class:`Layout` is where the build stage's Python keeps its standard library, its extension
modules and the venv's site-packages, and where the image puts them (the stdlib zip and
``<prefix>/lib/imagecheck``). :class:`Root` is the root filesystem being written: every file
copied in keeps the path it has in the build stage, its symlinks recreated, and is remembered
(``copied``) for the dpkg records. Which dependencies never ship (pip, setuptools) is here too.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

# Never in the image: tooling the build needed and the command does not.
DROP_DISTS = ("pip", "setuptools", "wheel", "_distutils_hack", "pkg_resources")
# imagecheck's packages whose modules are imported by name (importlib), which no static
# analysis follows: the cloud credential sources (authn/cloud/_keychain.py's _SOURCES) and
# the readers of a node's registry configuration (routes/_load.py).
BY_NAME = ("imagecheck.authn.cloud", "imagecheck.routes")


@dataclass(frozen=True)
class Layout:
    """The running (build-stage) interpreter's paths, and the image's paths derived from them."""

    prefix: Path
    stdlib: Path
    dynload: Path
    site: Path
    version: str
    python: Path

    @classmethod
    def current(cls) -> Layout:
        return cls(
            prefix=Path(sys.base_prefix),
            stdlib=Path(sysconfig.get_path("stdlib")),
            dynload=Path(str(sysconfig.get_config_var("DESTSHARED"))),
            site=Path(sysconfig.get_path("purelib")),
            version=f"{sys.version_info.major}{sys.version_info.minor}",
            python=Path(getattr(sys, "_base_executable", sys.executable)),
        )

    @property
    def libdir(self) -> Path:
        return self.prefix / "lib"

    @property
    def app_dir(self) -> Path:
        return self.libdir / "imagecheck"

    @property
    def zip_path(self) -> Path:
        return self.libdir / f"python{self.version}.zip"

    def app_extensions(self) -> list[tuple[Path, str]]:
        """The dependencies' extension modules: (file, module name)."""
        found = []
        for path in sorted(self.site.rglob("*.so")):
            rel = path.relative_to(self.site)
            if not dropped(rel.parts[0]):
                name = ".".join([*rel.parts[:-1], rel.name.split(".", 1)[0]])
                if all(p.isidentifier() for p in name.split(".")):
                    found.append((path, name))
        return found


@dataclass
class Root:
    """The root filesystem under construction at ``out``."""

    out: Path
    copied: set[Path] = field(default_factory=set)

    def target(self, path: Path) -> Path:
        return self.out / path.relative_to("/")

    def copy_path(self, path: Path) -> Path:
        """Copy ``path`` into the root, recreating every symlink on the way (``/lib`` ->
        ``usr/lib``, ``libz.so.1`` -> ``libz.so.1.2.13``); return the real path."""
        current = Path("/")
        for part in path.absolute().parts[1:]:
            current = current / part
            dest = self.target(current)
            if current.is_symlink():
                link = os.readlink(current)
                if not dest.is_symlink():
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.symlink_to(link)
                resolved = self.copy_path((current.parent / link).resolve(strict=False))
                current = resolved
            elif current.is_file() and not dest.exists():
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(current, dest)
                self.copied.add(current)
        return current

    def size(self) -> int:
        return sum(p.lstat().st_size for p in self.out.rglob("*"))


def package_modules(src: Path) -> list[str]:
    """Every module of imagecheck in the checkout ``src``, by name: all of it ships."""
    names = []
    for path in sorted((src / "imagecheck").rglob("*.py")):
        rel = path.relative_to(src).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        names.append(".".join(parts))
    return names


def by_name_modules(src: Path) -> list[str]:
    """The modules of :data:`BY_NAME`'s packages, which the traced and smoke runs import."""
    return [n for n in package_modules(src) if any(n.startswith(f"{p}.") for p in BY_NAME)]


def dropped(name: str) -> bool:
    """Whether a site-packages entry belongs to a distribution the image never ships."""
    base = re.split(r"[-.]", name, maxsplit=1)[0]
    return base in DROP_DISTS or name.startswith("distutils-precedence")
