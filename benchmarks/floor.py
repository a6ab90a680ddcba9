"""The floor: the least a client can do to check many images, for ``check_many.py`` to compare
against (issue #14).

Usage: ``python benchmarks/floor.py --registry URL [--connections N] [--ca-file PEM] IMAGE...``

No HTTP library: raw asyncio streams speaking HTTP/1.1 with keep-alive, ``N`` workers each
owning one connection to the registry (and, on a token registry, one to the token service,
opened when first needed). What it sends is what the protocol needs and nothing more:

1. ``GET /v2/`` once, on the first connection: the challenge (none, or ``Bearer realm=..,
   service=..``);
2. on a token registry, one ``GET realm?service=..&scope=repository:<name>:pull`` per
   repository (concurrent checks of one repository share the fetch), anonymously;
3. ``HEAD /v2/<name>/manifests/<tag>`` per image, with the manifest media types in ``Accept``
   and the token, if any: 200 is found (``Docker-Content-Digest``), 404 missing.

Every image must be on the registry ``--registry`` names. Output: a JSON array of
``{"image", "status", "digest"}`` in input order, as ``imagecheck check --output json``
prints it (so the benchmark verifies both the same way); exit 1 when an image is missing,
2 on any other answer or error. No retries, no redirects, no Basic auth: a floor, not a client.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import ssl
import sys
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field

ACCEPT = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
_PARAM = re.compile(r'(\w+)="([^"]*)"')
MAX_HEAD = 64 * 1024
MAX_BODY = 1024 * 1024


class FloorError(Exception):
    pass


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class Connection:
    """One keep-alive HTTP/1.1 connection to ``host:port``, (re)opened when needed."""

    host: str
    port: int
    tls: ssl.SSLContext | None
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    opened: int = 0

    async def request(self, method: str, target: str, headers: dict[str, str]) -> Response:
        # A kept-alive connection the server closed meanwhile fails once: open it again.
        for attempt in (1, 2):
            if self.writer is None:
                await self._open()
            assert self.reader is not None
            assert self.writer is not None
            lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host}:{self.port}"]
            lines += [f"{name}: {value}" for name, value in headers.items()]
            try:
                self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
                response = await _read_response(self.reader, method)
            except (ConnectionError, asyncio.IncompleteReadError):
                self.close()
                if attempt == 2:
                    raise
                continue
            if response.headers.get("connection", "").lower() == "close":
                self.close()
            return response
        raise AssertionError("unreachable")

    async def _open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(
            self.host, self.port, ssl=self.tls, limit=MAX_HEAD
        )
        self.opened += 1

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def _read_response(reader: asyncio.StreamReader, method: str) -> Response:
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    status = int(status_line.split(" ", 2)[1])
    headers: dict[str, str] = {}
    for line in header_lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if method == "HEAD" or status in (204, 304):
        return Response(status, headers, b"")
    if "content-length" in headers:
        length = int(headers["content-length"])
        if length > MAX_BODY:
            raise FloorError(f"body of {length} bytes")
        return Response(status, headers, await reader.readexactly(length))
    if headers.get("transfer-encoding", "").lower() == "chunked":
        return Response(status, headers, await _read_chunked(reader))
    headers["connection"] = "close"  # the body ends where the connection does
    return Response(status, headers, await reader.read(MAX_BODY))


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")  # no trailers expected
            return bytes(body)
        body += await reader.readexactly(size + 2)
        del body[-2:]
        if len(body) > MAX_BODY:
            raise FloorError("chunked body too large")


def _endpoint(url: urllib.parse.SplitResult) -> tuple[str, int]:
    host = url.hostname or ""
    return host, url.port or (443 if url.scheme == "https" else 80)


@dataclass
class Floor:
    registry: urllib.parse.SplitResult
    connections: int
    tls: ssl.SSLContext | None
    realm: urllib.parse.SplitResult | None = None
    service: str = ""
    tokens: dict[str, asyncio.Future[str]] = field(default_factory=dict)

    async def run(self, images: Sequence[str]) -> list[dict[str, str | None]]:
        host, port = _endpoint(self.registry)
        registry = [Connection(host, port, self.tls) for _ in range(self.connections)]
        token_service: list[Connection] = []
        await self._ping(registry[0])
        if self.realm is not None:
            realm_host, realm_port = _endpoint(self.realm)
            tls = self.tls if self.realm.scheme == "https" else None
            token_service = [
                Connection(realm_host, realm_port, tls) for _ in range(self.connections)
            ]
        queue: asyncio.Queue[int] = asyncio.Queue()
        for index in range(len(images)):
            queue.put_nowait(index)
        results: list[dict[str, str | None]] = [{} for _ in images]

        async def worker(number: int) -> None:
            own = registry[number]
            token_conn = token_service[number] if token_service else None
            while not queue.empty():
                index = queue.get_nowait()
                results[index] = await self._check(images[index], own, token_conn)

        try:
            await asyncio.gather(*(worker(n) for n in range(self.connections)))
        finally:
            for conn in registry + token_service:
                conn.close()
        return results

    async def _ping(self, conn: Connection) -> None:
        response = await conn.request("GET", "/v2/", {})
        if response.status == 200:
            return
        challenge = response.headers.get("www-authenticate", "")
        if response.status != 401 or not challenge.lower().startswith("bearer "):
            raise FloorError(f"ping answered {response.status} {challenge!r}")
        params = dict(_PARAM.findall(challenge))
        self.realm = urllib.parse.urlsplit(params["realm"])
        self.service = params.get("service", "")

    async def _token(self, repository: str, conn: Connection) -> str:
        shared = self.tokens.get(repository)
        if shared is not None:
            return await shared
        shared = self.tokens[repository] = asyncio.get_running_loop().create_future()
        assert self.realm is not None
        query = urllib.parse.urlencode(
            {"service": self.service, "scope": f"repository:{repository}:pull"}
        )
        try:
            response = await conn.request("GET", f"{self.realm.path}?{query}", {})
            if response.status != 200:
                raise FloorError(f"token service answered {response.status}")
            data = json.loads(response.body)
            shared.set_result(data.get("token") or data["access_token"])
        except Exception as exc:  # the checks waiting for this token hear it too
            shared.set_exception(exc)
            raise
        return shared.result()

    async def _check(
        self, image: str, conn: Connection, token_conn: Connection | None
    ) -> dict[str, str | None]:
        _, _, remainder = image.partition("/")
        if "@" in remainder:
            repository, _, reference = remainder.partition("@")
        else:
            repository, _, reference = remainder.rpartition(":")
        headers = {"Accept": ACCEPT}
        if token_conn is not None:
            headers["Authorization"] = f"Bearer {await self._token(repository, token_conn)}"
        response = await conn.request("HEAD", f"/v2/{repository}/manifests/{reference}", headers)
        if response.status == 200:
            digest = response.headers.get("docker-content-digest")
            return {"image": image, "status": "found", "digest": digest}
        if response.status == 404:
            return {"image": image, "status": "missing", "digest": None}
        raise FloorError(f"{image}: HEAD answered {response.status}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Raw asyncio HTTP/1.1 HEADs: the floor.")
    parser.add_argument("--registry", required=True, help="http(s)://HOST:PORT of the registry")
    parser.add_argument("--connections", type=int, default=16, help="connections (default 16)")
    parser.add_argument("--ca-file", help="PEM CA to trust for HTTPS")
    parser.add_argument("images", nargs="+")
    args = parser.parse_args(argv)
    registry = urllib.parse.urlsplit(args.registry)
    wanted = registry.netloc
    if any(image.partition("/")[0] != wanted for image in args.images):
        parser.error(f"every image must be on {wanted}")
    tls = ssl.create_default_context(cafile=args.ca_file) if args.ca_file else None
    if registry.scheme == "https" and tls is None:
        tls = ssl.create_default_context()
    floor = Floor(registry, max(1, args.connections), tls)
    try:
        results = asyncio.run(floor.run(args.images))
    except (FloorError, OSError, asyncio.IncompleteReadError, ValueError, KeyError) as exc:
        print(f"floor: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    json.dump(results, sys.stdout)
    return 1 if any(r["status"] == "missing" for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
