"""A real `flightlog serve` process on loopback, for end-to-end tests."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx

from actors import System
from actors.operators import APPROVER

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
    default (tests/http/test_enrolled_server.py).
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
