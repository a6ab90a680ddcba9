"""``POST /mutate`` on the webhook server machinery: the aiohttp route, and the answer the
request framer gives in the loop turn a review arrives (``fastpath/_framing.py``).

A server that mounts it (``imagecheck gate``) adds :meth:`MutateEndpoint.routes` to its app and
passes :meth:`MutateEndpoint.answer_now` and :data:`MUTATE_PATHS` to its ``Listener``::

    endpoint = MutateEndpoint(gate="imagecheck.io/images", namespaces=None, ready=is_ready)
    app.add_routes(endpoint.routes())
    Listener(..., answer_now=endpoint.answer_now, review_paths=MUTATE_PATHS)

Every answer but a pruned one needs no I/O, so nearly every review is answered by the framer;
a body too big or too slow for it, or compressed, takes aiohttp's route, read within the same
bounds as ``serve``'s reviews (``_body.py``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web

from imagecheck.webhook._body import ReadSlot, Unreadable, read_review_body
from imagecheck.webhook._limits import DEFAULT_READ_TIMEOUT
from imagecheck.webhook._mutate import Mutation, answer, mutation_of
from imagecheck.webhook._review import load_json, load_json_pruned

log = logging.getLogger("imagecheck.webhook")

MUTATE_PATH = "/mutate"
MUTATE_PATHS = frozenset({MUTATE_PATH})
# Big bodies read at once, as ``serve``'s READ_SLOTS: a pod review is a few KiB.
READ_SLOTS = 16


class MutateEndpoint:
    """``POST /mutate`` for pods created in ``namespaces`` (None: all): each gets the scheduling
    gate ``gate`` while ``ready()``. ``observe(outcome)`` is told of every answer (a
    :class:`~imagecheck.webhook._mutate.Mutation` outcome, or ``bad_request``), for metrics."""

    def __init__(
        self,
        *,
        gate: str,
        namespaces: frozenset[str] | None,
        ready: Callable[[], bool],
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        observe: Callable[[str], None] = lambda outcome: None,
    ) -> None:
        self.gate = gate
        self.namespaces = namespaces
        self.ready = ready
        self.read_timeout = read_timeout
        self.observe = observe
        self._reading: asyncio.Semaphore | None = None  # made in the server's loop

    def routes(self) -> list[web.RouteDef]:
        return [web.post(MUTATE_PATH, self.mutate)]

    async def mutate(self, request: web.Request) -> web.Response:
        """aiohttp's route: the review read within bounds, answered (a 400, 408, 413 or 415
        when there is none to answer)."""
        if self._reading is None:
            self._reading = asyncio.Semaphore(READ_SLOTS)
        slot = ReadSlot(self._reading)
        try:
            body = await read_review_body(request, slot, self.read_timeout)
            try:
                mutation = self._mutation(body)
            except RecursionError:  # deeper than Python's parser goes: prune, in a thread
                mutation = await asyncio.to_thread(self._mutation, body, load_json_pruned)
        except Unreadable as exc:
            return web.json_response(self._refused(exc), status=exc.status, headers=exc.headers)
        finally:
            slot.release()
        return web.Response(body=self._answered(mutation), content_type="application/json")

    def answer_now(self, body: bytes) -> tuple[int, bytes] | None:
        """The HTTP status and JSON body :meth:`mutate` would answer for ``body``; None when
        the review nests too deeply to parse in the loop (aiohttp's route prunes it)."""
        try:
            mutation = self._mutation(body)
        except RecursionError:
            return None
        except Unreadable as exc:
            return exc.status, json.dumps(self._refused(exc)).encode()
        return 200, self._answered(mutation)

    def _mutation(self, body: bytes, load: Callable[[bytes], Any] = load_json) -> Mutation:
        return mutation_of(
            body, gate=self.gate, namespaces=self.namespaces, ready=self.ready, load=load
        )

    def _answered(self, mutation: Mutation) -> bytes:
        self.observe(mutation.outcome)
        log.info(
            "mutate",
            extra={
                "uid": mutation.uid[:256],
                "namespace": mutation.namespace,
                "outcome": mutation.outcome,
                "gated": mutation.patch is not None,
            },
        )
        return answer(mutation)

    def _refused(self, exc: Unreadable) -> dict[str, str]:
        self.observe("bad_request")
        log.warning("bad review", extra={"reason": exc.reason, "status": exc.status})
        return {"error": exc.reason}
