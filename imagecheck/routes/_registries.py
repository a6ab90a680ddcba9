"""The hosts containers/image (CRI-O, podman, skopeo) asks for a reference, by the rules of
``registries.conf``: v5.23's ``FindRegistry``, ``PullSourcesFromReference``,
``rewriteReference`` (``pkg/sysregistriesv2``), ``newImageSource`` and ``newDockerClient``
(``docker/``) and ``shortnames.Resolve`` run without a terminal.

For a reference, the ``[[registry]]`` table with the longest matching prefix is chosen (the
name without tag or digest must equal the prefix or go on with ``/``, ``:`` or ``@``;
``*.example.com`` matches any subdomain). Its mirrors come first, in order, unless
``mirror-by-digest-only`` or a mirror's ``pull-from-mirror`` leaves them out for this kind of
reference, then the table's ``location``; each gets the reference with the prefix replaced by
its location. The first that has the image wins; when none has it, the last one's answer
(the primary's) is the answer (:attr:`Verdict.LAST_HOST`). Each source's own reference is
looked up again for ``blocked``, so a mirror of a blocked registry is still asked, and a
blocked primary is a refusal. ``insecure`` allows plain HTTP and an unverified certificate;
otherwise containers/image speaks HTTPS only, loopback included.

A short name (``busybox``, ``team/app:1``, as written) is resolved first: its alias if
``[aliases]`` has one, else each ``unqualified-search-registries`` entry in turn
(``docker.io`` adds ``library/``). With more than one candidate, ``enforcing`` refuses (no
terminal to prompt on); ``permissive`` and ``disabled`` try them all in order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from imagecheck.errors import InvalidReferenceError
from imagecheck.reference import Reference, parse_reference
from imagecheck.routes._registries_conf import (
    Mirror,
    RegistriesConf,
    Registry,
    load_conf,
)
from imagecheck.routes._short_names import has_registry
from imagecheck.routes._types import Endpoint, Route, Verdict


def load_registries_conf(path: Path, *, drop_ins: Path | None = None) -> RegistriesConfRouter:
    """Read a ``registries.conf`` and its drop-in directory (``drop_ins``; by default the
    path with ``.d`` added: ``/etc/containers/registries.conf.d`` for
    ``/etc/containers/registries.conf``) into a router. Every file is read here, none
    later; :class:`~imagecheck.errors.ConfigFileError` names the file and line of a problem.
    """
    directory = Path(f"{path}.d") if drop_ins is None else drop_ins
    return RegistriesConfRouter(load_conf(path, directory))


@dataclass(frozen=True, slots=True)
class _Source:
    """One pull source: where containers/image asks (``PullSource``), and whether its own
    reference is blocked."""

    reference: Reference
    insecure: bool
    mirror: bool
    pull_from_mirror: str
    origin: str
    blocked: str | None


class RegistriesConfRouter:
    """A :class:`~imagecheck.routes.Router` over a loaded ``registries.conf``. Pure: the
    files were read when it was built."""

    def __init__(self, conf: RegistriesConf) -> None:
        self.conf = conf

    def route(self, ref: Reference, text: str) -> Route:
        """Raises :class:`InvalidReferenceError` where containers/image fails the pull before
        asking anyone: a short name it cannot resolve, a name its prefix cannot be rewritten
        into."""
        endpoints: list[Endpoint] = []
        blocked: str | None = None
        unroutable: InvalidReferenceError | None = None
        for candidate in self.candidates(ref, text):
            try:
                sources = self.pull_sources(candidate)
            except InvalidReferenceError as exc:
                unroutable = exc  # this candidate fails; the next ones are still tried
                continue
            endpoints += [_endpoint(s) for s in sources if s.blocked is None]
            # The last candidate's primary answers last: if it is blocked, the reference is
            # refused unless a host before it has the image.
            blocked = sources[-1].blocked
        if unroutable is not None and not endpoints and blocked is None:
            raise unroutable
        source = f"registries.conf {self.conf.source}"
        return Route(tuple(endpoints), Verdict.LAST_HOST, blocked=blocked, source=source)

    # --- short names ------------------------------------------------------------------------

    def candidates(self, ref: Reference, text: str) -> list[Reference]:
        """``shortnames.Resolve`` without a terminal: the fully qualified references tried."""
        name = _name_of(text)
        if not name or has_registry(name):
            return [ref]
        alias = self.conf.aliases.get(name)
        if alias is not None and alias.target is not None:
            target = alias.target
            return [Reference(target.registry, target.repository, ref.tag, ref.digest)]
        if not self.conf.search:
            raise InvalidReferenceError(
                text,
                "short-name did not resolve to an alias and no unqualified-search registries "
                f"are defined in {self.conf.search_origin}",
            )
        found = []
        for registry in self.conf.search:
            try:
                found.append(parse_reference(f"{registry}/{text}"))
            except InvalidReferenceError as exc:
                raise InvalidReferenceError(
                    text, f"with unqualified-search registry {registry!r}: {exc.reason}"
                ) from None
        if len(found) > 1 and self.conf.mode == "enforcing":
            raise InvalidReferenceError(
                text,
                "short-name resolution enforced but cannot prompt without a TTY "
                f"(short-name-mode = enforcing in {self.conf.source}; "
                f"candidates: {', '.join(str(c) for c in found)})",
            )
        return found

    # --- one fully qualified reference ------------------------------------------------------

    def find(self, name: str) -> Registry | None:
        """``FindRegistry``: the table with the longest matching prefix (the first of equals)."""
        best: Registry | None = None
        for registry in self.conf.registries:
            if _matching_prefix(name, registry.prefix) != -1 and (
                best is None or len(registry.prefix) > len(best.prefix)
            ):
                best = registry
        return best

    def pull_sources(self, ref: Reference) -> list[_Source]:
        """``PullSourcesFromReference``: the mirrors this kind of reference may use, then the
        primary location; each source's blocked state looked up by its own name."""
        registry = self.find(ref.name)
        if registry is None:
            return [self._source(ref, False, None, "")]
        digested = ref.digest is not None
        sources = []
        for mirror in registry.mirrors:
            if _mirror_serves(registry, mirror, digested=digested):
                rewritten = _rewrite(ref, registry.prefix, mirror.location)
                origin = f"mirror of {registry.prefix} in {registry.origin}"
                # mirror-by-digest-only is every mirror's pull-from-mirror = "digest-only".
                usage = "digest-only" if registry.mirror_by_digest_only else mirror.pull_from_mirror
                sources.append(self._source(rewritten, mirror.insecure, usage, origin))
        rewritten = _rewrite(ref, registry.prefix, registry.location)
        origin = f"{registry.prefix} in {registry.origin}"
        sources.append(self._source(rewritten, registry.insecure, None, origin))
        return sources

    def _source(self, ref: Reference, insecure: bool, usage: str | None, origin: str) -> _Source:
        """``usage``: the mirror's ``pull-from-mirror``; None for the primary."""
        own = self.find(ref.name)
        blocked = None
        if own is not None and own.blocked:
            blocked = f"registry {own.prefix} is blocked in {own.origin}"
        return _Source(
            reference=ref,
            insecure=insecure,
            mirror=usage is not None,
            pull_from_mirror=usage or "",
            origin=origin,
            blocked=blocked,
        )


