"""Helpers for the fork tests: a recorded origin run, and what to compare between it and a fork."""

from __future__ import annotations

import os
import textwrap
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from actors import HarnessEvent, ScriptedHarness, System
from eventlog import EventLog, Record, open_log
from projections import TimelineEntry, Views

from .helpers import TURN, WAIT, ManualHarness, wait_pending, wait_until

PROMPT = "list files"


@dataclass(frozen=True, slots=True)
class Origin:
    """A finished run and the seqs of the moments the tests fork it at."""

    run_id: str
    stream: str
    points: dict[str, int]  # before_permission, permission, pending, finished


def record_origin(system: System, controller_id: str = "origin") -> Origin:
    """Play TURN for PROMPT with the request approved; return the run and its fork points."""
    harness = ScriptedHarness(TURN, session_id="origin-session")
    ctrl = system.controller(harness, controller_id=controller_id)
    ctrl.start()
    run_id = ctrl.send(PROMPT)
    [approval] = wait_pending(ctrl)
    system.approvals.resolve(approval.id, "approve", "alice")
    wait_until(ctrl, lambda: ctrl.status() == "idle")
    assert harness.join(WAIT)
    ctrl.close()
    stream = f"controller-{controller_id}"
    events = harness_records(system.log, stream)
    permission = next(r for r in events if r.data["type"] == "permission.request")
    before = max(r.seq for r in events if r.seq < permission.seq)
    published, decided = (
        next(r.seq for r in system.log.read(f"approval-{approval.id}") if r.type == t)
        for t in ("ApprovalPublished", "ApprovalDecided")
    )
    assert permission.seq < published < decided
    points = {
        "before_permission": before,  # the streamed answer is complete; nothing asked yet
        "permission": permission.seq,  # the request is recorded, its approval not yet
        "pending": published,  # the approval waits for a decision
        "finished": system.log.head().seq,  # the run has succeeded
    }
    return Origin(run_id, stream, points)


class GatedHarness(ManualHarness):
    """Starts only when every re-drive racing it has started too (so all pass the first check)."""

    def __init__(self, gate: threading.Barrier) -> None:
        super().__init__()
        self.gate = gate

    def start(self, publish: Callable[[HarnessEvent], Any]) -> str:
        self.gate.wait(WAIT)
        return super().start(publish)


def harness_records(log: EventLog, stream: str, after_seq: int = 0) -> list[Record]:
    """The HarnessEventRecorded records of a stream after a seq."""
    return [r for r in log.read(stream) if r.type == "HarnessEventRecorded" and r.seq > after_seq]


def served(records: list[Record]) -> list[tuple[str, str, Any]]:
    """What a harness published, without run ids and times: (type, id, data)."""
    return [(r.data["type"], r.data["event_id"], r.data["data"]) for r in records]


def strip(entries: list[TimelineEntry]) -> list[tuple[str, ...]]:
    """Timeline entries without their times (a re-drive records at its own moment)."""
    return [(e.id, e.kind, e.role, e.name, e.text, e.detail, e.status) for e in entries]


def timeline(log: EventLog, run_id: str) -> list[tuple[str, ...]]:
    """A run's timeline now, folded from the log alone."""
    return strip(Views(log).timeline(run_id, at=log.head().seq))


def aborted_origin(system: System, idle_at_once: bool) -> tuple[str, ManualHarness]:
    """A run that answered once and was aborted (its harness idles inside abort, or later)."""
    harness = ManualHarness()
    if idle_at_once:
        harness.on_abort = lambda run_id: harness.emit("session.idle", run_id)
    ctrl = system.controller(harness, controller_id="aborted")
    ctrl.start()
    run_id = ctrl.send("long job")
    harness.emit("assistant.message", run_id, "a1", content="working on it")
    ctrl.abort()
    if not idle_at_once:
        harness.emit("session.idle", run_id)
    assert (ctrl.run().status, ctrl.status()) == ("aborted", "idle")
    return run_id, harness


# A program that, for each prompt, writes a line to a marker file (its side effect) and reports it.
MARKER_AGENT = textwrap.dedent(
    """
    import json, sys
    for line in sys.stdin:
        op = json.loads(line)
        if op["op"] != "prompt":
            continue
        call = {"tool_call_id": "w1", "tool_name": "write_file", "arguments": {"path": "marker"}}
        print(json.dumps({"type": "tool.start", "id": "t1", "data": call}), flush=True)
        with open(sys.argv[1], "a") as f:
            f.write(op["run_id"] + "\\n")
        done = {"tool_call_id": "w1", "output": "ok"}
        print(json.dumps({"type": "tool.complete", "id": "t2", "data": done}))
        print(json.dumps({"type": "assistant.message", "id": "m1", "data": {"content": "written"}}))
        print(json.dumps({"type": "session.idle", "id": "i1"}), flush=True)
    """
)


def broker_origin(system: System, run_id: str = "lg-1") -> str:
    """A broker run that reported two steps, asked to deploy (request `deploy-1`), was refused by
    bob, and finished failed; return the approval of its request."""
    broker = system.broker
    broker.create_run(run_id)
    broker.ingest(run_id, "report", {"state": "running", "step": "run_tests", "checkpoint_id": "c-1"})
    broker.ingest(run_id, "report", {"state": "running", "step": "gate"})
    approval = broker.permission_request(run_id, "deploy-1", "deploy", "Deploy web", '{"env": "prod"}')
    system.approvals.resolve(approval, "reject", "bob", identity="cred-bob")
    broker.approval_decided(approval)
    broker.ingest(run_id, "finish", {"status": "failed", "summary": "deploy refused"})
    return approval


def approval_in_file(db: str | os.PathLike[str], run_id: str) -> str:
    """The id of the one approval of run `run_id` in the log file `db` (read only)."""
    log = open_log(db, readonly=True)
    try:
        with System.open(log, scheduler=False) as system:
            [row] = [r for r in system.views.approval_history() if r.run_id == run_id]
            return row.id
    finally:
        log.close()
