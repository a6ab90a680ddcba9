"""MkDocs hooks (mkdocs.yml ``hooks:``): the parts of the site written from their one source when
it is built, so that no page copies a fact that can drift.

- ``<!-- diagram: NAME -->`` on a line of its own: ``docs/diagrams/NAME.dot`` drawn by graphviz's
  ``dot`` (scripts/system-deps.sh installs it) into an inline SVG, whose text a reader can
  select and search; no picture is kept in git.
- ``<!-- exit-codes -->``: the exit-code table, from ``imagecheck.exitcodes`` (the codes, their
  meanings, the precedence), the table ``--help`` prints too.
- ``<!-- status: NAME -->`` and ``<!-- error: CLASS -->`` (troubleshooting.md): a result
  status's exit code and meaning; an error class's exit code, whether it is retried, and its
  docstring's first paragraph. tests/docs holds the page to every status and public error.
- In the generated Python reference, the docstrings' Sphinx roles (:class:`~imagecheck.X`,
  :func:`check`) become links to the name's entry where it has one (mkdocs-autorefs resolves
  them), and code where it has none.

A marker that names no diagram, no status or no error class, or a ``dot`` that fails, fails
the build (a ``PluginError``): a page never ships with a hole where its picture was.
"""

from __future__ import annotations

import html
import importlib
import inspect
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

from imagecheck.errors import ImagecheckError, RegistryError
from imagecheck.exitcodes import ERROR_CODES, MEANINGS, RESULT_PRECEDENCE, ExitCode, exit_code
from imagecheck.result import CheckResult, Status

ROOT = Path(__file__).resolve().parents[1]
DIAGRAMS = ROOT / "docs" / "diagrams"
DIAGRAM_MARKER = re.compile(r"^<!-- diagram: ([a-z0-9-]+) -->$", re.MULTILINE)
EXIT_CODES_MARKER = "<!-- exit-codes -->"
STATUS_MARKER = re.compile(r"^<!-- status: ([a-z]+) -->$", re.MULTILINE)
ROLE = re.compile(r":(?:class|func|meth|attr|data|exc|mod):<code>(~?)([\w.]+)</code>")
ERROR_MARKER = re.compile(r"^<!-- error: ([A-Za-z]+) -->$", re.MULTILINE)
# The modules whose errors a user can meet (importable without any extra).
ERROR_MODULES = ("imagecheck.errors", "imagecheck.kube._incluster", "imagecheck.cluster._model")
DOT_TIMEOUT = 60.0


def _description(source: Path) -> str:
    first = source.read_text(encoding="utf-8").splitlines()[:1]
    return first[0].removeprefix("//").strip() if first and first[0].startswith("//") else ""


def draw(name: str) -> str:
    """Diagram ``name`` as an inline ``<figure>`` holding dot's SVG (no blank line in it, so
    Markdown passes it through as one HTML block)."""
    source = DIAGRAMS / f"{name}.dot"
    if not source.is_file():
        raise PluginError(f"no diagram {name!r}: {source} does not exist")
    dot = shutil.which("dot")
    if dot is None:
        raise PluginError("graphviz's dot is not installed (scripts/system-deps.sh installs it)")
    done = subprocess.run(
        [dot, "-Tsvg", str(source)], capture_output=True, text=True, check=False,
        timeout=DOT_TIMEOUT,
    )  # fmt: skip
    if done.returncode != 0 or "<svg" not in done.stdout:
        raise PluginError(f"dot could not draw {source}: {done.stderr.strip()}")
    svg = done.stdout[done.stdout.index("<svg") :]
    # dot's <title>s name its ids (cluster_ci, job->scan): tooltips and search hits of no use.
    svg = re.sub(r"<title>[^<]*</title>|<!--.*?-->", "", svg, flags=re.DOTALL)
    # Scale down to the column, never up past the size dot drew it at; the .dot's first
    # comment line is what a screen reader says.
    label = html.escape(_description(source), quote=True)
    svg = re.sub(
        r'<svg width="([\d.]+)pt" height="[\d.]+pt"',
        rf'<svg role="img" aria-label="{label}" style="width:\1pt;max-width:100%;height:auto"',
        svg,
        count=1,
    )
    body = "\n".join(line for line in svg.splitlines() if line.strip())
    return f'<figure class="diagram" id="diagram-{name}">\n{body}\n</figure>'