def _name_of(text: str) -> str:
    """The image as written, without tag or digest."""
    name = text.partition("@")[0]
    last = name.rfind("/")
    colon = name.find(":", last + 1)
    return name if colon == -1 else name[:colon]


def _mirror_serves(registry: Registry, mirror: Mirror, *, digested: bool) -> bool:
    if registry.mirror_by_digest_only:
        return digested
    if mirror.pull_from_mirror == "digest-only":
        return digested
    if mirror.pull_from_mirror == "tag-only":
        return not digested
    return True


def _matching_prefix(ref: str, prefix: str) -> int:
    """``refMatchingPrefix``: the length of ``ref`` the prefix covers, or -1. ``ref`` starts
    with a host; ``example.com:5000`` matches the prefix ``example.com`` (a known quirk of
    containers/image, kept so the same table is chosen)."""
    if prefix.startswith("*."):
        return _matching_subdomain(ref, prefix)
    if not ref.startswith(prefix):
        return -1
    if len(ref) == len(prefix) or ref[len(prefix)] in ":/@":
        return len(prefix)
    return -1


def _matching_subdomain(ref: str, prefix: str) -> int:
    """``refMatchingSubdomainPrefix``: ``*.example.com`` matches ``a.b.example.com`` when
    ``.example.com`` ends the host (no ``/`` before it) and ``:``, ``/``, ``@`` or the end
    follows."""
    index = ref.find(prefix[1:])
    if index == -1 or "/" in ref[:index]:
        return -1
    index += len(prefix) - 1
    if index == len(ref) or ref[index] in ":/@":
        return index
    return -1


def _rewrite(ref: Reference, prefix: str, location: str) -> Reference:
    """``rewriteReference``: the prefix replaced by ``location``; the result must be a
    reference in its canonical form (``ParseNamed``), or the pull fails."""
    text = str(ref)
    length = _matching_prefix(text, prefix)
    if length == -1:
        raise InvalidReferenceError(text, f"invalid prefix {prefix!r}")
    if not location:
        return ref
    rewritten = location + text[length:]
    try:
        parsed = parse_reference(rewritten)
    except InvalidReferenceError as exc:
        raise InvalidReferenceError(text, f"rewriting it to {rewritten!r}: {exc.reason}") from None
    if str(parsed) != rewritten:
        raise InvalidReferenceError(
            text, f"rewriting it to {rewritten!r}: repository name must be canonical"
        )
    return parsed


def _endpoint(source: _Source) -> Endpoint:
    ref = source.reference
    return Endpoint(
        host=ref.api_host,
        repository=ref.repository,
        # containers/image tries plain HTTP only where the source is insecure.
        scheme=None if source.insecure else "https",
        tags=source.pull_from_mirror != "digest-only",
        digests=source.pull_from_mirror != "tag-only",
        insecure=source.insecure,
        mirror=source.mirror,
        origin=source.origin,
    )
