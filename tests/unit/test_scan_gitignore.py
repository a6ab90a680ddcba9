"""The walk leaves out what git ignores, and git itself is the judge: each table builds a real
repository in a temporary directory and compares the walk's files with ``git ls-files --cached
--others --exclude-standard`` (run once per repository, never per file)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from imagecheck.scanning import FileProblem, scan_paths
from imagecheck.scanning._gitignore import MAX_PATTERNS
from imagecheck.scanning._walk import walk

# git without the machine's configuration: no core.excludesFile, as the walk reads none.
GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}

# Names chosen to meet each rule's edges: depth, dots, brackets, spaces, escapes, **.
PATHS = [
    "a",
    "b",
    "ab",
    "abc",
    "Abc",
    "a.c",
    "a b",
    "b ",
    "#e",
    "!x",
    "[x]",
    "a*",
    "x.log",
    "x.log.txt",
    "z/a/b/c",
    "z/a/x.log",
    "z/ab",
    "abX/y",
    "foo/bar",
    "foo/bar2/baz",
    "foo/a/b/bar",
    "foo/x/bar",
    "foo/barx",
    "fooX/bar",
    "foo.bar/x",
    "dir/x.log",
    "dir/sub/x.log",
    "dir/keep.log",
    "build/out",
    "src/build/x",
    "src/b/build",
    "deep/a/b/c/d.txt",
    "deep/d.txt",
    "deep/a/d.txt",
    "x/deep/d.txt",
    "node/x",
    "a" * 76 + "b",
    "m/" + "a/" * 24 + "x",
]

# One pattern per directory (its own .gitignore, so patterns are relative to it).
PATTERNS = [
    "a",
    "/a",
    "a/",
    "/a/",
    "a/b",
    "z/a/",
    "z/a/b",
    "z/**/b",
    "*.log",
    "*.log/",
    "x.log*",
    "foo/bar",
    "/foo/bar",
    "foo/*",
    "foo/**",
    "foo/**/",
    "**/bar",
    "**/foo/bar",
    "foo/**/bar",
    "foo**/bar",
    "foo**",
    "f*o/b*r",
    "*/bar",
    "a*",
    "*c",
    "a?c",
    "a??",
    "[ab]*",
    "[!a]*",
    "[^a]*",
    "[a-c]?",
    "[c-a]*",
    "[a-c-e]*",
    "[-a]*",
    "[a-]*",
    "[\\a-c]b*",
    "[[:alpha:]-]*",
    "[[:upper:]]*",
    "[[:alpha:]][[:punct:]]c",
    "[[:nope:]]*",
    "[]]*",
    "[]x]*",
    "[*",
    "[\\]]*",
    "[x\\-]*",
    "a\\*",
    "\\a",
    "\\#e",
    "\\!x",
    "!x",
    "b\\ ",
    "b ",
    "a b",
    "a\\",
    "**",
    "*",
    "*/",
    "/*",
    "*/*",
    "**/",
    "deep/**/d.txt",
    "deep/**",
    "deep/**/",
    "**/d.txt",
    "/**/d.txt",
    "d*/**/c",
    "*a*a*a*a*a*a*a*a*a*a*a*a*b",
    "m/**/a/**/a/**/a/**/x",
    "m/**/a/**/a/**/a/**/y",
    "m/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/x",
    "*a*a*b",
    "*a*a*c",
    "src/build/",
    "build/",
    "?",
    "[[:alnum:]]",
    "#comment",
    "",
]

# Several rules at once: negation, the order of patterns and of directories, git's edges.
CASES = {
    "negation re-includes": {".gitignore": "*.log\n!dir/keep.log\n"},
    "last pattern wins": {".gitignore": "!x.log\n*.log\n"},
    "a directory ignored cannot be re-included": {".gitignore": "foo/\n!foo/bar\n"},
    "contents ignored can be": {".gitignore": "foo/*\n!foo/bar\n"},
    "anchored star and re-include": {".gitignore": "/*\n!/foo\n!/deep/\n"},
    "deeper file overrides": {".gitignore": "*.log\n", "dir/.gitignore": "!x.log\n"},
    "deeper file ignores more": {"deep/.gitignore": "d.txt\n", ".gitignore": "!d.txt\n"},
    "a deeper anchored pattern is relative to it": {"deep/.gitignore": "/a/\n"},
    "ignored directory's own file never read": {
        ".gitignore": "dir/\n",
        "dir/.gitignore": "!x.log\n",
    },
    "crlf bom and escapes": {".gitignore": "\ufeffx.log\r\n\\#e\r\nb\\ \r\n"},
    "comment and trailing spaces": {".gitignore": "# a\n  \nab  \n"},
    "re-including a directory in an ignored tree": {".gitignore": "*\n!*/\n!*.log\n"},
}


def git(repo: Path, *argv: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *argv], env=GIT_ENV, capture_output=True, check=True
    )
    return done.stdout.decode("utf-8", "surrogateescape")


def make_repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def add_paths(directory: Path, paths: list[str]) -> None:
    for path in paths:
        (directory / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / path).write_text("x", encoding="utf-8")


def git_files(repo: Path, under: str = "") -> set[str]:
    """What git would hand over: tracked and untracked files that are not ignored."""
    listed = git(
        repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", under or "."
    )
    return {name for name in listed.split("\0") if name}


def walked(repo: Path, under: str = "") -> tuple[set[str], list[FileProblem]]:
    problems: list[FileProblem] = []
    files = walk(str(repo / under), lambda name: True, problems)
    return {Path(os.path.relpath(file, repo)).as_posix() for file in files}, problems


def test_each_pattern_as_git_matches_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {})
    for number, pattern in enumerate(PATTERNS):
        directory = repo / f"p{number:03d}"
        add_paths(directory, PATHS)
        (directory / ".gitignore").write_text(pattern + "\n", encoding="utf-8")
    files, problems = walked(repo)
    expected = git_files(repo)
    wrong = sorted(
        f"{PATTERNS[int(path[1:4])]!r}: {path[5:]} {'walked' if path in files else 'missed'}"
        for path in files ^ expected
    )
    assert wrong == []
    assert problems == []


@pytest.mark.parametrize("files", CASES.values(), ids=CASES.keys())
def test_rules_together_as_git_applies_them(files: dict[str, str], tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", files)
    add_paths(repo, PATHS)
    files_walked, problems = walked(repo)
    assert sorted(files_walked ^ git_files(repo)) == []
    assert problems == []


def test_rules_above_the_directory_and_info_exclude_apply(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {".gitignore": "*.log\n", "foo/.gitignore": "/x/\n"})
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("bar\n!*.log\n", encoding="utf-8")
    add_paths(repo, PATHS)
    # .gitignore comes before info/exclude: *.log stays ignored.
    assert (
        walked(repo, "foo")[0]
        == git_files(repo, "foo")
        == {"foo/barx", "foo/bar2/baz", "foo/.gitignore"}
    )
    assert walked(repo, "dir")[0] == git_files(repo, "dir") == set()


def test_a_worktree_reads_the_common_info_exclude(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"README": "x"})
    git(repo, "add", "README")
    git(repo, "commit", "-qm", "one")
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("*.log\n", encoding="utf-8")
    tree = tmp_path / "tree"
    git(repo, "worktree", "add", "-q", str(tree))
    add_paths(tree, PATHS)
    assert walked(tree)[0] == git_files(tree)
    assert "x.log" not in walked(tree)[0]


def test_a_nested_repository_is_walked_by_its_own_rules(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {".gitignore": "*.log\n"})
    nested = make_repo(repo / "vendored", {".gitignore": "ab\n"})
    add_paths(nested, ["x.log", "ab", "b"])
    assert walked(repo)[0] == {".gitignore", "vendored/.gitignore", "vendored/x.log", "vendored/b"}


def test_outside_a_work_tree_nothing_is_ignored_but_git_and_node_modules(tmp_path: Path) -> None:
    add_paths(tmp_path, ["x.log", ".github/workflows/ci.yml", "node_modules/p/x.yaml", ".git/x"])
    (tmp_path / ".gitignore").write_text("*.log\n", encoding="utf-8")
    (tmp_path / ".git").rename(tmp_path / ".git-not")  # no work tree: no rules
    assert walked(tmp_path)[0] == {".gitignore", "x.log", ".github/workflows/ci.yml", ".git-not/x"}


def test_a_linked_gitignore_is_not_read(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"rules": "*.log\n"})
    (repo / ".gitignore").symlink_to("rules")
    add_paths(repo, ["x.log"])
    assert "x.log" in walked(repo)[0]
    assert "x.log" in git_files(repo)


def test_too_many_patterns_are_a_problem_on_their_line(tmp_path: Path) -> None:
    lines = "".join(f"p{n}\n" for n in range(MAX_PATTERNS)) + "# more\nx.log\n"
    repo = make_repo(tmp_path / "repo", {".gitignore": lines})
    add_paths(repo, ["x.log"])
    files, problems = walked(repo)
    assert "x.log" in files
    assert [(p.line, p.message) for p in problems] == [
        (MAX_PATTERNS + 2, f"ignore rules not applied: more than {MAX_PATTERNS} patterns")
    ]


def test_an_oversized_gitignore_is_a_problem(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {".gitignore": "#" * 300_000})
    _, problems = walked(repo)
    assert [p.message for p in problems] == [
        f"ignore rules not applied: cannot use file {repo / '.gitignore'}: larger than 256 KiB"
    ]


def test_hostile_patterns_take_no_exponential_time(tmp_path: Path) -> None:
    """Patterns no path matches, against the paths that make backtracking try every way (git
    itself takes minutes here: the table above holds smaller ones, compared with git)."""
    stars = "*a" * 40 + "b"
    deep = "a/**/" * 30 + "y"
    repo = make_repo(tmp_path / "repo", {".gitignore": f"{stars}\n{deep}\n"})
    long, nested = "a" * 250, "/".join(["a"] * 120) + "/x"
    add_paths(repo, [long, nested])
    start = time.perf_counter()
    files, _ = walked(repo)
    assert time.perf_counter() - start < 2
    assert files == {".gitignore", long, nested}


def test_an_ignored_tree_is_never_listed(tmp_path: Path) -> None:
    """Seen from outside: the directories the scan lists (``os.scandir``'s audit events)."""
    repo = make_repo(tmp_path / "repo", {".gitignore": "/vendor/\ndist\n"})
    add_paths(repo, ["vendor/a/x.yaml", "dist/x.yaml", "app/node_modules/x.yaml", "k8s/x.yaml"])
    script = textwrap.dedent(
        """
        import sys
        from imagecheck.scanning import scan_paths
        listed = []
        def hook(event, args):
            if event == "os.scandir":
                listed.append(args[0])
        sys.addaudithook(hook)
        scan_paths([sys.argv[1]])
        print("\\n".join(sorted(str(path) for path in listed)))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(repo)], capture_output=True, text=True, check=True
    )
    listed = {os.path.relpath(line, repo) for line in done.stdout.splitlines()}
    assert listed == {".", "app", "k8s"}


def test_scan_reads_ci_under_dot_directories_and_not_ignored_trees(tmp_path: Path) -> None:
    pod = "kind: Pod\nspec:\n  containers:\n  - image: {}\n"
    repo = make_repo(tmp_path / "repo", {".gitignore": "out/\n"})
    for name, image in [(".ci/pod.yaml", "ci:1"), ("out/pod.yaml", "out:1"), ("p.yaml", "p:1")]:
        (repo / name).parent.mkdir(exist_ok=True)
        (repo / name).write_text(pod.format(image), encoding="utf-8")
    occurrences, _ = scan_paths([str(repo)])
    assert [o.image for o in occurrences] == ["ci:1", "p:1"]
    # A directory named is read, ignored or not.
    assert [o.image for o in scan_paths([str(repo / "out")])[0]] == ["out:1"]


def test_a_link_loop_in_a_walk_is_a_problem_on_its_file_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "loop.yaml").symlink_to("loop.yaml")
    (tmp_path / "a.yml").symlink_to("b.yml")
    (tmp_path / "b.yml").symlink_to("a.yml")
    (tmp_path / "ok.yaml").write_text("services: {web: {image: nginx:1}}\n", encoding="utf-8")
    occurrences, problems = scan_paths([str(tmp_path)])
    assert [o.image for o in occurrences] == ["nginx:1"]
    assert sorted(Path(p.file).name for p in problems) == ["a.yml", "b.yml", "loop.yaml"]
    assert all("symbolic links" in p.message for p in problems)