def exit_code_table() -> str:
    """The exit codes as a Markdown table, then which wins when several apply."""
    rows = ["| code | name | meaning |", "|---|---|---|"]
    rows += [f"| {code:d} | `{code.name}` | {MEANINGS[code]} |" for code in ExitCode]
    order = ", then ".join(f"{code:d} ({status.value})" for status, code in RESULT_PRECEDENCE)
    errors = "; ".join(f"`{kind.__name__}` exits {code:d}" for kind, code in ERROR_CODES)
    return "\n".join(
        [
            *rows,
            "",
            f"When the images of one run end differently, the first of {order} decides. "
            f"A run that an error stopped before any answer: {errors}.",
        ]
    )


def _subclasses(cls: type[ImagecheckError]) -> Iterator[type[ImagecheckError]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def public_errors() -> dict[str, type[ImagecheckError]]:
    """Every error class a user can meet, by name (the private ones never leave the code)."""
    for module in ERROR_MODULES:
        importlib.import_module(module)
    found: list[type[ImagecheckError]] = [ImagecheckError, *_subclasses(ImagecheckError)]
    return {cls.__name__: cls for cls in found if not cls.__name__.startswith("_")}


def _plain(docstring: str | None) -> str:
    """A docstring's first paragraph as Markdown: ``x`` and :class:`~a.B` become `x`, `B`."""
    first = inspect.cleandoc(docstring or "").split("\n\n")[0]
    text = re.sub(r":[a-z]+:`~?(?:[\w.]+\.)?([\w]+)`", r"`\1`", " ".join(first.split()))
    return text.replace("``", "`")


def error_facts(name: str) -> str:
    cls = public_errors().get(name)
    if cls is None:
        raise PluginError(f"no public error class {name!r} in {', '.join(ERROR_MODULES)}")
    code = next(code for kind, code in ERROR_CODES if issubclass(cls, kind))
    retried = ""
    if issubclass(cls, RegistryError):
        takes = "temporary" in inspect.signature(cls.__init__).parameters
        retried = " · retried when temporary" if takes else (
            " · retried" if cls.temporary else " · not retried"
        )  # fmt: skip
    return f"**Exit {code:d}**{retried} · {_plain(cls.__doc__)}"


def status_facts(value: str) -> str:
    try:
        status = Status(value)
    except ValueError:
        raise PluginError(f"no result status {value!r}") from None
    code = exit_code([CheckResult(value, None, status)])
    return f"**Exit {code:d}**: {MEANINGS[code]}."


def _linked(match: re.Match[str]) -> str:
    """A role as an optional cross-reference to the package's face (``imagecheck.X``), where
    the reference documents the public names: ``imagecheck.errors.UsageError`` and
    ``UsageError`` are both ``imagecheck.UsageError``, ``Status.MISSING`` its member."""
    short, path = match.group(1) == "~", match.group(2)
    parts = path.split(".")
    start = next((i for i, part in enumerate(parts) if part[:1].isupper()), len(parts) - 1)
    identifier = "imagecheck." + ".".join(parts[start:])
    shown = parts[-1] if short else path
    return f'<autoref identifier="{identifier}" optional><code>{shown}</code></autoref>'


def on_page_content(html: str, **_: Any) -> str:
    return ROLE.sub(_linked, html)


def on_page_markdown(markdown: str, **_: Any) -> str:
    markdown = DIAGRAM_MARKER.sub(lambda m: draw(m.group(1)), markdown)
    markdown = STATUS_MARKER.sub(lambda m: status_facts(m.group(1)), markdown)
    markdown = ERROR_MARKER.sub(lambda m: error_facts(m.group(1)), markdown)
    return markdown.replace(EXIT_CODES_MARKER, exit_code_table())
