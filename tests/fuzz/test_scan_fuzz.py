"""``imagecheck scan`` over files a pull request could hold: random and crafted YAML
(anchors, aliases, merge-key chains, deep nesting, many documents, control characters),
Dockerfiles (ARG chains that double at each step, nested substitutions, endless
continuations, heredocs), Compose files, and special files (a FIFO, ``/dev/zero``, a sparse
2 GiB file, symlink loops, invalid UTF-8). Whatever it finds, the real process ends within
``--deadline`` + 1 s (plus start-up), under the memory bound, with a documented exit code,
output that parses (JSON) or holds no control characters (text, GitHub), and no traceback.

Every image in these files names the stand-in, a placeholder, or nothing valid: a scan never
needs a DNS name, so the network guard's log must stay empty.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.fuzz import judge
from tests.fuzz.proc import IMAGECHECK, child_env, run_bounded
from tests.fuzz.profiles import examples
from tests.fuzz.recipes import Content, Nest, Numbered, Repeat, render
from tests.fuzz.strategies import NASTY_TEXT
from tests.support.standin import SELF, Script, StandIn

DEADLINE = 2.0
SPECIAL = ("fifo", "dev-zero", "sparse", "self-loop", "directory-loop", "not-utf8")

images = st.one_of(
    st.just(f"{SELF}/repo:tag"),
    st.sampled_from(
        [
            f"{SELF}/repo@sha256:" + "0" * 64,
            "${IMAGE}",
            "{{ .Values.image }}",
            "$(TAG)",
            "UPPER/Case:1",
            "",
            "scratch",
            f"{SELF}/x:" + "t" * 300,
        ]
    ),
    st.sampled_from(NASTY_TEXT),
)
# Extra structure around the images: keys are never "image", so no value of unknown shape
# becomes a reference (which could name a host that needs DNS).
_keys = st.text(st.characters(codec="utf-8", exclude_characters=":"), max_size=8).filter(
    lambda k: k != "image"
)
_extras = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_keys, children, max_size=3),
    max_leaves=8,
)


@st.composite
def workloads(draw: st.DrawFn) -> dict[str, Any]:
    containers: list[Any] = [
        {"name": draw(st.text(max_size=8)), "image": draw(images)}
        for _ in range(draw(st.integers(0, 3)))
    ]
    spec: dict[str, Any] = {"containers": containers, "extra": draw(_extras)}
    kind = draw(st.sampled_from(["Pod", "Deployment", "CronJob", "List", "Rollout"]))
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}
    if kind == "CronJob":
        template = {"spec": {"jobTemplate": {"spec": {"template": {"spec": spec}}}}}
        return {"apiVersion": "batch/v1", "kind": "CronJob", **template}
    if kind == "List":
        pod = {"apiVersion": "v1", "kind": "Pod", "spec": spec}
        return {"apiVersion": "v1", "kind": "List", "items": [pod, draw(_extras)]}
    return {"apiVersion": "apps/v1", "kind": kind, "spec": {"template": {"spec": spec}}}


def _yaml(documents: list[Any]) -> bytes:
    return yaml.safe_dump_all(documents, allow_unicode=True).encode()


def merge_chain(n: int) -> Numbered:
    """``n`` mappings, each merging the one before: a key lookup follows all of them."""
    return Numbered(
        "m{i}: &m{i} {{<<: *m{j}}}\n",
        n,
        prefix=f"m0: &m0 {{image: '{SELF}/repo:tag'}}\n",
        suffix="kind: Pod\nspec:\n  containers:\n    - <<: *m{n}\n",
    )


def laughs(n: int) -> Numbered:
    """Billion laughs: each level a list of ten aliases to the level below."""
    return Numbered(
        "l{i}: &l{i} [" + ", ".join(["*l{j}"] * 10) + "]\n",
        n,
        prefix=f"l0: &l0 {{name: c, image: '{SELF}/repo:tag'}}\n",
        suffix="kind: Pod\nspec:\n  containers: *l{n}\n",
    )


def arg_doubling(n: int) -> Numbered:
    """``ARG A1=${A0}${A0}`` ... : 2**n characters if every substitution is made."""
    return Numbered(
        "ARG A{i}=${{A{j}}}${{A{j}}}\n",
        n,
        prefix="ARG A0=ab\n",
        suffix=f"FROM {SELF}/${{{{A{{n}}}}}}:tag\n",
    )


def nested_defaults(n: int) -> Nest:
    """``${A:-${A:-${A:- ... }}}`` ``n`` deep."""
    return Nest(
        b"${A:-", b"}", n, prefix=f"FROM {SELF}/".encode(), middle=b"repo", suffix=b":tag\n"
    )


yaml_texts = st.one_of(
    st.lists(workloads(), min_size=1, max_size=3).map(_yaml),
    st.builds(
        lambda services: _yaml([{"services": services}]),
        st.dictionaries(
            st.text(max_size=8),
            st.fixed_dictionaries({"image": images}, optional={"build": st.just(".")}),
            max_size=3,
        ),
    ),
    st.sampled_from([200, 3000]).map(merge_chain),
    st.sampled_from([4, 7]).map(laughs),
    st.sampled_from(
        [
            Repeat(b"[", 100000),
            Repeat(b"{a: ", 50000),
            Repeat(b"---\n", 100000),
            Repeat(
                b"    - {image: " + SELF.encode() + b"/x:1}\n",
                20000,
                prefix=b"kind: Pod\nspec:\n  containers:\n",
            ),
        ]
    ),
    st.sampled_from(
        [
            b"a: *undefined\n",
            b"kind: Pod\nspec: {containers: [{image: \x01\x02}]}\n",
            b"\xef\xbb\xbfkind: Pod\n\t- broken",
        ]
    ),
    st.binary(max_size=300),
    st.text(max_size=300).map(str.encode),
)
dockerfile_texts = st.one_of(
    st.lists(images, min_size=1, max_size=3).map(
        lambda refs: "".join(f"FROM {ref} AS s{i}\n" for i, ref in enumerate(refs)).encode()
    ),
    st.sampled_from([10, 40, 64]).map(arg_doubling),
    st.sampled_from([50, 5000]).map(nested_defaults),
    st.sampled_from(
        [
            Repeat(b"FROM \\\n", 100000),
            # A heredoc that never ends: its lines are read as instructions (see _dockerfile),
            # so they name the stand-in, never Docker Hub.
            Repeat(b"FROM " + SELF.encode() + b"/nothing:1\n", 1000, prefix=b"RUN <<EOF\n"),
            Nest(b"A", b"A", 100000, prefix=b"ARG ", middle=b"\nFROM ${", suffix=b"}\n"),
        ]
    ),
    st.sampled_from(
        [
            b"# escape=`\nFROM " + SELF.encode() + b"/repo:tag `\n AS x\n",
            b"FROM --platform=$BUILDPLATFORM " + SELF.encode() + b"/repo:tag\n",
        ]
    ),
    st.binary(max_size=300),
)


@dataclass(frozen=True)
class File:
    path: str
    content: Content


files = st.one_of(
    st.builds(
        File,
        st.sampled_from(["deploy.yaml", "a/b.yml", "compose.yaml", ".hidden/x.yaml", "n.json"]),
        yaml_texts,
    ),
    st.builds(
        File, st.sampled_from(["Dockerfile", "x/app.Dockerfile", "Containerfile"]), dockerfile_texts
    ),
)


def make_tree(top: Path, entries: list[File], special: list[str], host: str) -> None:
    for entry in entries:
        path = top / entry.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(render(entry.content).replace(SELF.encode(), host.encode()))
    for kind in special:
        if kind == "fifo":
            os.mkfifo(top / "fifo.yaml")
        elif kind == "dev-zero":
            (top / "zero.yaml").symlink_to("/dev/zero")
        elif kind == "sparse":
            with (top / "sparse.yaml").open("wb") as f:
                f.truncate(2 * 1024 * 1024 * 1024)
        elif kind == "self-loop":
            (top / "loop.yaml").symlink_to("loop.yaml")
        elif kind == "directory-loop":
            (top / "sub").mkdir(exist_ok=True)
            (top / "sub" / "up").symlink_to("..")
        elif kind == "not-utf8":
            (top / "latin1.yaml").write_bytes(b"image: caf\xe9\n")


def judge_output(done: Any, output: str) -> None:
    if output == "json":
        assert len(done.out) == done.stdout_size, f"stdout over what is kept\n{done!r}"
        try:
            data = json.loads(done.out)
        except ValueError:
            raise AssertionError(f"stdout is not JSON\n{done!r}") from None
        keys = set(data) if isinstance(data, dict) else None
        assert keys == {"occurrences", "problems", "notes"}, repr(done)
    else:
        bad = judge.control_characters(done.out)
        assert not bad, f"control characters {bad!r} in stdout\n{done!r}"


@settings(max_examples=examples(25))
@given(
    entries=st.lists(files, min_size=1, max_size=4),
    special=st.lists(st.sampled_from(SPECIAL), max_size=2, unique=True),
    output=st.sampled_from(["text", "json", "github"]),
)
@example(entries=[File("Dockerfile", arg_doubling(64))], special=[], output="text").via(
    "ARG defaults that double 64 times"
)
@example(entries=[File("Dockerfile", nested_defaults(5000))], special=[], output="text").via(
    "substitutions nested 5000 deep"
)
@example(entries=[File("deploy.yaml", merge_chain(3000))], special=[], output="text").via(
    "a chain of 3000 merge keys"
)
@example(entries=[File("Dockerfile", Repeat(b"FROM \\\n", 100000))], special=[], output="text").via(
    "100,000 continuation lines"
)
@example(entries=[], special=["fifo"], output="text").via("a FIFO named like a manifest")
@example(entries=[], special=["dev-zero"], output="text").via("a manifest that is /dev/zero")
@example(entries=[], special=["sparse"], output="text").via("a 2 GiB manifest")
def test_scan_process_over_hostile_files(
    standin: StandIn,
    workdir: Path,
    netlog: Path,
    allowance: float,
    entries: list[File],
    special: list[str],
    output: str,
) -> None:
    top = workdir / "scan"
    shutil.rmtree(top, ignore_errors=True)
    top.mkdir()
    make_tree(top, entries, special, standin.host)
    netlog.write_text("")
    standin.configure(Script())
    argv = [IMAGECHECK, "scan", str(top), "-o", output, "--deadline", str(DEADLINE)]
    argv += ["--timeout", "1", "--termination-log", str(workdir / "scan-termination-log")]

    done = run_bounded(argv, env=child_env(workdir, netlog), kill_after=DEADLINE + 4 + allowance)

    judge.assert_process_bounds(done, time_bound=DEADLINE + 1 + allowance, netlog=netlog)
    judge.assert_exit_code(done)
    judge.assert_stderr_lines(done)
    judge_output(done, output)
