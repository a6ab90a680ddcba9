"""kustomize ``images:`` overrides: the images a kustomization deploys, at the override's line.

A ``kustomization.yaml`` (``.yml``, ``Kustomization``) that ``scan`` reads is rendered as
kustomize renders its images: its ``resources`` (and legacy ``bases``) are read, a directory
being another kustomization built first with its own overrides; its ``components`` are applied
to what was accumulated; then its ``images`` (and legacy ``imageTags``) apply, in order, to
every image it pulls in. An image an override matches is reported at the override's
``- name:`` line with ``origin`` its resource's ``file:line``, and not as written; an image no
override matches stays as written. A kustomization that another one scanned includes is a base:
its images are reported through the ones that include it. Remote resources are never fetched:
each is a skipped occurrence on its line.

kustomize's rules, as in kubernetes-sigs/kustomize v5.8.1 (embedded in kubectl 1.37):

- ``name`` is put into a regular expression, ``^NAME(:[a-zA-Z0-9_.{}-]*)?(@sha256:...)?$``
  (``api/internal/image/image.go`` IsImageMatched): it matches the image with any tag and/or
  sha256 digest, a ``.`` in it matches any character, and a name written with a tag matches only
  that tag. A name with other regular-expression syntax is a problem here, not evaluated
  (Python's backtracking is not RE2's linear time, and the name comes from the change).
- The value is split into name, tag, digest (``image.go`` Split: a ``:`` before the first ``/``
  is a registry port); ``newName`` replaces the name; ``newTag`` and ``digest`` together set
  both; ``newTag`` alone drops the digest; ``digest`` alone drops the tag; else ``tagSuffix``
  is appended to the tag and drops the digest (``api/filters/imagetag/updater.go``).
- Each ``images`` entry is one transformer (``api/internal/target/kusttarget_configplugin.go``)
  that runs ``LegacyFilter`` -- every ``image`` of a list under a key ``containers`` or
  ``initContainers`` at any depth, any kind but CustomResourceDefinition -- and then the field
  specs of ``api/internal/konfig/builtinpluginconsts/images.go``. A value both reach (e.g.
  ``spec/template/spec/containers[]/image``) is rewritten twice: a ``tagSuffix`` is appended
  twice there, as ``kubectl kustomize`` does. ``ephemeralContainers``, Tekton ``steps`` and the
  like are not rewritten.
- Values must be strings (``newTag: 1.10`` is an error); a resource is tried as a file, read only
  under the kustomization's directory (the default load restrictor), then as a directory; a
  directory holds exactly one kustomization file (``kusttarget.go`` LoadKustFile).

Not followed: ``patches`` that set images, ``configurations`` that add image field specs, merge
keys (``<<``) in resources. Bounded, since the files come from the change being scanned:
resources are read only inside the directory scanned (a relative PATH: the working directory; a
kustomization named by an absolute or ``../`` path: its own directory), never through a link
out; kustomizations nest at most :data:`MAX_DEPTH` deep, a cycle is a problem, at most
:data:`MAX_FILES` files are read and a kustomization renders at most :data:`MAX_IMAGES` images,
and at most :data:`MAX_APPLIED` image-override pairs are tried in all. Where the rendered images
go among the scan's results is ``_kustmerge``'s.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from imagecheck.scanning import _paths
from imagecheck.scanning._kustfile import (
    KUSTOMIZATION_NAMES,
    REMOTE_SHAPE,
    Kustomization,
    Override,
    Problem,
    image_passes,
    kustomization,
)
from imagecheck.scanning._model import PLACEHOLDER, FileProblem, Occurrence, placeholder_in
from imagecheck.scanning._textscan import scan_text
from imagecheck.scanning._yamltree import SyntaxProblem, documents

__all__ = [
    "KUSTOMIZATION_NAMES",
    "MAX_APPLIED",
    "MAX_DEPTH",
    "MAX_FILES",
    "MAX_IMAGES",
    "Built",
    "Image",
    "Session",
]

MAX_DEPTH = 32  # overlays of overlays are a few deep
MAX_FILES = 5000  # read for the kustomizations of one scan, beyond what scan_paths read
MAX_IMAGES = 100_000  # in one kustomization: bases shared by many (diamonds) multiply
# Overrides applied to images, in all: 1,000 images x 50 overrides x 10 overlays is 500,000.
MAX_APPLIED = 5_000_000
REMOTE = "remote kustomize resource: not fetched"


@dataclass(frozen=True, slots=True)
class Image:
    """An image of a resource on its way through kustomizations."""

    written: Occurrence
    image: str
    passes: int  # how many times each override is applied to it: 0, 1 or 2
    override: Override | None = None

    def through(self, override: Override) -> Image:
        image, matched = self.image, False
        for _ in range(self.passes):
            if (new := override.apply(image)) is not None:
                image, matched = new, True
        return replace(self, image=image, override=override) if matched else self

    def occurrence(self) -> Occurrence:
        """As reported: as written, or rendered at the override that decided it."""
        if self.override is None:
            return self.written
        placeholder = placeholder_in(self.image)
        return replace(
            self.written,
            image=self.image,
            file=self.override.file,
            line=self.override.line,
            skipped=None if placeholder is None else f"{PLACEHOLDER} {placeholder}",
            origin=f"{self.written.file}:{self.written.line}",
        )


@dataclass(slots=True)
class Built:
    images: list[Image]
    kind: str = "Kustomization"
    reached: set[str] = field(default_factory=set)  # kustomization directories, real paths


@dataclass(frozen=True, slots=True)
class _At:
    """The entry of a kustomization being read: its file, line and words for a problem."""

    file: str
    line: int
    what: str  # "resource ../base"

    def problem(self, message: str) -> Problem:
        return Problem(self.line, f"{self.what}: {message}")


@dataclass(frozen=True, slots=True)
class _Into:
    """Where an entry's images go: the kustomization built, its fence, the directories that
    include it (real paths, the kustomization's own last)."""

    built: Built
    confined: str
    stack: list[str]


class Session:
    """What the kustomizations of one scan read and built; each file is read once."""

    def __init__(self, scanned: set[str]) -> None:
        self.scanned = scanned
        self.problems: list[FileProblem] = []
        self.notes: list[Occurrence] = []
        self._files: dict[str, list[Image]] = {}  # by real path
        self._built: dict[tuple[str, str], Built | None] = {}  # by (directory, confinement)
        self._reads = 0
        self._applied = 0
        self._real: dict[str, str] = {}
        self.names: dict[str, str] = {}  # real path -> name of a file the scan read

    def real(self, path: str) -> str:
        if path not in self._real:
            self._real[path] = os.path.realpath(path)
        return self._real[path]

    def real_dir(self, file: str) -> str:
        return self.real(os.path.dirname(file) or os.curdir)

    def key(self, o: Occurrence) -> tuple[object, ...]:
        """An occurrence, whatever path names its file."""
        return (self.real(o.file), o.line, o.image, o.kind, o.name, o.container, o.origin)

    def root(self, file: str, text: str, confined_to: str | None) -> Built | None:
        """A kustomization the scan read, built; ``confined_to``: where its resources may be
        read from (None: its own directory)."""
        here = self.real_dir(file)
        confined = here if confined_to is None else self.real(confined_to)
        return self._build(file, text, confined, [here])

    def _build(self, file: str, text: str, confined: str, stack: list[str]) -> Built | None:
        key = (stack[-1], confined)
        if key not in self._built:
            kustomization = self._parse(file, text)
            built = None
            if kustomization is not None:
                built = Built([], kind=kustomization.kind)
                self._accumulate(kustomization, built, confined, stack)
            self._built[key] = built
        return self._built[key]

    def _parse(self, file: str, text: str) -> Kustomization | None:
        for document in documents(text):
            if isinstance(document, SyntaxProblem):
                if self.real(file) not in self.scanned:  # else scan_paths reported it
                    self.problems.append(FileProblem(file, document.line, document.message))
                return None
            try:
                return kustomization(file, document)
            except Problem as exc:
                self.problems.append(FileProblem(file, exc.line, exc.message))
                return None
        return Kustomization(file, "Kustomization", [], [], [])

    def _accumulate(self, k: Kustomization, built: Built, confined: str, stack: list[str]) -> None:
        """kusttarget.go accumulateTarget: resources, then components, then the overrides."""
        entries = [*((*r, False) for r in k.resources), *((*c, True) for c in k.components)]
        for entry, line, component in entries:
            at = _At(k.file, line, f"{'component' if component else 'resource'} {entry}")
            try:
                self._resource(at, entry, _Into(built, confined, stack), component=component)
            except Problem as exc:
                self.problems.append(FileProblem(k.file, exc.line, exc.message))
            if len(built.images) > MAX_IMAGES:
                message = f"renders more than {MAX_IMAGES:,} images: the rest is not rendered"
                self.problems.append(FileProblem(k.file, line, message))
                del built.images[MAX_IMAGES:]
                break
        self._applied += len(built.images) * len(k.overrides)
        if self._applied > MAX_APPLIED:
            message = f"more than {MAX_APPLIED:,} overrides to apply: not rendered"
            self.problems.append(FileProblem(k.file, k.overrides[0].line, message))
            built.images.clear()
            return
        for override in k.overrides:
            built.images = [image.through(override) for image in built.images]

    def _resource(self, at: _At, entry: str, into: _Into, *, component: bool) -> None:
        if REMOTE_SHAPE.match(entry):
            self.notes.append(
                Occurrence(entry, at.file, at.line, "Kustomization", None, None, REMOTE)
            )
            return
        path = os.path.normpath(os.path.join(os.path.dirname(at.file), entry))
        real = self.real(path)
        if not _paths.is_within(real, into.confined):
            raise at.problem(f"not read: outside {into.confined}")
        if os.path.isdir(path):
            self._include(at, path, into, component=component)
        elif component or not os.path.lexists(path):
            raise at.problem(f"no such {'directory' if component else 'file or directory'}")
        elif not _paths.is_within(real, into.stack[-1]):
            raise at.problem(
                "not under the kustomization's directory (kustomize's load restrictor)"
            )
        else:
            into.built.images.extend(self._file(at, path, into.confined))

    def _include(self, at: _At, path: str, into: _Into, *, component: bool) -> None:
        real = self.real(path)
        if real in into.stack:
            raise at.problem("a cycle: it includes this kustomization")
        if _paths.is_within(into.stack[-1], real):  # fileloader.go errIfArgEqualOrHigher
            raise at.problem("the kustomization's own directory or one above it")
        if len(into.stack) >= MAX_DEPTH:
            raise at.problem(f"kustomizations nested more than {MAX_DEPTH} deep")
        names = [n for n in KUSTOMIZATION_NAMES if os.path.lexists(os.path.join(path, n))]
        if len(names) != 1:
            found = "no kustomization file" if not names else "more than one kustomization file"
            raise at.problem(f"{found} in {path}")
        file = os.path.join(path, names[0])
        text = self._text(at, file, into.confined)
        stack = [*into.stack, real]
        if component:
            kustomization = self._parse(file, text)
            if kustomization is not None and kustomization.kind != "Component":
                raise at.problem(f"kind is {kustomization.kind}, not Component")
            if kustomization is not None:
                self._accumulate(kustomization, into.built, into.confined, stack)
        else:
            sub = self._build(file, text, into.confined, stack)
            if sub is not None and sub.kind == "Component":
                raise at.problem("a Component, which belongs in components")
            if sub is not None:
                into.built.images.extend(sub.images)
                into.built.reached |= sub.reached
        into.built.reached.add(real)

    def _file(self, at: _At, path: str, confined: str) -> list[Image]:
        real = self.real(path)
        if real not in self._files:
            text = self._text(at, path, confined)
            occurrences, problems = scan_text(text, self.names.get(real, path))
            if real not in self.scanned:
                self.problems.extend(problems)
            passes = image_passes(text)
            self._files[real] = [
                Image(o, o.image, passes.get((o.line, o.image), 0)) for o in occurrences
            ]
        return self._files[real]

    def _text(self, at: _At, path: str, confined: str) -> str:
        self._reads += 1
        if self._reads > MAX_FILES:
            raise at.problem(f"not read: more than {MAX_FILES:,} files for kustomizations")
        data = _paths.read_file(path, confined)
        text = _paths.decode(data, path) if isinstance(data, bytes) else data
        if isinstance(text, FileProblem):
            raise at.problem(text.message)
        return text
