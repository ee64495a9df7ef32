"""Load: a thousand long polls held open on a real server while other agents keep reporting.

One `flightlog serve` process on loopback, one asyncio client with a connection for every
request in flight. Every acknowledged report must be in the log exactly once, every poll
must complete, every pushed message must reach its poller exactly once, and a run's control
queue must refuse (429) a push past its bound without appending or losing anything.
"""

from __future__ import annotations

import asyncio
import resource
import secrets
from collections import Counter
from typing import Any

import httpx
import orjson
import pytest

from eventlog import open_log
from tools.bench.broker_client import ServerProcess

from .raw_client import RawClient

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

POLLERS = 1000
TARGET_EVERY = 10  # every tenth poller is pushed messages
PUSHES_PER_TARGET = 2
REPORTERS = 8
MIN_REPORTS = 200  # reports acknowledged at least, all while the polls are held
QUEUE_LIMIT = 5
WITHIN = 60.0  # seconds the whole load may take: the test fails rather than hangs


@pytest.fixture
def nofile():
    """Room for two thousand sockets and then some: the soft limit raised to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 3 * POLLERS + 500
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {wanted}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture
def served(tmp_path, nofile):
    """A server (started after the limit was raised: it inherits it) and its operator token."""
    token = secrets.token_hex(16)
    db = tmp_path / "load.db"
    # Reporters report as fast as the server answers: no write rate bounds them here. One
    # sender may fill the whole bounded queue.
    options = (
        "--queue-limit",
        str(QUEUE_LIMIT),
        "--queue-share",
        str(QUEUE_LIMIT),
        "--events-per-second",
        "0",
    )
    server = ServerProcess(str(db), token, options)
    yield server, token, db
    server.close()


class Load:
    """The client side of the run: what was acknowledged, polled and pushed."""

    def __init__(self, client: RawClient, operator: dict[str, str]) -> None:
        self.client = client
        self.operator = operator
        self.tokens: dict[str, str] = {}
        self.acked: list[tuple[str, int]] = []  # (run, n) of every acknowledged report
        self.received: dict[str, list[str]] = {}  # poller run -> message ids, in arrival order
        self.polls = 0
        self.in_flight = 0
        self.most_in_flight = 0
        self.all_polling = asyncio.Event()
        self.pushed = asyncio.Event()
        self.reported = asyncio.Event()

    async def post(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
        headers = {"Content-Type": "application/json", **(headers or {})}  # as every agent sends
        status, kind, answer = await self.client.post(path, orjson.dumps(body), headers)
        assert status == 200, (path, status, answer)
        return orjson.loads(answer) if kind == "application/json" else None

    async def register(self, run_id: str) -> None:
        self.tokens[run_id] = (await self.post("/register", {"run_id": run_id}))["token"]

    async def poll(self, run_id: str) -> list[dict[str, Any]]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        if self.most_in_flight == POLLERS:
            self.all_polling.set()
        try:
            messages = await self.post("/poll-control", {"run_id": run_id, "token": self.tokens[run_id]})
        finally:
            self.in_flight -= 1
        self.polls += 1
        return list(messages or [])

    async def poller(self, run_id: str) -> None:
        """Poll until every push was sent, and once more: whatever was queued arrives by then."""
        got = self.received.setdefault(run_id, [])
        while True:
            pushes_done = self.pushed.is_set()
            got.extend(m["id"] for m in await self.poll(run_id))
            if pushes_done:
                return

    async def reporter(self, run_id: str) -> None:
        """Report until the polls are done and MIN_REPORTS were acknowledged (all reporters together)."""
        token = self.tokens[run_id]
        n = 0
        while not (self.reported.is_set() and len(self.acked) >= MIN_REPORTS):
            body = {"run_id": run_id, "token": token, "state": "working", "payload": {"n": n}}
            assert await self.post("/report", body) == {"ok": True}
            self.acked.append((run_id, n))
            n += 1

    async def pusher(self, targets: list[str]) -> None:
        # Pushed only once every poll is in flight, so most messages wake a waiting poll.
        await self.all_polling.wait()

        async def push(run_id: str) -> None:
            for k in range(PUSHES_PER_TARGET):
                message = {"id": f"{run_id}/{k}", "type": "steer", "run_id": run_id, "payload": {"k": k}}
                assert await self.post("/push-control", message, self.operator) == {"queued": True}

        await asyncio.gather(*(push(run_id) for run_id in targets))
        self.pushed.set()


async def drive(port: int, operator_token: str) -> Load:
    # A connection for every request in flight at once: a thousand polls, the reporters, the
    # pusher. The server keeps an idle connection 120 s (tools.http.binding.KEEP_ALIVE), far
    # longer than any of these waits between its requests.
    client = RawClient(port)
    try:
        load = Load(client, {"Authorization": f"Bearer {operator_token}"})
        pollers = [f"poller-{i:04d}" for i in range(POLLERS)]
        reporters = [f"reporter-{i}" for i in range(REPORTERS)]
        for start in range(0, len(pollers), 100):
            await asyncio.gather(*(load.register(r) for r in pollers[start : start + 100]))
        await asyncio.gather(*(load.register(r) for r in reporters))
        targets = pollers[::TARGET_EVERY]

        reporting = [asyncio.create_task(load.reporter(r)) for r in reporters]
        await asyncio.gather(load.pusher(targets), *(load.poller(r) for r in pollers))
        load.reported.set()
        await asyncio.gather(*reporting)
        return load
    finally:
        await client.aclose()


async def bounded_queue(url: str, operator_token: str) -> None:
    """Past the bound, a message from a run is refused with 429; nothing is appended, nothing
    queued is lost, and the operator's control still gets in."""
    operator = {"Authorization": f"Bearer {operator_token}"}
    async with httpx.AsyncClient(base_url=url, timeout=30.0) as client:
        token = (await client.post("/register", json={"run_id": "bounded"})).json()["token"]
        sender = (await client.post("/register", json={"run_id": "sender"})).json()["token"]

        async def push(message_id: str) -> httpx.Response:
            body = {"run_id": "sender", "token": sender, "from_run_id": "sender", "to_run_id": "bounded",
                    "type": "note", "payload": {"id": message_id}}  # fmt: skip
            return await client.post("/send", json=body)

        async def logged() -> int:
            verified = (await client.get("/api/v1/verify", headers=operator)).json()
            assert verified["ok"] is True
            return int(verified["checked"])

        for i in range(QUEUE_LIMIT):
            assert (await push(f"b{i}")).json() == {"queued": True}
        before = await logged()
        for i in range(3):
            refused = await push(f"over{i}")
            assert refused.status_code == 429, refused.text
        assert await logged() == before  # no event for any refused push
        stop = {"id": "stop", "type": "stop", "run_id": "bounded"}
        assert (await client.post("/push-control", json=stop, headers=operator)).json() == {"queued": True}
        detail = (await client.get("/api/v1/runs/bounded", headers=operator)).json()
        sent = [orjson.loads(m["payload"])["id"] if isinstance(m["payload"], str) else m["payload"]["id"]
                for m in detail["control_queue"][:-1]]  # fmt: skip
        assert sent == [f"b{i}" for i in range(QUEUE_LIMIT)]
        polled = (await client.post("/poll-control", json={"run_id": "bounded", "token": token})).json()
        assert [m["payload"]["id"] for m in polled[:-1]] == [f"b{i}" for i in range(QUEUE_LIMIT)]
        assert polled[-1]["type"] == "stop"
        assert (await push("after")).json() == {"queued": True}  # drained: room again


