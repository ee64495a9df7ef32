"""The report load of `flightlog bench broker`: many keep-alive connections driven from one event loop.

A thread per agent with `http.client` costs the client more CPU per request than the server
spends on it, and on a 2-core machine that CPU is taken from the server. Here every agent's
connection is a coroutine of one asyncio loop sending a prepared request and reading the
answer's status line, headers and body (by Content-Length), nothing else.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import click
import orjson

from .broker_client import Agent, Connection

WAIT = 30.0  # seconds a connection may take to answer at most


@dataclass
class Posted:
    """What one agent's connection got through: acknowledged reports."""

    acked: int = 0


def report_bodies(agents: list[Agent]) -> list[bytes]:
    """A `/report` body for each agent: its run, its token, a small payload."""
    return [
        orjson.dumps(
            {"run_id": a.run_id, "token": a.token, "state": "working", "payload": {"tool": "shell", "n": k}}
        )
        for k, a in enumerate(agents)
    ]


def report_counts(operator: Connection) -> dict[str, int]:
    """Each run's report count, as the server of `operator`'s connection reads its runs."""
    status, body = operator.request("GET", "/api/v1/runs")
    if status != 200:
        raise click.ClickException(f"/api/v1/runs answered {status}")
    return {r["run_id"]: int(r.get("report_count", 0)) for r in orjson.loads(body)["runs"]}


def request_bytes(path: str, body: bytes) -> bytes:
    """An HTTP/1.1 POST of a JSON `body`, as an agent sends it."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _agent(port: int, request: bytes, share: int, end: float, posted: Posted) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for _ in range(share):
            writer.write(request)
            status_line = await asyncio.wait_for(reader.readline(), WAIT)
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = await reader.readexactly(length)
            if b" 200 " not in status_line:
                raise click.ClickException(f"/report answered {status_line!r}: {body[:200]!r}")
            posted.acked += 1
            if time.perf_counter() >= end:
                break
    finally:
        writer.close()


def post_all(
    port: int,
    path: str,
    bodies: list[bytes],
    share: int,
    seconds: float,
    *,
    ports: list[int] | None = None,
) -> tuple[list[int], float]:
    """Each body posted `share` times at most by its own connection, all at once, for `seconds`.

    With `ports`, body i goes to server `ports[i]` (several servers at once), else to `port`.
    Returns the acknowledgements per body and the seconds it took.
    """
    posted = [Posted() for _ in bodies]
    targets = ports if ports is not None else [port] * len(bodies)

    async def main() -> float:
        start = time.perf_counter()
        end = start + seconds
        await asyncio.gather(
            *(
                _agent(to, request_bytes(path, b), share, end, p)
                for to, b, p in zip(targets, bodies, posted, strict=True)
            )
        )
        return time.perf_counter() - start

    elapsed = asyncio.run(main())
    return [p.acked for p in posted], elapsed
