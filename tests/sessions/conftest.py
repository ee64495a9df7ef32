"""Fixtures for sessions, projects and tool overrides: a System per backend, Systems on one file."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import HarnessEvent, ScriptedHarness, System
from eventlog import EventLog, ManualClock

COMPACT_SUMMARY = "summary: the user said hi"


def reply(prompt: str) -> list[dict[str, Any]]:
    """The scripted agent: echoes a prompt, summarises on /compact, fails on `fail`."""
    if prompt == "/compact":
        return [{"type": "compaction", "summary": COMPACT_SUMMARY}, {"type": "session.idle"}]
    if prompt == "fail":
        return [{"type": "session.error", "message": "boom"}]
    return [{"type": "assistant.message", "content": f"echo: {prompt}"}, {"type": "session.idle"}]


def scripted() -> ScriptedHarness:
    # Played inside send (the turn's own thread): a turn's events are all recorded by the time
    # its stream ends, without a second thread to wait for.
    return ScriptedHarness(reply, threaded=False)


@pytest.fixture
def harness() -> ScriptedHarness:
    return scripted()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return tmp_path / "workspace"


@pytest.fixture
def system(log: EventLog, clock: ManualClock, harness: ScriptedHarness, workspace: Path) -> Iterator[System]:
    """A System without the scheduler thread, its sessions played by the scripted harness."""
    s = System.open(log, clock=clock, scheduler=False, session_harness=harness, workspace=workspace)
    yield s
    s.close()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "flightlog.db"


@pytest.fixture
def open_system(db_path: Path, clock: ManualClock, workspace: Path) -> Iterator[Callable[..., System]]:
    """Opens Systems on one SQLite file (each with its own log); closes them all afterwards."""
    opened: list[System] = []

    def factory(**kwargs: Any) -> System:
        kwargs.setdefault("clock", clock)
        kwargs.setdefault("scheduler", False)
        kwargs.setdefault("session_harness", scripted())
        kwargs.setdefault("workspace", workspace)
        s = System.open(db_path, **kwargs)
        opened.append(s)
        return s

    yield factory
    for s in reversed(opened):
        s.close()


class GateHarness:
    """A harness whose turns wait for `release` before they answer (to watch a turn in flight)."""

    def __init__(self) -> None:
        self.sent = threading.Event()
        self.release = threading.Event()
        self.aborted: list[str] = []
        self.closed = False
        self._publish: Callable[[HarnessEvent], object] | None = None
        self._threads: list[threading.Thread] = []

    def start(self, publish: Callable[[HarnessEvent], object]) -> str:
        self._publish = publish
        return "gate"

    def send(self, run_id: str, prompt: str, delivery: str) -> None:
        thread = threading.Thread(target=self._play, args=(run_id, prompt), daemon=True)
        self._threads.append(thread)
        thread.start()

    def _play(self, run_id: str, prompt: str) -> None:
        assert self._publish is not None
        self._publish(HarnessEvent("user.message", run_id, f"{run_id}/u", {"content": prompt}))
        self.sent.set()
        if not self.release.wait(30):
            return
        self._publish(HarnessEvent("assistant.message", run_id, f"{run_id}/a", {"content": "released"}))
        self._publish(HarnessEvent("session.idle", run_id, f"{run_id}/i"))

    def abort(self, run_id: str) -> None:
        self.aborted.append(run_id)
        self.release.set()

    def close(self) -> None:
        self.closed = True
        self.release.set()
        for thread in self._threads:
            thread.join(10)
