"""The soak's traffic: the steps agents take against a long-lived server, drawn by weight.

Each step is one agent's request or two, over its own connection, on one of the fixed runs:
reports, heartbeats, permission requests and their answers, control pushes and the polls
that take them, finishes, the operator reading `/api/v1/runs`, and (in the mixed soak) a
new run registered now and then.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from typing import Any

import click
import orjson

from .broker_client import Agent, Connection

# One agent's step: (weight, name). Each names a handler of `Traffic` below.
MIX = (
    (60, "report"),
    (15, "heartbeat"),
    (8, "push_and_poll"),
    (5, "permission"),
    (3, "finish"),
    (3, "operator_runs"),
    (1, "new_run"),
)
# The two soaks: over the fixed set of runs registered at the start, then with new ones too.
FIXED, MIXED = "fixed", "mixed"
MIXES = {FIXED: tuple((weight, name) for weight, name in MIX if name != "new_run"), MIXED: MIX}


def log_events(path: str) -> int:
    """The log's head seq, read from the file by a read-only connection of our own."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        return int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0])
    finally:
        conn.close()


class Traffic:
    """The agents' steps over one server; each step is one agent's request or two."""

    def __init__(self, port: int, operator: dict[str, str], runs: list[Agent]) -> None:
        self.port = port
        self.operator = operator
        self.runs = runs
        self.created = 0
        self._lock = threading.Lock()

    def report(self, a: Agent, n: int) -> None:
        body = {
            "run_id": a.run_id,
            "token": a.token,
            "state": "working",
            "payload": {"tool": "shell", "n": n},
        }
        a.conn.call("/report", body)

    def heartbeat(self, a: Agent, n: int) -> None:
        status, body = a.conn.post("/heartbeat", orjson.dumps({"run_id": a.run_id, "token": a.token}))
        if status != 200:
            raise click.ClickException(f"/heartbeat answered {status}: {body.decode(errors='replace')[:200]}")

    def push_and_poll(self, a: Agent, n: int) -> None:
        message = {"id": f"m{n}", "type": "steer", "run_id": a.run_id, "payload": {"n": n}}
        self._operator(a.conn, "POST", "/push-control", message)  # the server has an operator token
        polled = a.conn.call("/poll-control", {"run_id": a.run_id, "token": a.token})
        if not polled:
            raise click.ClickException(f"a poll of {a.run_id} after a push answered []")

    def permission(self, a: Agent, n: int) -> None:
        request = {"run_id": a.run_id, "token": a.token, "request_id": f"p{n}", "tool_name": "grep"}
        a.conn.call("/permission_request", {**request, "description": "ls", "input_preview": "ls"})
        a.conn.call(
            "/permission", {"run_id": a.run_id, "token": a.token, "request_id": f"p{n}", "behavior": "allow"}
        )

    def finish(self, a: Agent, n: int) -> None:
        body = {"run_id": a.run_id, "token": a.token, "status": "done", "summary": f"step {n}"}
        a.conn.call("/finish", body)

    def operator_runs(self, a: Agent, n: int) -> None:
        self._operator(a.conn, "GET", "/api/v1/runs", None)

    def new_run(self, a: Agent, n: int) -> None:
        with self._lock:
            self.created += 1
            run_id = f"soak-new-{self.created:06d}"
        token = a.conn.call("/register", {"run_id": run_id})["token"]
        a.conn.call("/report", {"run_id": run_id, "token": token, "state": "working", "payload": {}})
        a.conn.call("/finish", {"run_id": run_id, "token": token, "status": "done", "summary": ""})

    def _operator(self, conn: Connection, method: str, path: str, value: Any) -> Any:
        headers = conn.headers
        conn.headers = {**headers, **self.operator}
        try:
            status, body = conn.request(method, path, None if value is None else orjson.dumps(value))
        finally:
            conn.headers = headers
        if status != 200:
            raise click.ClickException(f"{path} answered {status}: {body.decode(errors='replace')[:200]}")
        return orjson.loads(body)


def schedule(seed: int, mix: tuple[tuple[int, str], ...] = MIX) -> Iterator[str]:
    """An endless, reproducible sequence of step names drawn from `mix` by weight."""
    import random

    rng = random.Random(seed)
    names = [name for weight, name in mix for _ in range(weight)]
    while True:
        yield rng.choice(names)
