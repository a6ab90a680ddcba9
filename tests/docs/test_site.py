"""The documentation site, built as the test command builds it and read in a real browser:
``mkdocs build --strict`` passes (a broken link, a missing page or a failing diagram fails
it), then every page opens in headless chromium with no console error, no failed request and
nothing loaded from another host; the diagram is drawn; search finds ``ImagePullBackOff``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import click
import pytest
from playwright.sync_api import (
    BrowserContext,
    ConsoleMessage,
    Page,
    Request,
    Response,
    sync_playwright,
)

import imagecheck
from imagecheck.cli import cli as main_group
from tests.support.docsite import CHROMIUM_FLAGS, build, copy_sources, pages, serve
from tests.support.tools import system_tool

# The diagram's boxes a reader must be able to see (docs/diagrams/which-mode.dot).
DIAGRAM_TEXT = [
    "initContainer",
    "admission webhook",
    "scheduling gate",
    "Kueue admission check",
    "reap",
    "audit",
    "ImagePullBackOff",
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("docs") / "site"
    done = build(out)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.fixture(scope="module")
def base_url(site: Path) -> Iterator[str]:
    with serve(site) as url:
        yield url


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    chromium = system_tool("chromium")
    profile = tmp_path_factory.mktemp("chromium-profile")  # a new --user-data-dir
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=chromium, headless=True, args=CHROMIUM_FLAGS
        )
        context.set_default_timeout(30_000)
        try:
            yield context
        finally:
            context.close()


@dataclass
class Trouble:
    """What went wrong while a page loaded, as a reader's browser would show it."""

    base_url: str
    errors: list[str] = field(default_factory=list)

    def console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(f"console: {message.text}")

    def page_error(self, error: Exception) -> None:
        self.errors.append(f"uncaught: {error}")

    def request(self, request: Request) -> None:
        if not request.url.startswith((self.base_url, "data:", "blob:")):
            self.errors.append(f"request to another host: {request.url}")

    def failed(self, request: Request) -> None:
        self.errors.append(f"failed: {request.url} ({request.failure})")

    def response(self, response: Response) -> None:
        if response.status >= 400:
            self.errors.append(f"HTTP {response.status}: {response.url}")


def _open(context: BrowserContext, url: str, trouble: Trouble) -> Page:
    page = context.new_page()
    page.on("console", trouble.console)
    page.on("pageerror", trouble.page_error)
    page.on("request", trouble.request)
    page.on("requestfailed", trouble.failed)
    page.on("response", trouble.response)
    response = page.goto(url, wait_until="networkidle")
    assert response is not None
    assert response.status == 200, url
    return page


def test_strict_build_passes(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert (site / "search" / "search_index.json").is_file()


def test_the_references_are_generated_complete(site: Path) -> None:
    """Every public name of ``import imagecheck`` has its entry, with its docstring's roles
    turned into links; every command has its section in the CLI reference."""
    python = (site / "reference" / "python" / "index.html").read_text()
    for name in (n for n in imagecheck.__all__ if not n.startswith("__")):
        assert f'id="imagecheck.{name}"' in python, f"{name} is not in the Python reference"
    assert re.search(r":(class|func|attr|data|meth):<code>", python) is None
    cli = (site / "reference" / "cli" / "index.html").read_text()
    for command in main_group.list_commands(click.Context(main_group)):
        assert f'id="imagecheck-{command}"' in cli, f"{command} is not in the CLI reference"


def test_every_page_loads_cleanly(site: Path, base_url: str, browser: BrowserContext) -> None:
    listed = pages(site)
    assert {"", "reference/cli/", "reference/python/", "changelog/"} <= set(listed)
    trouble = Trouble(base_url)
    for path in listed:
        page = _open(browser, base_url + path, trouble)
        assert page.locator("article h1").count() >= 1, f"{path}: no title"
        page.close()
    assert trouble.errors == []


def test_the_diagram_is_drawn(base_url: str, browser: BrowserContext) -> None:
    trouble = Trouble(base_url)
    page = _open(browser, base_url, trouble)
    svg = page.locator("figure#diagram-which-mode svg")
    svg.wait_for(state="visible")
    box = svg.bounding_box()
    assert box is not None
    assert box["width"] > 300
    assert box["height"] > 200
    drawn = " ".join(svg.locator("text").all_text_contents())
    for words in DIAGRAM_TEXT:
        assert words in drawn, f"{words!r} is not in the diagram: {drawn}"
    assert svg.get_by_text("initContainer", exact=False).first.is_visible()
    assert "which mode" in (svg.get_attribute("aria-label") or "").lower()
    assert trouble.errors == []
    page.close()


def test_search_finds_imagepullbackoff(base_url: str, browser: BrowserContext) -> None:
    trouble = Trouble(base_url)
    page = _open(browser, base_url, trouble)
    page.keyboard.press("/")  # Material's shortcut: focus the search box
    # Typed key by key, as a reader does: Material searches on keyboard events.
    page.locator("input.md-search__input").press_sequentially("ImagePullBackOff")
    results = page.locator(".md-search-result__item")
    results.first.wait_for(state="visible")
    assert results.count() >= 1
    assert "ImagePullBackOff" in page.locator(".md-search-result").inner_text()
    assert trouble.errors == []
    page.close()


@pytest.mark.parametrize(
    ("added", "said"),
    [
        ("See [nowhere](no-such-page.md).", "no-such-page.md"),
        ("<!-- diagram: no-such-diagram -->", "no diagram 'no-such-diagram'"),
    ],
    ids=["broken-link", "unknown-diagram"],
)
def test_strict_build_fails(tmp_path: Path, added: str, said: str) -> None:
    """The build really judges: a link to a page that does not exist, or a diagram that does
    not exist, fails it."""
    config = copy_sources(tmp_path)
    page = tmp_path / "docs" / "reference" / "exit-codes.md"
    page.write_text(f"{page.read_text()}\n{added}\n")
    done = build(tmp_path / "site", config)
    assert done.returncode == 1
    assert said in done.stdout + done.stderr


def test_the_browser_check_sees_what_goes_wrong(tmp_path: Path, browser: BrowserContext) -> None:
    """The checks above really judge: a console error, an uncaught exception, a missing file
    and a request to another host are each reported."""
    (tmp_path / "index.html").write_text(
        "<!doctype html><title>t</title><h1>t</h1>"
        '<img src="missing.png"><img src="http://example.invalid/x.png">'
        "<script>console.error('broken'); undefinedFunction();</script>"
    )
    with serve(tmp_path) as url:
        trouble = Trouble(url)
        _open(browser, url, trouble).close()
    said = "\n".join(trouble.errors)
    assert "console: broken" in said
    assert "undefinedFunction" in said
    assert "HTTP 404: " in said
    assert "missing.png" in said
    assert "request to another host: http://example.invalid/x.png" in said
