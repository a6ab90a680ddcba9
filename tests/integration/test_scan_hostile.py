"""``imagecheck scan`` on a hostile pull request (issue #10, section 6), as a real process.

Every run is bounded the way a CI job is: an address-space limit (:data:`MEMORY`) and a
timeout; each must end with its documented exit code, one line per problem, no traceback,
and a short output. The timeouts are generous, not timings: each input is large enough
that the quadratic or exponential code it guards against does not finish within it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import IO

import pytest

from tests.support import clirun
from tests.support.clirun import Run
from tests.support.endpoint import RegistryEndpoint

MEMORY = 1024 * 1024 * 1024  # RLIMIT_AS: the interpreter and a scan need ~100 MB of it
TIMEOUT = 60.0
CANARY = "SECRET-CANARY-7f3a"
POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: c\n"


def run_bounded(
    args: list[str],
    home: Path,
    *,
    cwd: Path | None = None,
    stdin: bytes | IO[bytes] = b"",
    timeout: float = TIMEOUT,
    max_output: int = 256 * 1024,
) -> Run:
    """``python -m imagecheck ARGS`` under :data:`MEMORY`, in the environment ``run_cli``
    gives, plus :data:`CANARY` (so that /proc/self/environ holds it); from ``cwd``, with
    ``stdin`` (``run_cli_measured`` has neither)."""
    proc = subprocess.run(
        [sys.executable, "-c", clirun._LIMITED, str(MEMORY), *args],
        input=stdin if isinstance(stdin, bytes) else None,
        stdin=None if isinstance(stdin, bytes) else stdin,
        capture_output=True,
        env=clirun.cli_env(home, {"SCAN_TEST_CANARY": CANARY}),
        cwd=cwd,
        timeout=timeout,
        check=False,
    )
    run = Run(proc.returncode, proc.stdout.decode(), proc.stderr.decode())
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    assert len(run.stdout) + len(run.stderr) < max_output
    return run


def errors(run: Run) -> list[str]:
    """The problem lines on stderr (json and github output), without the prefix."""
    lines = run.stderr.splitlines()
    assert all(line.startswith("imagecheck: error: ") for line in lines), run.stderr
    return [line.removeprefix("imagecheck: error: ") for line in lines]


# --- files that are not what they seem -------------------------------------------------------


def hostile_repo(tmp_path: Path, good_image: str) -> Path:
    """One good manifest; links to /dev/zero, /etc/shadow, /proc/self/environ and a secret
    outside the repository; a FIFO; a link inside the tree; a directory link cycle."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.yaml").write_text(
        POD + f"      image: 127.0.0.1:9/leak:{CANARY}\n"
    )
    repo = tmp_path / "repo"
    (repo / "k8s").mkdir(parents=True)
    (repo / "k8s" / "app.yaml").write_text(POD + f"      image: {good_image}\n")
    (repo / "k8s" / "same.yaml").symlink_to("app.yaml")
    (repo / "k8s" / "loop").symlink_to("..", target_is_directory=True)
    for name, target in [
        ("zero.yaml", "/dev/zero"),
        ("shadow.yaml", "/etc/shadow"),
        ("environ.yaml", "/proc/self/environ"),
        ("secret.yaml", "../outside/secret.yaml"),
    ]:
        (repo / name).symlink_to(target)
    os.mkfifo(repo / "fifo.yaml")
    return repo


def test_scan_reads_only_the_regular_files_of_the_tree(
    registry_plain: RegistryEndpoint, tmp_path: Path
) -> None:
    repo = hostile_repo(tmp_path, registry_plain.ref("sample/app:1.0.0"))
    run = run_bounded(["scan", "-o", "json", str(repo)], tmp_path)
    assert run.code == 2, run.stderr
    assert CANARY not in run.stdout + run.stderr
    outside = f"not scanned: a symbolic link to outside {repo}"
    assert errors(run) == [
        f"{repo / 'environ.yaml'}:0: {outside}",
        f"{repo / 'fifo.yaml'}:0: cannot use file {repo / 'fifo.yaml'}: a FIFO, not a regular file",
        f"{repo / 'secret.yaml'}:0: {outside}",
        f"{repo / 'shadow.yaml'}:0: {outside}",
        f"{repo / 'zero.yaml'}:0: {outside}",
    ]
    # The rest is still checked: the manifest, once, though a link inside the tree names it too.
    [occurrence] = json.loads(run.stdout)["occurrences"]
    assert (occurrence["file"], occurrence["line"]) == (str(repo / "k8s" / "app.yaml"), 7)
    assert occurrence["result"]["status"] == "found"


def test_special_files_named_on_the_command_line_are_not_read(tmp_path: Path) -> None:
    repo = hostile_repo(tmp_path, "alpine:3.20")
    run = run_bounded(
        ["scan", "-o", "json", str(repo / "zero.yaml"), str(repo / "fifo.yaml")], tmp_path
    )
    assert run.code == 2
    zero, fifo = repo / "zero.yaml", repo / "fifo.yaml"
    assert errors(run) == [
        f"{zero}:0: cannot use file {zero}: a device, not a regular file",
        f"{fifo}:0: cannot use file {fifo}: a FIFO, not a regular file",
    ]


def test_changed_files_named_relative_to_the_checkout_stay_in_it(tmp_path: Path) -> None:
    """`imagecheck scan $(git diff --name-only)`: the pull request chose the names."""
    repo = hostile_repo(tmp_path, "alpine:3.20")
    names = ["secret.yaml", "environ.yaml", "shadow.yaml"]
    run = run_bounded(["scan", "-o", "json", *names], tmp_path, cwd=repo)
    assert run.code == 2
    assert CANARY not in run.stdout + run.stderr
    assert errors(run) == [
        f"{name}:0: not scanned: a symbolic link to outside {repo}" for name in names
    ]


