"""The cloud identities' inputs that others write: the endpoint a pod's identity is first asked
at (the EKS Pod Identity agent, the GKE metadata server, Azure's instance metadata service),
answering anything at all, and the files a pod has mounted (the agent's authorization token,
a workload identity federation config and its subject token, an AKS federated token), holding
anything at all.

Whatever they hold, a flow gives a credential or one typed error of one printable line: never
a traceback, never a secret it was given (every secret field and file holds the canary),
never past its deadline. The flows run in this process, under the network guard: the steps
after the first endpoint go to refused addresses, so nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from imagecheck._deadline import Deadline
from imagecheck.authn import CloudKeychain
from imagecheck.errors import ImagecheckError
from imagecheck.reference import parse_reference
from tests.fuzz import judge, netguard
from tests.fuzz.profiles import examples
from tests.fuzz.strategies import CANARY, hostile_actions, json_values, replies
from tests.support.standin import Reply, Script, StandIn

DEADLINE = 2.0
# Where every later step goes: https to a port nothing listens on.
NOWHERE = "https://127.0.0.1:9"
ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/app:1"
ARTIFACT = "us-docker.pkg.dev/project/repo/app:1"
ACR = "myregistry.azurecr.io:9/app:1"


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


# Answers shaped as each endpoint's, with the canary in every secret, and their near misses.
_AGENT = {"AccessKeyId": "ASIA" + CANARY, "SecretAccessKey": CANARY, "Token": CANARY,
          "Expiration": "2030-01-01T00:00:00Z", "AccountId": "123456789012"}  # fmt: skip
_GOOGLE = {"access_token": CANARY, "expires_in": 3599, "token_type": "Bearer"}
_AZURE = {"access_token": CANARY, "expires_in": "3599", "expires_on": "1900000000",
          "resource": "https://containerregistry.azure.net", "token_type": "Bearer"}  # fmt: skip


def _shaped(document: dict[str, Any]) -> st.SearchStrategy[bytes]:
    mutated = st.builds(
        lambda key, value: _json({**document, key: value}),
        st.sampled_from(sorted(document)),
        json_values,
    )
    dropped = st.sampled_from(sorted(document)).map(
        lambda key: _json({k: v for k, v in document.items() if k != key})
    )
    return st.one_of(st.just(_json(document)), mutated, dropped)


def _answers(document: dict[str, Any], *head: tuple[str, str]) -> st.SearchStrategy[Any]:
    shaped = replies(
        status=st.sampled_from([200, 200, 200, 400, 403, 404, 429, 500]),
        head=st.just([("Content-Type", "application/json"), *head]),
        body=st.one_of(_shaped(document), json_values.map(_json)),
    )
    return st.one_of(shaped, hostile_actions)


files = st.one_of(
    st.just(CANARY.encode()),
    st.sampled_from(["\n", "\r\nX: 1", "\x00", "\x1b[31m", " ", "é"]).map(
        lambda tail: (CANARY + tail).encode()
    ),
    st.binary(max_size=200),
    st.just(b"x" * (2 * 1024 * 1024)),
    st.just(b""),
)
federation_configs = st.one_of(
    st.builds(
        lambda extra: _json(
            {
                "type": "external_account",
                "audience": "//iam.googleapis.com/projects/1/locations/global/"
                "workloadIdentityPools/p/providers/k",
                "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
                "token_url": f"{NOWHERE}/v1/token",
                "credential_source": {"file": "@@TOKEN@@"},
                **extra,
            }
        ),
        st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "audience",
                    "token_url",
                    "credential_source",
                    "service_account_impersonation_url",
                    "subject_token_type",
                ]
            ),
            json_values,
            max_size=2,
        ),
    ),
    json_values.map(_json),
    st.binary(max_size=100),
)


@pytest.fixture(scope="module")
def endpoint() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


def _outcome(image: str, env: dict[str, str], netlog: Path) -> tuple[str, float]:
    """The flow's credential or error, as the words a user could see, and how long it took."""
    chain = CloudKeychain(env)
    started = time.monotonic()
    with netguard.installed(str(netlog)):
        try:
            found = asyncio.run(chain.aresolve(parse_reference(image), Deadline.after(DEADLINE)))
        except ImagecheckError as exc:
            text = str(exc)
            assert len(text.splitlines()) == 1, f"not one line: {text!r}"
            assert not judge.control_characters(text), f"control characters: {text!r}"
        else:
            text = " ".join(f"{c.username} {c.source}" for c in found)
            assert all(CANARY not in repr(c) for c in found)
    return text, time.monotonic() - started


