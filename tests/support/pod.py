"""A pod as the kubelet runs one with an initContainer (``examples/job.yaml``): the
initContainer first; the main container's image is pulled, and the container started, only
when the initContainer exited 0 (``restartPolicy: Never``: a failed initContainer fails the
pod, and nothing of the main container is ever fetched).
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.support.runc import Container, Exited, Runner


@dataclass(frozen=True)
class PodOutcome:
    init: Exited
    main: Exited | None  # None: never started (nor pulled)

    @property
    def phase(self) -> str:
        if self.init.code != 0:
            return "Failed"
        assert self.main is not None
        return "Succeeded" if self.main.code == 0 else "Failed"


def run_pod(runner: Runner, init: Container, main: Container, *, plain_http: bool) -> PodOutcome:
    """Run ``init``; on exit 0 pull ``main.image`` (a registry reference; the kubelet's pull,
    ``ctr images pull``) and run it."""
    first = runner.run(init)
    if first.code != 0:
        return PodOutcome(first, None)
    scheme = ["--plain-http"] if plain_http else []
    runner.ctr("images", "pull", *scheme, main.image)
    return PodOutcome(first, runner.run(main))


def content_digests(runner: Runner) -> set[str]:
    """Every blob in the namespace's content store (``ctr content ls``)."""
    lines = runner.ctr("content", "ls", "--quiet").split()
    return {line for line in lines if line.startswith("sha256:")}


def image_names(runner: Runner) -> set[str]:
    return set(runner.ctr("images", "ls", "--quiet").split())