def test_endless_stdin_is_cut_at_32_mib(tmp_path: Path) -> None:
    with open("/dev/zero", "rb") as zero:
        run = run_bounded(["scan", "-o", "json", "-"], tmp_path, stdin=zero)
    assert run.code == 2
    assert errors(run) == ["<stdin>:0: not scanned: larger than 32 MiB"]


def test_a_file_over_4_mib_is_a_problem(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(POD.encode() + b"#" * (4 * 1024 * 1024))
    run = run_bounded(["scan", "-o", "json", str(big)], tmp_path)
    assert run.code == 2
    assert errors(run) == [f"{big}:0: cannot use file {big}: larger than 4 MiB"]


# --- Dockerfiles ------------------------------------------------------------------------------


def scan_one(tmp_path: Path, name: str, text: str) -> tuple[Run, Path]:
    path = tmp_path / name
    path.write_text(text)
    return run_bounded(["scan", "-o", "json", str(path)], tmp_path), path


def test_arg_doubling_is_not_expanded(tmp_path: Path) -> None:
    """28 lines: A27 would be 2^28 characters (1.56 GB and 36 s before the fix)."""
    lines = ["ARG A0=xx"] + [f"ARG A{i}=${{A{i - 1}}}${{A{i - 1}}}" for i in range(1, 28)]
    run, path = scan_one(tmp_path, "Dockerfile", "\n".join([*lines, "FROM $A27", ""]))
    assert run.code == 2
    assert errors(run) == [f"{path}:29: FROM: ARG A12 (line 13) expands to over 4096 characters"]


@pytest.mark.parametrize(
    ("case", "text", "code"),
    [
        # A RUN continued over 3 MB (0.8 MB took 12 s when each line re-read all before it).
        ("continuation", "FROM scratch\nRUN true \\\n" + "  && true \\\n" * 250_000 + "\n", 0),
        # Heredoc openers without terminators: each looked for its end to the end of the file.
        ("heredocs", "FROM scratch\n" + "RUN <<EOF\n" * 300_000, 0),
        # Unclosed ${: each looked for its } to the end of the word.
        ("unclosed-braces", "ARG A=" + "${" * 1_500_000 + "\nFROM scratch\n", 0),
    ],
)
def test_dockerfile_reading_is_linear(tmp_path: Path, case: str, text: str, code: int) -> None:
    run, _ = scan_one(tmp_path, "Dockerfile", text)
    assert run.code == code, run.stderr


# --- YAML ------------------------------------------------------------------------------------


def test_a_merge_key_chain_5000_deep_is_a_problem(tmp_path: Path) -> None:
    chain = ["m0: &m0 {image: alpine:3.20}"]
    chain += [f"m{i}: &m{i} {{<<: *m{i - 1}}}" for i in range(1, 5000)]
    text = "\n".join([*chain, "kind: Pod", "spec: {containers: [{<<: *m4999}]}", ""])
    run, path = scan_one(tmp_path, "chain.yaml", text)
    assert run.code == 2
    # The walk reads every mapping of the object (issue #13): the chain breaks at its 101st link.
    assert errors(run) == [f"{path}:102: merge keys (<<) nested more than 100 deep"]


def test_an_alias_bomb_is_a_problem(tmp_path: Path) -> None:
    """List items x containers: 5,000 aliases each way would be 25 million occurrences."""
    text = "\n".join(
        [
            "c: &c {name: c, image: alpine:3.20}",
            "cs: &cs [" + ", ".join(["*c"] * 5000) + "]",
            "p: &p {kind: Pod, metadata: {name: p}, spec: {containers: *cs}}",
            "kind: List",
            "items: [" + ", ".join(["*p"] * 5000) + "]",
            "",
        ]
    )
    # The occurrences found before the limit are checked: at a port where nothing answers.
    path = tmp_path / "bomb.yaml"
    path.write_text(text.replace("alpine:3.20", "127.0.0.1:9/bomb:1"))
    # Text output: the image once, then a line per occurrence found before the limit.
    run = run_bounded(["scan", "--timeout", "5", str(path)], tmp_path, max_output=2 * 1024 * 1024)
    assert run.code == 2
    message = (
        "aliases lead to more than 100,000 values to read: the rest of the file is not scanned"
    )
    assert f"error    {path}:5  {message}" in run.stdout.splitlines()


def test_a_flood_of_syntax_errors_ends_after_100(tmp_path: Path) -> None:
    """Each error re-parses the rest of the file: 500,000 of them never ended."""
    run, path = scan_one(tmp_path, "errors.yaml", "---\n[\n" * 500_000)
    assert run.code == 2
    lines = errors(run)
    assert len(lines) == 101
    assert lines[-1] == f"{path}:0: more than 100 problems: the rest is not scanned"


def test_a_document_of_millions_of_nodes_is_a_problem(tmp_path: Path) -> None:
    """12 MiB on stdin, one flow sequence: 6 million nodes, over 1 GB once composed."""
    text = b"[" + b"a," * (6 * 1024 * 1024) + b"a]\n"
    run = run_bounded(["scan", "-o", "json", "-"], tmp_path, stdin=text)
    assert run.code == 2
    assert errors(run) == ["<stdin>:1: YAML document over 1,000,000 nodes"]
