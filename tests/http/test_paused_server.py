"""A `flightlog serve` frozen mid-write (SIGSTOP) cannot stall another server on the same PostgreSQL.

When it is caught with its backend idle in a transaction holding the writer row (a group
re-chained after the other server's: most groups are one statement and never hold it across a
round trip), the session settings the log sets itself end that transaction within a bound; either
way the other server's writes go on, and when the frozen one resumes it finds its transaction
gone and writes again: every acknowledged report is in the log once, and nothing that was not
acknowledged is.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections import Counter

import httpx
import orjson
import psycopg
import pytest

from eventlog._postgres import WRITER_STALL_BOUND

from .server import ServerProcess
from .test_two_servers import records, register, serve  # noqa: F401 - fixtures

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

PAUSE = 10.0  # seconds the server stays frozen
WRITERS = 6  # threads reporting through the server that gets frozen
# What a write through the other server may take at most: the bound, plus a second of slack
# for a busy two-core machine. Without the bound every write would wait out the whole pause.
LIMIT = WRITER_STALL_BOUND + 2.0

# A's backends idle in a transaction that holds a lock on the writer row's table.
_HOLDING = """
    SELECT count(*) FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
    JOIN pg_class c ON c.oid = l.relation
    WHERE a.application_name = %s AND a.state LIKE 'idle in transaction%%'
      AND c.relname = 'events_writer' AND l.granted
"""


class Reporter:
    """Threads reporting distinct summaries on one run through one server, noting what was acknowledged."""

    def __init__(self, server: ServerProcess, run_id: str, token: str, threads: int) -> None:
        self.stop = threading.Event()
        self.sent: list[str] = []
        self.acked: list[str] = []
        self.latencies: list[float] = []
        self._run_id, self._token = run_id, token
        self._client = httpx.Client(base_url=server.url, timeout=PAUSE * 6)
        self._threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(threads)]
        for t in self._threads:
            t.start()

    def _loop(self) -> None:
        while not self.stop.is_set():
            summary = f"{self._run_id}-{uuid.uuid4().hex}"
            self.sent.append(summary)
            body = {"run_id": self._run_id, "token": self._token, "state": "working", "payload": summary}
            began = time.monotonic()
            try:
                response = self._client.post("/report", json=body)
            except httpx.HTTPError:
                continue
            if response.status_code == 200:
                self.latencies.append(time.monotonic() - began)
                self.acked.append(summary)

    def join(self) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(PAUSE * 6)
            assert not t.is_alive(), "a reporter never got an answer"
        self._client.close()


def freeze_mid_write(a: ServerProcess, name: str, admin: psycopg.Connection) -> bool:
    """SIGSTOP `a`, at a moment its backend holds the writer row if one is caught in 200 tries.

    A group that chains onto the head its server last wrote is one statement, which never
    leaves the row held across a round trip; only a group re-chained after another server's
    does (two pipelined round trips). When no such moment is caught, `a` is frozen anyway,
    mid-request, and the rest of the test holds as well: False is returned.
    """
    for _ in range(200):
        os.kill(a.proc.pid, signal.SIGSTOP)
        (holding,) = admin.execute(_HOLDING, (name,)).fetchone()  # type: ignore[misc]
        if holding:
            return True
        os.kill(a.proc.pid, signal.SIGCONT)
        time.sleep(0.01)  # not a wait for a condition: lets A get back into a transaction
    os.kill(a.proc.pid, signal.SIGSTOP)
    return False


def test_a_frozen_server_does_not_stall_the_other(serve, pg_database):  # noqa: F811
    name = f"flightlog_frozen_{uuid.uuid4().hex[:12]}"
    a: ServerProcess = serve(f"&application_name={name}")
    b: ServerProcess = serve()
    other_token = register(b, "other")
    frozen = Reporter(a, "frozen", register(a, "frozen"), WRITERS)
    with psycopg.connect(pg_database, autocommit=True) as admin:
        try:
            freeze_mid_write(a, name, admin)
            paused_at = time.monotonic()
            other = Reporter(b, "other", other_token, 2)
            while time.monotonic() - paused_at < PAUSE:
                time.sleep(0.1)  # the pause itself is what is tested: it lasts PAUSE seconds
            other.join()
        finally:
            os.kill(a.proc.pid, signal.SIGCONT)
    frozen.join()

    assert len(other.acked) >= 20, "the other server hardly wrote while A was frozen"
    ordered = sorted(other.latencies)
    p99 = ordered[int(len(ordered) * 0.99) - 1]
    assert max(ordered) <= LIMIT, f"a write through B took {max(ordered):.2f}s (p99 {p99:.2f}s)"
    assert frozen.acked, "A never wrote again after it resumed"
    logged: Counter[str] = Counter(
        orjson.loads(r.data["payload"]) for r in records(pg_database) if r.type == "RunReported"
    )
    assert max(logged.values()) == 1, "a report was written twice"
    for reporter in (frozen, other):
        mine = {s for s in logged if s.startswith(reporter._run_id + "-")}
        assert set(reporter.acked) <= mine, "an acknowledged report is missing"
        assert mine <= set(reporter.acked), "a report nobody acknowledged is in the log"
    assert a.client.get("/health").status_code == 200