def test_a_thousand_long_polls_while_agents_report(served):
    server, operator_token, db = served
    url = f"http://127.0.0.1:{server.port}"
    load = asyncio.run(asyncio.wait_for(drive(server.port, operator_token), WITHIN))
    asyncio.run(asyncio.wait_for(bounded_queue(url, operator_token), WITHIN))
    server.close()  # a clean stop: the log is read below from the file alone

    # Every poll completed, and a thousand were in flight at once.
    assert load.most_in_flight == POLLERS
    assert load.in_flight == 0
    assert load.polls >= POLLERS * 2
    # Each pushed message reached its poller exactly once; nobody else got anything.
    for i, (run_id, got) in enumerate(sorted(load.received.items())):
        expected = [f"{run_id}/{k}" for k in range(PUSHES_PER_TARGET)] if i % TARGET_EVERY == 0 else []
        assert sorted(got) == expected, run_id
    # Every acknowledged report is in the log exactly once, and nothing else was reported.
    assert len(load.acked) >= MIN_REPORTS
    log = open_log(db)
    try:
        recorded = Counter(
            (r.data["run_id"], orjson.loads(r.data["payload"])["n"])
            for r in log.read_all()
            if r.type == "RunReported"
        )
        assert log.verify().ok
    finally:
        log.close()
    assert recorded == Counter(load.acked)
