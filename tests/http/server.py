"""A real `flightlog serve` process on loopback, for end-to-end tests."""

from __future__ import annotations

import contextlib
import gc
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from actors import System
from actors.operators import APPROVER
from tools.http import listen, server_config

from .conftest import bearer, operator_token

LISTENING = re.compile(r"flightlog: listening on (http://127\.0\.0\.1:(\d+))")
STARTUP_TIMEOUT = 60.0


def enrol(db: Path | str, name: str, role: str = APPROVER) -> str:
    """Enrol operator `name` with the tests' token for it on `db` (a file or a URL), as
    `flightlog operators add DB` does, running server or not; the credential id."""
    with System.open(str(db), scheduler=False) as system:
        credential, _ = system.operators.enrol(name, role, by="tests", token=operator_token(name))
    return credential.credential_id


class ServerProcess:
    """`flightlog serve --db DB --port 0`, its output collected by reader threads.

    The URL is read from the server's own "listening" line, so nothing waits by sleeping.
    `registration` is `--registration`: `open` by default, since most of these tests speak the
    seed's protocol, where an agent registers its run itself; `enrolled` is the server's own
    default (tests/http/test_enrolled_server.py). A refused request does not hold its connection
    back (`--refusal-hold 0`), so that a test may go over a bound many times on one connection;
    tests/http/test_refusal_hold.py passes its own.
    """

    def __init__(
        self,
        db: Path | str,
        operator_token: str | None,
        args: tuple[str, ...] = (),
        *,
        registration: str = "open",
    ) -> None:
        self.db = db
        self.operator_token = operator_token
        self.registration = registration
        self.credentials: dict[str, str] = {}  # operator name -> credential id, of those enrolled here
        env = {k: v for k, v in os.environ.items() if k != "FLIGHTLOG_OPERATOR_TOKEN"}
        env["PYTHONUNBUFFERED"] = "1"
        if operator_token is not None:
            env["FLIGHTLOG_OPERATOR_TOKEN"] = operator_token
        argv = [
            sys.executable,
            "-c",
            "from tools.cli import main; main()",
            "serve",
            "--db",
            str(db),
            "--port",
            "0",
            "--registration",
            registration,
            *(() if "--refusal-hold" in args else ("--refusal-hold", "0")),
            *args,
        ]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.stdout, True), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.stderr, False), daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        self.url = self._wait_for_url()
        # Agents send JSON bodies, raw ones too: the wire protocol takes nothing else.
        self.client = httpx.Client(
            base_url=self.url, timeout=30, headers={"Content-Type": "application/json"}
        )

    def create_run(self, run_id: str) -> str:
        """Create run `run_id` through the operator API with the bootstrap token; its token."""
        assert self.operator_token is not None, "creating a run through the API needs the bootstrap token"
        response = self.client.post(
            "/api/v1/runs", json={"run_id": run_id}, headers=bearer(self.operator_token)
        )
        assert response.status_code == 201, response.text
        return str(response.json()["token"])

    def enrol(self, name: str, role: str = APPROVER) -> dict[str, str]:
        """Enrol operator `name` on the server's database; the headers of their token.

        Each name gets its own credential, as each person deciding has their own token; its
        id is kept in `credentials`. The server sees the enrolment from its next request on.
        """
        self.credentials[name] = enrol(self.db, name, role)
        return bearer(operator_token(name))

    def _read(self, stream, lines: list[str], announce: bool) -> None:
        for raw in stream:
            line = raw.decode("utf-8", "replace")
            lines.append(line)
            if announce:
                self._lines.put(line)
        if announce:
            self._lines.put(None)

    def _wait_for_url(self) -> str:
        while True:
            try:
                line = self._lines.get(timeout=STARTUP_TIMEOUT)
            except queue.Empty:
                self.close()
                raise AssertionError(f"the server did not start: {self.output()}") from None
            if line is None:
                self.close()
                raise AssertionError(f"the server exited ({self.proc.returncode}): {self.output()}")
            if match := LISTENING.search(line):
                return match.group(1)

    def output(self) -> str:
        """Everything the process printed so far (complete once it has exited)."""
        return "".join(self.stdout) + "".join(self.stderr)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal the server, wait for it to exit, and return its exit code."""
        self.client.close()
        self.proc.send_signal(sig)
        code = self.proc.wait(60)
        for reader in self._readers:
            reader.join(10)
        return code

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs at all."""
        if hasattr(self, "client"):
            self.client.close()
        self.proc.kill()
        self.proc.wait(60)
        for reader in self._readers:
            reader.join(10)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        self.proc.wait(60)
        for reader in self._readers:
            reader.join(10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


WORKER_HEADER = "flightlog-worker"
PIN_ATTEMPTS = 500  # fresh connections tried until the kernel hands one to the wanted worker


class WorkerClient:
    """An httpx-like client whose requests are all answered by one worker of `serve --workers N`.

    Each thread keeps its own connection, made (again, until the kernel hands it to the wanted
    worker) before a request is sent on it: a `/health` on the kept-alive connection says
    which worker holds it (the `Flightlog-Worker` header), and the request follows on it.
    """

    def __init__(self, url: str, worker: int) -> None:
        self.url = url
        self.worker = str(worker)
        self._local = threading.local()
        self._all: list[httpx.Client] = []
        self._lock = threading.Lock()

    def _connected(self) -> httpx.Client:
        for _ in range(PIN_ATTEMPTS):
            client: httpx.Client | None = getattr(self._local, "client", None)
            if client is None:
                client = httpx.Client(
                    base_url=self.url,
                    timeout=30,
                    headers={"Content-Type": "application/json"},
                    limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
                )
                with self._lock:
                    self._all.append(client)
                self._local.client = client
            if client.get("/health").headers.get(WORKER_HEADER) == self.worker:
                return client
            client.close()  # held by the other worker: a new connection, a new draw
            self._local.client = None
        raise AssertionError(f"no connection reached worker {self.worker} in {PIN_ATTEMPTS} tries")

    def request(self, method: str, path: str, **options: Any) -> httpx.Response:
        client = self._connected()
        response = client.request(method, path, **options)
        client.cookies.clear()  # like a script, not a browser: a cookie goes only where a test sends it
        assert response.headers.get(WORKER_HEADER) == self.worker, "the connection moved to another worker"
        return response

    def get(self, path: str, **options: Any) -> httpx.Response:
        return self.request("GET", path, **options)

    def post(self, path: str, **options: Any) -> httpx.Response:
        return self.request("POST", path, **options)

    def delete(self, path: str, **options: Any) -> httpx.Response:
        return self.request("DELETE", path, **options)

    def close(self) -> None:
        with self._lock:
            for client in self._all:
                client.close()
            self._all.clear()


class Worker:
    """One worker of a `ServerProcess` started with `--workers N`, as if it were a server of its
    own: its `client` reaches that worker only; stopping it stops the whole process."""

    def __init__(self, process: ServerProcess, index: int) -> None:
        self.process = process
        self.url = process.url
        self.db = process.db
        self.client = WorkerClient(process.url, index)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.client.close()
        if self.process.proc.poll() is not None:
            return self.process.proc.returncode
        return self.process.stop(sig)

    def output(self) -> str:
        return self.process.output()

    def close(self) -> None:
        self.client.close()
        self.process.close()


@contextlib.contextmanager
def served_app(
    app: Any, keep_alive: float | None = None, read_timeout: float = 10.0, *, access_log: bool = False
) -> Iterator[int]:
    """`app` served by uvicorn with flightlog's protocol on a thread; its port."""
    sock = listen("127.0.0.1", 0)
    thresholds = gc.get_threshold()
    config = server_config(app, sock, access_log=access_log, log_level="warning", read_timeout=read_timeout)
    gc.set_threshold(*thresholds)  # the server's collector settings stay the server's
    if keep_alive is not None:
        config.timeout_keep_alive = keep_alive
    started = threading.Event()

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            started.set()

    server = Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        assert started.wait(30)
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
