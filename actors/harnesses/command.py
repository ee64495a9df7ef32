"""CommandHarness: runs any program that speaks JSON lines on stdin and stdout.

The program is the agent; flightlog is its operator. One process per controller session, in
its own process group, so an abort can kill everything it started and leave no zombie.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from .._errors import HarnessError
from .harness import IMMEDIATE, PERMISSION_REQUEST, SESSION_IDLE, SESSION_SHUTDOWN, HarnessEvent, Publish
from .scripted import JOIN_TIMEOUT, TERMINAL

KILL_TIMEOUT = 5.0  # how long a killed program gets to go on SIGTERM before SIGKILL


@dataclass(eq=False, slots=True)
class _Process:
    """One run of the agent program, with the thread reading its events."""

    popen: subprocess.Popen[str]
    active_run: str = ""  # the run whose prompt it was given and that has not ended yet
    killed: bool = False
    write_lock: threading.Lock = field(default_factory=threading.Lock)
    stderr_tail: deque[str] = field(default_factory=lambda: deque(maxlen=20))
    threads: list[threading.Thread] = field(default_factory=list)


class CommandHarness:
    """Runs a program that speaks JSON lines on stdin and stdout, one process per session.

    flightlog writes `{"op": "prompt", "run_id", "prompt", "delivery"}` (with `"resume"` when
    it hands over a fork's turn after a changed decision: `resume`),
    `{"op": "permission", "id", "decision"}` (approve, reject or expired) and
    `{"op": "abort", "run_id"}`; the program writes events `{"type", "run_id", "id", "data"}`
    (a missing run_id means the run it was last given). A reader thread publishes them; for a
    `permission.request` it waits for the decision and writes it back with the request's id.

    The program runs in its own process group. `abort` kills the group (SIGTERM, then SIGKILL
    after `kill_timeout`), reaps it, and publishes `session.idle`; the next `send` starts the
    program again. A program that exits by itself publishes `session.shutdown` with its exit
    code for the run in progress. `env` is added to this process's environment.
    """

    def __init__(
        self,
        argv: Sequence[str],
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        *,
        session_id: str = "",
        kill_timeout: float = KILL_TIMEOUT,
    ) -> None:
        if isinstance(argv, str | bytes) or not argv:
            raise TypeError("argv is a non-empty list of program arguments")
        self.argv = [str(a) for a in argv]
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        self.kill_timeout = kill_timeout
        self.aborts: list[str] = []
        self.errors: list[BaseException] = []
        self._session_id = session_id
        self._publish: Publish | None = None
        self._proc: _Process | None = None
        self._all: list[_Process] = []
        self._lock = threading.Lock()
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The running program's process id (None when none is running)."""
        proc = self._proc
        return proc.popen.pid if proc is not None else None

    def start(self, publish: Publish) -> str:
        with self._lock:
            self._publish = publish
            self._closed = False
            self._session_id = self._session_id or f"cmd-{uuid.uuid4()}"
            if self._proc is None or self._proc.popen.poll() is not None:
                self._proc = self._spawn()
            return self._session_id

    def _spawn(self) -> _Process:
        env = {**os.environ, **self.env} if self.env is not None else None
        try:
            popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.cwd,
                env=env,
                text=True,
                encoding="utf-8",
                errors="replace",
                start_new_session=True,  # its own process group: abort kills the whole tree
            )
        except OSError as e:
            raise HarnessError(f"cannot run {self.argv[0]}: {e}") from e
        proc = _Process(popen)
        for name, target in (("reader", self._read), ("stderr", self._read_stderr)):
            t = threading.Thread(target=target, args=(proc,), name=f"harness-{name}-{popen.pid}", daemon=True)
            proc.threads.append(t)
        for t in proc.threads:
            t.start()
        self._all.append(proc)
        return proc

    def send(self, run_id: str, prompt: str, delivery: str, *, resume: dict[str, str] | None = None) -> None:
        with self._lock:
            if self._publish is None or self._closed:
                raise HarnessError("the command harness is not started")
            if self._proc is None or self._proc.popen.poll() is not None:
                if self._proc is not None:
                    self._proc.popen.wait()
                self._proc = self._spawn()
            proc = self._proc
        # Before the write: the program may answer before `_write` returns, and its events
        # without a run id belong to this run.
        proc.active_run = run_id
        message = {"op": "prompt", "run_id": run_id, "prompt": prompt, "delivery": delivery}
        self._write(proc, {**message, "resume": resume} if resume else message)

    def resume(self, run_id: str, prompt: str, at: dict[str, str]) -> None:
        """Hand the program a turn it resumes: the prompt op carries `resume`, where it goes on
        (a fork's changed decision: `origin_run_id`, `after`, `tool_call_id`, `decision`)."""
        self.send(run_id, prompt, IMMEDIATE, resume=at)

    def _write(self, proc: _Process, message: dict[str, Any]) -> None:
        stdin = proc.popen.stdin
        if stdin is None:
            raise HarnessError("the agent program has no stdin")
        try:
            with proc.write_lock:
                stdin.write(json.dumps(message) + "\n")
                stdin.flush()
        except (OSError, ValueError) as e:  # a broken pipe, or a pipe we closed
            raise HarnessError(f"the agent program is not running: {e}") from e

    def _read(self, proc: _Process) -> None:
        stdout: IO[str] | None = proc.popen.stdout
        assert stdout is not None
        for line in stdout:
            if proc.killed or self._closed or not line.strip():
                continue  # drain: a killed program's last words belong to no run
            self._deliver(proc, line)
        code = proc.popen.wait()
        run_id = proc.active_run
        if proc.killed or self._closed or not run_id:
            return
        for t in proc.threads[1:]:
            t.join(self.kill_timeout)
        data = {"reason": f"exit code {code}", "exit_code": code, "stderr": "".join(proc.stderr_tail)}
        self._publish_quietly(HarnessEvent(SESSION_SHUTDOWN, run_id, f"{run_id}/exit-{proc.popen.pid}", data))

    def _deliver(self, proc: _Process, line: str) -> None:
        try:
            message = json.loads(line)
            if not isinstance(message, dict) or not isinstance(message.get("type"), str):
                raise ValueError("not an event object")
        except ValueError:
            message = {
                "type": "warning",
                "data": {"message": f"unreadable agent output: {line.strip()[:200]}"},
            }
        run_id = str(message.get("run_id") or proc.active_run)
        if not run_id:
            return
        data = message.get("data")
        event = HarnessEvent(
            message["type"],
            run_id,
            str(message.get("id") or ""),
            dict(data) if isinstance(data, dict) else {},
        )
        if event.type in TERMINAL and run_id == proc.active_run:
            proc.active_run = ""
        resolution = self._publish_quietly(event)
        if event.type == PERMISSION_REQUEST:
            decision = str(getattr(resolution, "decision", "") or "expired")
            with contextlib.suppress(HarnessError):
                self._write(proc, {"op": "permission", "id": event.id, "decision": decision})

    def _read_stderr(self, proc: _Process) -> None:
        stderr: IO[str] | None = proc.popen.stderr
        assert stderr is not None
        for line in stderr:
            proc.stderr_tail.append(line)

    def _publish_quietly(self, event: HarnessEvent) -> object:
        publish = self._publish
        if publish is None:
            return None
        try:
            return publish(event)
        except Exception as e:  # noqa: BLE001 - e.g. a stale run's event; kept for inspection
            self.errors.append(e)
            return None

    def abort(self, run_id: str) -> None:
        """Kill the program's process group, reap it, then publish `session.idle` for the run."""
        with self._lock:
            proc, self._proc = self._proc, None
            self.aborts.append(run_id)
        if proc is not None:
            with contextlib.suppress(HarnessError):
                self._write(proc, {"op": "abort", "run_id": run_id})
            self._kill(proc)
        self._publish_quietly(HarnessEvent(SESSION_IDLE, run_id, f"{run_id}/aborted"))

    def _kill(self, proc: _Process) -> None:
        proc.killed = True
        popen = proc.popen
        if popen.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                popen.stdin.close()
        self._signal_group(popen.pid, signal.SIGTERM)
        try:
            popen.wait(timeout=self.kill_timeout)
        except subprocess.TimeoutExpired:
            self._signal_group(popen.pid, signal.SIGKILL)
            popen.wait()
        # Whatever of the group outlived its leader goes too (a live group keeps its id unused).
        self._signal_group(popen.pid, signal.SIGKILL)

    @staticmethod
    def _signal_group(pgid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)

    def close(self) -> None:
        """Kill the program, reap it, and join the threads that read it."""
        with self._lock:
            self._closed = True
            proc, self._proc = self._proc, None
            every = list(self._all)
            self._all = []
        if proc is not None:
            self._kill(proc)
        for p in every:
            if p.popen.poll() is None:
                self._kill(p)
            for t in p.threads:
                t.join(JOIN_TIMEOUT)
            for pipe in (p.popen.stdin, p.popen.stdout, p.popen.stderr):
                if pipe is not None:
                    with contextlib.suppress(OSError, ValueError):
                        pipe.close()