def _judge(text: str, elapsed: float, caplog: pytest.LogCaptureFixture) -> None:
    judge.assert_no_secret([CANARY], text, caplog.text)
    assert elapsed < DEADLINE + 3, f"took {elapsed:.1f}s"


@settings(max_examples=examples(30))
@given(answer=_answers(_AGENT), token=files)
@example(answer=Reply(200, (("Content-Type", "application/json"),), _json(_AGENT)), token=b"t")
def test_the_pod_identity_agent_and_its_token_file(
    endpoint: StandIn,
    tmp_path_factory: pytest.TempPathFactory,
    caplog: pytest.LogCaptureFixture,
    answer: Any,
    token: bytes,
) -> None:
    home = tmp_path_factory.mktemp("aws", numbered=True)
    (home / "token").write_bytes(token)
    endpoint.configure(Script({"other": (answer,)}))
    env = {
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": f"http://{endpoint.host}/v1/credentials",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(home / "token"),
        "AWS_ENDPOINT_URL_ECR": NOWHERE,
    }
    with caplog.at_level(logging.DEBUG):
        text, elapsed = _outcome(ECR, env, home / "netlog")
    _judge(text, elapsed, caplog)


@settings(max_examples=examples(30))
@given(answer=_answers(_GOOGLE, ("Metadata-Flavor", "Google")))
def test_the_metadata_server(
    endpoint: StandIn,
    tmp_path_factory: pytest.TempPathFactory,
    caplog: pytest.LogCaptureFixture,
    answer: Any,
) -> None:
    home = tmp_path_factory.mktemp("google", numbered=True)
    endpoint.configure(Script({"other": (answer,)}))
    with caplog.at_level(logging.DEBUG):
        text, elapsed = _outcome(ARTIFACT, {"GCE_METADATA_HOST": endpoint.host}, home / "netlog")
    _judge(text, elapsed, caplog)


@settings(max_examples=examples(30))
@given(config=federation_configs, token=files)
def test_a_federation_config_and_its_subject_token(
    tmp_path_factory: pytest.TempPathFactory,
    caplog: pytest.LogCaptureFixture,
    config: bytes,
    token: bytes,
) -> None:
    home = tmp_path_factory.mktemp("federation", numbered=True)
    (home / "token").write_bytes(token)
    (home / "config.json").write_bytes(config.replace(b"@@TOKEN@@", str(home / "token").encode()))
    env = {"GOOGLE_APPLICATION_CREDENTIALS": str(home / "config.json")}
    with caplog.at_level(logging.DEBUG):
        text, elapsed = _outcome(ARTIFACT, env, home / "netlog")
    _judge(text, elapsed, caplog)


@settings(max_examples=examples(30))
@given(answer=_answers(_AZURE), token=files)
def test_azure_metadata_and_a_federated_token_file(
    endpoint: StandIn,
    tmp_path_factory: pytest.TempPathFactory,
    caplog: pytest.LogCaptureFixture,
    answer: Any,
    token: bytes,
) -> None:
    home = tmp_path_factory.mktemp("azure", numbered=True)
    (home / "token").write_bytes(token)
    endpoint.configure(Script({"other": (answer,)}))
    imds = {"AZURE_POD_IDENTITY_AUTHORITY_HOST": f"http://{endpoint.host}"}
    workload = {
        "AZURE_FEDERATED_TOKEN_FILE": str(home / "token"),
        "AZURE_CLIENT_ID": "00000000-0000-0000-0000-00000000c11e",
        "AZURE_TENANT_ID": "00000000-0000-0000-0000-0000000007e7",
        "AZURE_AUTHORITY_HOST": NOWHERE,
    }
    for env in (imds, workload):
        with caplog.at_level(logging.DEBUG):
            text, elapsed = _outcome(ACR, env, home / "netlog")
        _judge(text, elapsed, caplog)
