"""The bench broker's client side: the server process it starts, and an agent's connection."""

from __future__ import annotations

import contextlib
import os
import queue
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from http.client import HTTPConnection
from typing import IO, Any

import click
import orjson

WAIT = 60.0  # seconds any one step may take before the benchmark gives up
TOKEN_ENV = "FLIGHTLOG_OPERATOR_TOKEN"
LISTENING = "flightlog: listening on http://"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
IDLE = 1.0  # seconds after which a connection is reopened (uvicorn closes idle ones after 5)


class ServerProcess:
    """`flightlog serve --port 0` over `db` in a child process; `port` is read from its output.

    With `ceiling`, the child is instead the HTTP stack's ceiling server
    (`tools.bench.broker_ceiling`), which stores nothing.
    """

    def __init__(
        self, db: str, operator_token: str, extra: tuple[str, ...] = (), *, ceiling: bool = False
    ) -> None:
        self.db = db
        env = {**os.environ, TOKEN_ENV: operator_token, "PYTHONUNBUFFERED": "1"}
        if ceiling:
            argv = [sys.executable, "-m", "tools.bench.broker_ceiling"]
        else:
            argv = [sys.executable, "-m", "tools.cli", "serve", "--db", db, "--port", "0"]
            # The bench's agents register their own runs, as the seed's clients do.
            argv += ["--registration", "open", "--no-access-log", "--log-level", "warning", *extra]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        self.errors: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        assert self.proc.stdout is not None
        assert self.proc.stderr is not None
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, True), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, False), daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        try:
            self.port = self._wait_for_port()
        except BaseException:
            self.close()
            raise

    def _read(self, stream: IO[bytes], announce: bool) -> None:
        for raw in stream:
            line = raw.decode("utf-8", "replace")
            if announce:
                self._lines.put(line)
            else:
                self.errors.append(line)
        if announce:
            self._lines.put(None)

    def _wait_for_port(self) -> int:
        deadline = time.monotonic() + WAIT
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                self.proc.wait(WAIT)
                raise click.ClickException(f"the server exited: {''.join(self.errors)[-2000:]}")
            if LISTENING in line:
                return int(line.rsplit(":", 1)[1].strip())
        raise click.ClickException("the server did not start in time")

    def cpu_seconds(self) -> float:
        """CPU time the server process has used so far, user and system, all its threads."""
        with open(f"/proc/{self.proc.pid}/stat", "rb") as f:
            stat = f.read()
        # The command name may hold spaces: the fields are counted after its closing parenthesis.
        fields = stat[stat.rindex(b")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def head(self) -> int:
        """The last seq of the server's log, read from its file (read-only, as a second reader)."""
        with contextlib.closing(sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)) as conn:
            return int(conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0])

    def health(self) -> None:
        """Ask `/health` on a new connection: the server's loop has taken what came before it."""
        conn = Connection(self.port)
        try:
            status, body = conn.request("GET", "/health")
        finally:
            conn.close()
        if status != 200:
            raise click.ClickException(f"/health answered {status}: {body[:200]!r}")

    def close(self) -> None:
        """SIGTERM, then SIGKILL if it has not stopped in time."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(WAIT)
        for reader in self._readers:
            reader.join(WAIT)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


class Connection:
    """One keep-alive HTTP/1.1 connection to the server on loopback.

    A connection idle for a while is reopened before its next request rather than reused:
    the server closes idle ones (uvicorn's keep-alive timeout), and a request that meets a
    closing connection cannot tell whether it was handled.
    """

    def __init__(self, port: int, headers: dict[str, str] | None = None) -> None:
        self.conn = HTTPConnection("127.0.0.1", port, timeout=WAIT)
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        self.used = time.monotonic()

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        if time.monotonic() - self.used > IDLE:
            self.conn.close()
        self.conn.request(method, path, body, self.headers)
        response = self.conn.getresponse()
        answer = response.read()
        self.used = time.monotonic()
        return response.status, answer

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        return self.request("POST", path, body)

    def call(self, path: str, value: Any) -> Any:
        """POST `value` as JSON; the decoded JSON answer, or ClickException on any other status."""
        status, body = self.post(path, orjson.dumps(value))
        if status != 200:
            raise click.ClickException(f"{path} answered {status}: {body.decode(errors='replace')[:200]}")
        return orjson.loads(body)

    def close(self) -> None:
        self.conn.close()


@dataclass
class Agent:
    """A registered run and its own connection."""

    run_id: str
    token: str
    conn: Connection
