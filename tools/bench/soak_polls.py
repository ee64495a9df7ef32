"""The soak's two checks of what must not grow: strangers' requests, and many long polls at once.

- **strangers**: requests that name run ids nobody registered, with a wrong token; each is
  refused (401) and must leave no thread behind (a thread per run id named would show).
- **long polls**: a thousand runs each hold one `/poll-control` on an empty queue at once;
  each must be answered within the server's poll timeout plus 0.2 s, timed by the client
  from the moment its request was written to the moment the answer was read.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import resource
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import click
import orjson

from .approvals import percentile
from .broker_client import WAIT, Connection

POLL_TIMEOUT = 2.0  # the server's (the seed's) poll timeout, in seconds
POLL_SLACK = 0.2  # ... and how late an answer may be
CLIENTS = 4  # connections sending the strangers' requests


def server_stats(pid: int) -> tuple[float, int]:
    """(RSS in MiB, thread count) of a process, from /proc."""
    rss, threads = 0.0, 0
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return rss, threads


def strangers(port: int, pid: int, count: int) -> dict[str, int]:
    """Send `count` refused requests naming unknown runs; how many threads the server gained."""
    before = server_stats(pid)[1]
    errors: list[BaseException] = []

    def client(k: int) -> None:
        conn = Connection(port)
        try:
            for _ in range(k, count, CLIENTS):
                body = orjson.dumps({"run_id": f"ghost-{uuid.uuid4()}", "token": "nope"})
                status, answer = conn.post("/heartbeat", body)
                if status != 401:
                    raise click.ClickException(f"a stranger's heartbeat answered {status}: {answer[:200]!r}")
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread below
            errors.append(e)
        finally:
            conn.close()

    _in_clients(client)
    if errors:
        raise errors[0]
    return {"threads_added": server_stats(pid)[1] - before}


def _in_clients(client: Callable[[int], None]) -> None:
    """Run `client(k)` for k in range(CLIENTS), each on its own thread, and wait for them all."""
    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 10)


def long_polls(port: int, count: int, tokens: dict[str, str] | None = None) -> dict[str, Any]:
    """Hold `count` polls at once on empty queues; how many were answered within the timeout + slack.

    The polls are those of the runs of `tokens` (run id -> token), else of `count` runs registered first.
    """
    if tokens is None:
        tokens = register_runs(port, [f"soak-poller-{i:05d}" for i in range(count)])
    room_for(count + 100)
    # This process's own collector pausing its loop (40 ms at a time, with a thousand
    # connections open) would be counted as the server's lateness: it waits until the end.
    gc.disable()
    try:
        took = asyncio.run(asyncio.wait_for(_poll_all(port, tokens), WAIT))
    finally:
        gc.enable()
    answered = [t for t in took if t is not None]
    within = sum(1 for t in answered if t <= POLL_TIMEOUT + POLL_SLACK)
    return {
        "timeout_s": POLL_TIMEOUT,
        "answered": len(answered),
        "within": within,
        "p50_s": round(percentile(answered, 50), 3) if answered else 0.0,
        "max_s": round(max(answered), 3) if answered else 0.0,
    }


def register_runs(port: int, run_ids: list[str]) -> dict[str, str]:
    """Register `run_ids` over a few connections at once; their tokens by run id."""
    tokens: dict[str, str] = {}
    lock = threading.Lock()

    def client(k: int) -> None:
        conn = Connection(port)
        try:
            for run_id in run_ids[k::CLIENTS]:
                token = conn.call("/register", {"run_id": run_id})["token"]
                with lock:
                    tokens[run_id] = token
        finally:
            conn.close()

    _in_clients(client)
    if len(tokens) != len(run_ids):
        raise click.ClickException(f"only {len(tokens)} of {len(run_ids)} poller runs registered")
    return tokens


def room_for(sockets: int) -> None:
    """Raise this process's open-file limit towards its hard limit, for `sockets` connections."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < sockets:
        wanted = sockets if hard == resource.RLIM_INFINITY else min(hard, sockets)
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


async def _poll_all(port: int, tokens: dict[str, str]) -> list[float | None]:
    """Connect every poller first, then write every poll at once; each poll's seconds to its answer."""
    streams = [await asyncio.open_connection("127.0.0.1", port) for _ in tokens]
    requests = []
    for run_id, token in tokens.items():
        body = orjson.dumps({"run_id": run_id, "token": token})
        head = "POST /poll-control HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        requests.append(head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    gate = asyncio.Event()

    async def poll(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
    ) -> float | None:
        await gate.wait()
        started = time.perf_counter()
        writer.write(request)
        try:
            status = await reader.readline()
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
        except (ConnectionError, asyncio.IncompleteReadError):
            return None
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        took = time.perf_counter() - started
        return took if status.split()[1:2] == [b"200"] else None

    tasks = [asyncio.ensure_future(poll(r, wr, q)) for (r, wr), q in zip(streams, requests, strict=True)]
    await asyncio.sleep(0)  # every task is at the gate
    gate.set()
    return list(await asyncio.gather(*tasks))
