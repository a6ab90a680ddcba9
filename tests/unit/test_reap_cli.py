"""``imagecheck reap`` through click: output, exit codes, and nothing written in --dry-run. The
command is handed the in-memory cluster (``ctx.obj``); the registry is faked by respx."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import respx
from click.testing import CliRunner, Result

from imagecheck.cli import cli
from imagecheck.cli._controller import CLUSTER
from imagecheck.cli._reap_loop import reap_loop
from imagecheck.cli._settings import start_run
from imagecheck.cluster import Outcome, ReapOptions, Selector
from imagecheck.cluster._model import JOB, JSON, POD, Forbidden, Kind, Unreachable
from imagecheck.cluster._reap import Action
from tests.support.fakecluster import FakeCluster
from tests.support.reapcase import MISSING, job, pod
from tests.support.reapcli import fake_registry, registry_defaults

FOUND = "registry.test/team/train:1.0.0"


def stuck_cluster() -> FakeCluster:
    cluster = FakeCluster()
    # The command reads the real clock: a month before the tests' date is past any grace.
    cluster.add(JOB, job(age=31 * 86400))
    cluster.add(POD, pod("train-1-abcde", stuck_for=30 * 86400))
    return cluster


def run(cluster: FakeCluster, args: list[str], env: dict[str, str | None]) -> Result:
    async def connect() -> Any:
        return cluster

    return CliRunner().invoke(cli, ["reap", *args], env=env, obj={CLUSTER: connect})


def test_fails_the_job_and_says_so(network: respx.MockRouter, env: dict[str, str | None]) -> None:
    fake_registry(network)
    cluster = stuck_cluster()
    result = run(cluster, ["--once"], env)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "acted: pod ml/train-1-abcde (Job ml/train-1 of CronJob ml/nightly): failed the Job: "
        f"missing {MISSING} (tag '1.0.1' not found in registry.test/team/train "
        "(manifest unknown))"
    ]
    assert [(w.verb, w.kind) for w in cluster.writes] == [
        ("patch", "jobs"),
        ("create", "events"),
        ("create", "events"),
    ]


def test_dry_run_json_writes_nothing(network: respx.MockRouter, env: dict[str, str | None]) -> None:
    fake_registry(network)
    cluster = stuck_cluster()
    result = run(cluster, ["--once", "--dry-run", "--output", "json", "-n", "ml"], env)
    assert result.exit_code == 0, result.output
    [line] = result.stdout.splitlines()
    answer = json.loads(line)
    assert (answer["action"], answer["verdict"], answer["job"]) == (
        "would act",
        "missing",
        "ml/train-1",
    )
    assert cluster.writes == []


def test_act_on_is_an_option(network: respx.MockRouter, env: dict[str, str | None]) -> None:
    fake_registry(network)
    cluster = stuck_cluster()
    result = run(cluster, ["--once", "--act-on", "denied,error", "--grace", "1h"], env)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("skipped: pod ml/train-1-abcde (Job ml/train-1 of CronJob")
    assert result.stdout.rstrip().endswith("(manifest unknown)): not acted on")
    assert cluster.writes == []


def test_forbidden_is_one_line_and_exit_4(env: dict[str, str | None]) -> None:
    cluster = stuck_cluster()
    cluster.forbidden.add(("list", "pods"))
    result = run(cluster, ["--once", "-n", "ml"], env)
    assert result.exit_code == 4
    assert result.stderr == (
        "imagecheck: error: forbidden: needs RBAC verb 'list' on resource 'pods' "
        "(apiGroups: [\"\"]) in namespace 'ml'\n"
    )
    assert result.stdout == ""


def test_usage_errors_exit_2(env: dict[str, str | None]) -> None:
    cluster = stuck_cluster()
    bad = run(cluster, ["--once", "--act-on", "missing,gone"], env)
    assert bad.exit_code == 2
    assert "expected a comma-separated list of missing, invalid, denied, error" in bad.stderr
    resync = run(cluster, ["--resync", "0"], env)
    assert resync.exit_code == 2
    assert resync.stderr.startswith("imagecheck: error: --resync: ")
    grace = run(cluster, ["--once", "--grace", "soon"], env)
    assert grace.exit_code == 2
    assert grace.stderr.startswith("imagecheck: error: --grace: ")
    assert cluster.writes == []


def test_help_documents_exit_codes(env: dict[str, str | None]) -> None:
    result = CliRunner().invoke(cli, ["reap", "--help"], env=env)
    assert result.exit_code == 0
    for words in ("--dry-run", "--grace", "--act-on", "--include-pods", "imagecheck.io/reaped"):
        assert words in result.stdout
    assert "4    the Kubernetes API refused" in result.stdout
    assert "reap" in CliRunner().invoke(cli, ["--help"], env=env).stdout


class FlakyCluster(FakeCluster):
    """An API server that cannot be reached for the first ``failures`` lists."""

    failures = 1

    def list(self, kind: Kind, selector: Selector = Selector()) -> AsyncIterator[JSON]:  # noqa: B008
        if self.failures:
            self.failures -= 1
            raise Unreachable("cannot reach the Kubernetes API at https://10.0.0.1: refused")
        return super().list(kind, selector)


def test_the_loop_outlives_an_unreachable_api(
    network: respx.MockRouter, capsys: pytest.CaptureFixture[str], small_trust_store: None
) -> None:
    fake_registry(network)
    cluster = FlakyCluster()
    cluster.add(JOB, job(age=31 * 86400))
    cluster.add(POD, pod("train-1-abcde", stuck_for=30 * 86400))
    slept: list[float] = []
    seen: list[Outcome] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    settings = start_run(registry_defaults())  # logs to stderr, as the command does
    asyncio.run(
        reap_loop(cluster, ReapOptions(), settings, seen.append, 0.05, lists=3, sleep=sleep)
    )
    assert slept == [1.0]  # the backoff's first step, not a resync
    assert capsys.readouterr().err == (
        "imagecheck: reap: cannot reach the Kubernetes API at "
        "https://10.0.0.1: refused; listing again in 1s\n"
    )
    # The second list fails the Job; the third finds it reaped already.
    assert [o.action for o in seen] == [Action.ACTED, Action.SKIPPED]
    assert [w.verb for w in cluster.writes] == ["patch", "create", "create"]


def test_the_loop_ends_on_a_refusal(small_trust_store: None) -> None:
    cluster = FakeCluster()
    cluster.forbidden.add(("list", "pods"))
    settings = start_run(registry_defaults())
    with pytest.raises(Forbidden):
        asyncio.run(reap_loop(cluster, ReapOptions(), settings, print, 30.0, lists=3))
