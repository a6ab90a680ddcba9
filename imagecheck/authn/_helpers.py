"""Docker credential helpers: ``docker-credential-<name> get``.

The protocol (docker/docker-credential-helpers): the server URL goes to the helper's stdin;
it prints ``{"ServerURL": ..., "Username": ..., "Secret": ...}``, or exits non-zero saying
``credentials not found in native keychain`` when it has nothing for that server. A
``Username`` of ``<token>`` means the secret is an identity (refresh) token, as
``docker-credential-ecr-login``, ``-gcr`` and ``-acr-env`` may answer.

A run asks each helper once per server URL (:class:`CredentialHelpers`), on first need,
inside the run's deadline: the checks of different registries ask concurrently, the checks of
one registry share one answer, and a helper still running at the deadline is killed with
everything it started: helpers are other people's programs, and one asked once per
repository, one after another, would spend many times the deadline.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from imagecheck._deadline import Deadline
from imagecheck.authn._helperproc import (
    DEFAULT_HELPER_TIMEOUT,
    HelperAnswer,
    ask_helper,
    helper_executable,
    run_helper,
)
from imagecheck.errors import CredentialsError, DeadlineExceeded

# Distinct (helper, server) answers kept: a webhook meets registries named by others.
MAX_REMEMBERED = 1024


_Key = tuple[str, str]


class CredentialHelpers:
    """The answers of credential helpers for one run: each helper is asked once per server
    URL, and its answer (``None`` and failures included) is what every later check of that
    registry gets. Asks of one server that overlap share one process; asks of different
    servers run concurrently.

    A helper gets ``timeout`` seconds, or what is left of the asking check's deadline when
    that is less; cut short by the deadline it is killed, and the next check (a later
    ``--wait`` round, another review) may ask again.
    """

    def __init__(
        self, *, timeout: float = DEFAULT_HELPER_TIMEOUT, max_remembered: int = MAX_REMEMBERED
    ) -> None:
        self.timeout = timeout
        self._max = max_remembered
        self._done: OrderedDict[_Key, HelperAnswer | CredentialsError | None] = OrderedDict()
        self._inflight: dict[_Key, asyncio.Task[HelperAnswer | None]] = {}

    async def get(self, name: str, server_url: str, deadline: Deadline) -> HelperAnswer | None:
        key = (name, server_url)
        if key in self._done:
            return self._recall(key)
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.ensure_future(self._ask(name, server_url, deadline))
            self._inflight[key] = task
            task.add_done_callback(lambda _: self._inflight.pop(key, None))
        # shield: a check cancelled at its deadline must not kill the answer others await;
        # the helper's own timeout (at most that deadline) ends it.
        return await asyncio.shield(task)

    def get_sync(self, name: str, server_url: str) -> HelperAnswer | None:
        """The same answers for a caller outside the event loop (``Keychain.resolve``)."""
        key = (name, server_url)
        if key not in self._done:
            try:
                self._remember(key, run_helper(name, server_url, timeout=self.timeout))
            except CredentialsError as exc:
                self._remember(key, exc)
        return self._recall(key)

    async def _ask(self, name: str, server_url: str, deadline: Deadline) -> HelperAnswer | None:
        key = (name, server_url)
        left = deadline.remaining()
        timeout = min(self.timeout, left)
        exe = helper_executable(name)
        if left <= 0:
            raise DeadlineExceeded(f"credential helper {exe} not asked: the deadline has passed")
        try:
            answer = await ask_helper(name, server_url, timeout=timeout)
        except TimeoutError:
            if timeout < self.timeout:  # not remembered: the next deadline may be longer
                raise DeadlineExceeded(
                    f"credential helper {exe} did not answer before the deadline ({left:.1f}s left)"
                ) from None
            error = CredentialsError(f"credential helper {exe} did not answer within {timeout:g}s")
            self._remember(key, error)
            raise error from None
        except CredentialsError as exc:
            self._remember(key, exc)
            raise
        self._remember(key, answer)
        return answer

    def _remember(self, key: _Key, outcome: HelperAnswer | CredentialsError | None) -> None:
        self._done[key] = outcome
        while len(self._done) > self._max:
            self._done.popitem(last=False)

    def _recall(self, key: _Key) -> HelperAnswer | None:
        outcome = self._done[key]
        if isinstance(outcome, CredentialsError):
            raise CredentialsError(str(outcome))
        return outcome
